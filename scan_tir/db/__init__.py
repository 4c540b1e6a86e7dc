"""Tools for MetaSchedule tuning databases: read tolerantly, summarise, show, verify,
export, plot, compare, prune. Each concept is a module of its own; the CLI (``scan-tir db``)
and the notebooks call these functions."""

from .compare import compare
from .export import to_csv, to_json
from .plot import plot
from .provenance import provenance
from .prune import prune
from .records import DatabaseError, Entry, Problem, TuningDB, load, repair
from .replay import replay
from .show import render, show
from .summary import summary, top
from .verify import verify

__all__ = [
    "DatabaseError",
    "Entry",
    "Problem",
    "TuningDB",
    "compare",
    "load",
    "plot",
    "provenance",
    "prune",
    "render",
    "repair",
    "replay",
    "show",
    "summary",
    "to_csv",
    "to_json",
    "top",
    "verify",
]
