"""``LoweringOptions``: every choice the converter makes that changes the function.

Listed once, here, and carried whole from the command line to the converter: tuning
databases match functions structurally, so two lowerings of one graph are two workloads,
and the options are recorded in the workload tag the function carries
(``scan_tir.workloads``) to say which one a database holds.

The default is the fast path, the combination every headline figure in notes.md uses:
vectorisable activations and state copies made inside the step. :meth:`legacy` is the
converter as it was before the options existed, the function most committed databases
under ``experiments/results`` were tuned for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from ..errors import ScanLoweringError


@dataclass(frozen=True)
class LoweringOptions:
    """How ``scan_tir.create_prim_func`` lowers a graph with scans.

    Parameters
    ----------
    fast_math
        float32 ``exp``, ``sigmoid`` and ``tanh`` as TVM's vectorisable polynomials
        (``scan_tir.lower.fast_math``): LLVM has no vector ``exp``, and in a small
        recurrence libm calls are most of a step.
    copies_in_step
        A copy of every step's new state (topi's ``hidden_states``) computed inside the
        step, from the rows just written, instead of in a pass over the whole state after
        the scan; a state read by nothing else then keeps two rows
        (``scan_tir.lower.step_copies``).
    merge_updates
        Experimental: elementwise state updates that can share a loop nest written as one
        multi-output compute, so a step can be tiled by its outputs
        (``scan_tir.experimental``).
    """

    fast_math: bool = True
    copies_in_step: bool = True
    merge_updates: bool = False

    @classmethod
    def legacy(cls) -> LoweringOptions:
        """Every option off: the functions the older committed databases hold."""
        return cls(fast_math=False, copies_in_step=False, merge_updates=False)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in fields(cls))

    def to_dict(self) -> dict[str, bool]:
        """What the workload tag records."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, bool]) -> LoweringOptions:
        """The options a workload tag recorded; unknown names are refused, missing ones
        take the default."""
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise ScanLoweringError(
                f"LoweringOptions: unknown option(s) {unknown}; the options are {cls.names()}."
            )
        return replace(cls(), **{k: bool(v) for k, v in values.items()})

    @property
    def label(self) -> str:
        """``default``, ``legacy``, or the options that are on (``fast_math+merge_updates``)."""
        if self == LoweringOptions():
            return "default"
        on = [name for name in self.names() if getattr(self, name)]
        return "+".join(on) if on else "legacy"
