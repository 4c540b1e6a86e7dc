"""The workload zoo: recurrences people use, each with its numpy (and PyTorch) reference.

``get("lstm", seq=80)`` returns a :class:`Workload`; ``CONFIGS`` names the sizes the
experiments use, and a config name may carry suffixes that choose the lowering options
(``get("A-FAST-INSTEP")``, :func:`parse_config`: the one place config names are read);
:func:`workload_of` recovers the workload from a lowered function (or a tuning database's
entry for it).
"""

from __future__ import annotations

import json
from dataclasses import replace

from tvm import tirx

from ..errors import ScanLoweringError
from ..lower.options import LoweringOptions
from .base import WORKLOAD_ATTR, Recurrence, Workload
from .bidirectional_lstm import BILSTM
from .elman import RNN_RELU, RNN_TANH
from .gru import GRU
from .lstm import LSTM
from .mingru import MINGRU
from .selective_scan import SELECTIVE_SCAN
from .stacked_lstm import LSTM_STACKED

RECURRENCES: dict[str, Recurrence] = {
    r.name: r for r in (LSTM, GRU, RNN_TANH, RNN_RELU, LSTM_STACKED, BILSTM, SELECTIVE_SCAN, MINGRU)
}

# The experiments' configs (issues 3 and 4): name -> (recurrence, sizes).
CONFIGS: dict[str, tuple[str, dict[str, int]]] = {
    "A": ("lstm", {"seq": 80, "batch": 1, "input": 512, "hidden": 256}),
    "B": ("lstm", {"seq": 256, "batch": 1, "input": 16, "hidden": 16}),
    "C": ("lstm", {"seq": 100, "batch": 1, "input": 1024, "hidden": 1024}),
    "D": ("lstm", {"seq": 50, "batch": 64, "input": 512, "hidden": 512}),
    "E": ("gru", {"seq": 80, "batch": 1, "input": 512, "hidden": 256}),
    "A2": ("lstm_stacked", {"seq": 80, "batch": 1, "input": 512, "hidden": 256, "layers": 2}),
    "Abi": ("bilstm", {"seq": 80, "batch": 1, "input": 512, "hidden": 256}),
    "S": ("selective_scan", {"seq": 1024, "batch": 1, "d_model": 768, "d_state": 16}),
    "M": ("mingru", {"seq": 1024, "batch": 1, "input": 768, "hidden": 768}),
}


#: Config-name suffixes, each an option turned on (``A-FAST-INSTEP``); ``-LEGACY`` turns
#: every option off. A name without suffixes takes the default options.
SUFFIXES: dict[str, str] = {
    "FAST": "fast_math",
    "INSTEP": "copies_in_step",
    "MERGED": "merge_updates",
}
LEGACY = "LEGACY"


def parse_config(name: str) -> tuple[str, LoweringOptions | None]:
    """``"a-fast-instep"`` -> ``("A", LoweringOptions(fast_math=True, copies_in_step=True,
    merge_updates=False))``: the config and the options its suffixes name, exactly (an option
    not named is off), or None without suffixes. Case does not matter."""
    base, *suffixes = name.split("-")
    configs = {c.upper(): c for c in CONFIGS}
    if base.upper() not in configs:
        raise ScanLoweringError(f"unknown config '{base}' in '{name}'; known: {sorted(CONFIGS)}.")
    suffixes = [x.upper() for x in suffixes]
    bad = [x for x in suffixes if x not in SUFFIXES and x != LEGACY]
    if bad or (LEGACY in suffixes and len(suffixes) > 1):
        raise ScanLoweringError(
            f"config '{name}': suffixes are -{LEGACY} alone or any of "
            f"{['-' + x for x in SUFFIXES]} (options on, the others off), got {bad or suffixes}."
        )
    if not suffixes:
        return configs[base.upper()], None
    on = {SUFFIXES[x]: True for x in suffixes if x != LEGACY}
    return configs[base.upper()], replace(LoweringOptions.legacy(), **on)


def config_name(base: str, options: LoweringOptions | None) -> str:
    """The canonical name of config ``base`` lowered with ``options`` (None: no suffix),
    suffixes in the options' order: what work dirs under experiments/results are called."""
    if options is None:
        return base
    on = [suffix for suffix, option in SUFFIXES.items() if getattr(options, option)]
    return "-".join([base, *on]) if on else f"{base}-{LEGACY}"


def get(name: str, options: LoweringOptions | None = None, **sizes: int) -> Workload:
    """The recurrence ``name`` at ``sizes``, or the experiments' config ``name`` ("A",
    "A-FAST-INSTEP"), lowered with ``options`` (default: the config's suffixes, else
    ``LoweringOptions()``)."""
    if name in RECURRENCES:
        return RECURRENCES[name](options, **sizes)
    try:
        base, named = parse_config(name)
    except ScanLoweringError:
        raise ScanLoweringError(
            f"unknown workload '{name}'; known: {sorted(RECURRENCES)} and configs "
            f"{sorted(CONFIGS)} (with suffixes {['-' + x for x in [*SUFFIXES, LEGACY]]})."
        ) from None
    if sizes:
        raise ScanLoweringError(
            f"config '{name}' fixes its sizes {CONFIGS[base][1]}; give the recurrence's name "
            f"('{CONFIGS[base][0]}') to choose other sizes."
        )
    if named is not None and options is not None and named != options:
        raise ScanLoweringError(
            f"config '{name}' names its options by its suffixes ({named.label}); pass them "
            f"either there or as options ({options.label}), not both."
        )
    recurrence, fixed = CONFIGS[base]
    return RECURRENCES[recurrence](named or options, **fixed)


def workload_of(func: tirx.PrimFunc) -> Workload | None:
    """The workload a function was lowered from, with its options, read from its
    ``scan_tir.workload`` attribute; None for a function the zoo did not make. A tag
    without options predates them: the legacy lowering."""
    attrs = func.attrs
    if attrs is None or WORKLOAD_ATTR not in attrs:
        return None
    return workload_from_tag(str(attrs[WORKLOAD_ATTR]))


def workload_from_tag(tag: str) -> Workload:
    """The workload a ``scan_tir.workload`` tag (``Workload.to_json``) names."""
    spec = json.loads(tag)
    options = LoweringOptions.from_dict(spec.get("options", LoweringOptions.legacy().to_dict()))
    return get(spec["name"], options, **spec["sizes"])


__all__ = [
    "CONFIGS",
    "RECURRENCES",
    "SUFFIXES",
    "Recurrence",
    "Workload",
    "config_name",
    "get",
    "parse_config",
    "workload_from_tag",
    "workload_of",
]
