"""``layout_free``: let MetaSchedule repack weights (RewriteLayout) for a tuned function.

MetaSchedule's RewriteLayout postproc (src/s_tir/meta_schedule/postproc/rewrite_layout.cc)
repacks a parameter into the layout its reader's tiled loops want, but only a parameter
listed in the function's ``layout_free_buffers`` attribute: only the caller knows which
inputs are weights that can be packed ahead of time. TE marks them with a compute's
``layout_free_placeholders`` attribute, which topi's LSTM does not set; this marks them on
the lowered function instead. A recurrent weight is read at every step, so packing it once
pays for itself many times over.
"""

from __future__ import annotations

from collections.abc import Iterable

from tvm import tirx

from ..errors import ScanLoweringError


def layout_free(func: tirx.PrimFunc, params: Iterable[str]) -> tirx.PrimFunc:
    """``func`` with the parameters named in ``params`` marked layout-free."""
    names = [str(p.name) for p in func.params]
    indices = set(int(i) for i in func.attrs.get("layout_free_buffers", []) if func.attrs)
    for name in params:
        if name not in names:
            raise ScanLoweringError(
                f"layout_free: the function has no parameter '{name}'; its parameters are {names}."
            )
        indices.add(names.index(name))
    return func.with_attr("layout_free_buffers", sorted(indices))
