"""Passes on lowered or tuned functions.

``fast_math`` (vectorisable activations), ``layout_free`` (weights MetaSchedule may
repack), ``prepacked`` (a tuned function run on weights packed ahead of time).
"""

from .fast_math import fast_math
from .layout_free import layout_free
from .prepacked import elide_param_copies, prepacked

__all__ = ["elide_param_copies", "fast_math", "layout_free", "prepacked"]
