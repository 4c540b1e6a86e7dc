"""Command-line pieces the experiment scripts share."""

from __future__ import annotations

import argparse
from collections.abc import Iterable


def name_list(parser: argparse.ArgumentParser, value: str, known: Iterable[str]) -> list[str]:
    """A comma-separated list of names (``--models a,b``), each one of ``known``; anything
    else is a usage error (``parser.error``, exit code 2)."""
    known = list(known)
    names = [n for n in value.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown names {unknown}; known: {', '.join(known)}")
    return names
