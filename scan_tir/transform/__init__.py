"""Passes on lowered or tuned functions.

``layout_free`` (weights MetaSchedule may repack) and ``prepacked`` (a tuned function run
on weights packed ahead of time). Fast math, which the converter applies as one of its
options, lives in ``scan_tir.lower``, so that ``lower`` never imports ``transform``.
"""

from .layout_free import layout_free
from .prepacked import elide_param_copies, prepacked

__all__ = ["elide_param_copies", "layout_free", "prepacked"]
