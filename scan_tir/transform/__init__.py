"""Passes on lowered or tuned functions.

``layout_free`` (weights MetaSchedule may repack), ``prepacked`` (a tuned function run
on weights packed ahead of time) and ``pad_rows`` (a product hoisted out of a scan
computed over whole tiles at a symbolic length). Fast math, which the converter applies
as one of its options, lives in ``scan_tir.lower``, so that ``lower`` never imports
``transform``.
"""

from .layout_free import layout_free
from .padded_rows import pad_rows
from .prepacked import elide_param_copies, prepacked

__all__ = ["elide_param_copies", "layout_free", "pad_rows", "prepacked"]
