"""Passes on lowered or tuned functions.

``layout_free`` (weights MetaSchedule may repack), ``prepacked`` (a tuned function run
on weights packed ahead of time), ``split_weight_prepack`` (the same for a function that
dispatches among kernels, each packing its own way) and ``pad_rows`` (a product hoisted
out of a scan computed over whole tiles at a symbolic length), and ``PersistentLaunch`` with the TIR
pipeline ``PIPELINE`` every scan-tir build uses (a time loop run inside one thread-pool
launch, a barrier per nest; functions that StorageRewrite could merge unsafely,
``merged_unsafely``, lowered with its reuse off), which starts with ``ConcurrentLanes``
(independent scans side by side, a thread each), ``PipelinedScans`` (a stacked layer a chunk of
steps behind the one that feeds it, a thread each) and ``BoundTileBuffers`` (a tile's own
buffers sized by the tile at a symbolic size, which TVM 0.27 sizes INT_MAX), and ends
with ``InlineVectorIndices`` (the lane offsets TVM's CSE binds above a parallel launch,
where LLVM loses them, put back in each access). Fast
math, which the converter applies as one of its options, lives in ``scan_tir.lower``, so
that ``lower`` never imports ``transform``.
"""

from .concurrent_lanes import ConcurrentLanes
from .layout_free import layout_free
from .padded_rows import pad_rows
from .persistent_launch import PersistentLaunch
from .pipeline import PIPELINE, merged_unsafely
from .pipelined_scans import PipelinedScans
from .prepacked import elide_param_copies, prepacked
from .tile_buffers import BoundTileBuffers
from .vector_indices import InlineVectorIndices
from .weight_prepack import prepack_module, split_weight_prepack

__all__ = [
    "PIPELINE",
    "BoundTileBuffers",
    "ConcurrentLanes",
    "InlineVectorIndices",
    "PersistentLaunch",
    "PipelinedScans",
    "elide_param_copies",
    "layout_free",
    "merged_unsafely",
    "pad_rows",
    "prepack_module",
    "prepacked",
    "split_weight_prepack",
]
