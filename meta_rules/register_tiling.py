"""``RegisterTiling``: multi-level tiling whose innermost tile is a register block.

MultiLevelTiling samples every level of its SSRSRS tiling alike, so a good GEMM kernel is
a rare point of its space. At C (a 100 x 4096 x 1024 input GEMM) the best of 256 trials
tiled the rows [2, 2, 25, 1], the columns [2, 8, 4, 64] and the reduction [32, 32]: one
row in the innermost tile, so each vector of weights loaded feeds one FMA, and the
accumulators go back to memory at every outer reduction step. That kernel alone runs at
about 300 GFLOP/s on this Zen 5; with 10 rows x 2 vectors innermost and the whole
reduction inside, at 470-500, the rate of oneDNN's best GEMM here (experiments/gemm_tiles.py;
notes.md, section 3, "Night of 2026-11-30"). That is the shape of the micro-kernels BLAS
libraries write by hand: a block of the output held in vector registers while the
reduction streams past it. The same measurements bound the block: 16-20 accumulators ran
fastest, 32 or more spilled, and cutting the reduction in four halved the rate.

This rule builds that structure. The register block is fixed by the CPU, as in BLIS's
micro-kernels: ``max_vectors`` (2) vectors of the output's contiguous axis, vectorised,
by as many rows of one loop as keep the accumulators within 5/8 of the vector registers
(20 of AVX-512's 32: 10 rows), unrolled; the largest divisors of the extents within
those bounds. The row loop is the longest that indexes the operand the columns do not
index (X's rows, h's batch rows: one broadcast feeds a row of FMAs), or, in a batch-1
step, the gate axis (independent accumulators). What the search samples is everything
around the block: the spatial loops tiled in three levels S0 S1 S2 above it (S0 becomes
the parallel loop; S2 at most 16, ``sample_perfect_tile``'s default), the whole
reduction between S2 and the block. A first version also
sampled the block (rows up to 12, 1 or 2 vectors): in 128 trials at D its best candidate
held a 4 x 1-vector block, 62.8 ms; the fixed block is the result of the measurements
above, made once for this CPU. The parallel loop and the unroll depth are left to the
postprocessors, as for MultiLevelTiling. The rule sits beside MultiLevelTiling
(``meta_rules.Alternatives``), so the stock tilings stay in the space, except on the
matrix-matrix products it :meth:`claims <RegisterTiling.claims>` (``meta_rules.Preferred``).

Touches: the loops of one reduction block whose iterators are each bound to one loop
(split, reorder, vectorize, unroll); outside scans, the block's lone elementwise consumer
(reverse_compute_at under the block's tiles). Scoped like MultiLevelTiling: never a scan's
time loop or step block.
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import LoopRV, SBlockRV
from tvm.target import Target
from tvm.target.codegen import llvm_get_cpu_features

from scan_tir.lower.vocabulary import DATA_PAR, Role, block_realize, block_role


def vector_lanes(target: Target, bits: int = 32) -> int:
    """float32 lanes of ``target``'s widest vector register (16 with AVX-512).

    Read from the CPU's features: TVM 0.27's ``llvm_get_vector_width`` answers with the
    host's width whatever CPU the target names (512 for haswell on this Zen 5).
    """
    features = llvm_get_cpu_features(target)
    width = 512 if "avx512f" in features else 256 if "avx" in features else 128
    return width // bits


def vector_registers(target: Target) -> int:
    """How many vector registers ``target`` has (x86-64: 32 with AVX-512, else 16)."""
    return 32 if "avx512f" in llvm_get_cpu_features(target) else 16


def _indexed_by(region, var: tirx.Var) -> bool:
    return any(
        any(v.same_as(var) for v in tirx.analysis.undefined_vars(r.min, [])) for r in region
    )


def _dense_axes(
    sch: Schedule, block: SBlockRV, lanes: int
) -> tuple[list, list, int, int, bool] | None:
    """(spatial loops, reduction loops, index of the column loop, index of the row loop
    among the spatial ones, whether the rows reuse the columns' operand), or None when
    ``block`` is not a reduction whose output's last axis is one spatial loop of a multiple
    of ``lanes`` iterations.

    The row loop is the longest spatial loop that indexes an operand the columns do not
    index (a row of X, a batch row of h: one broadcast feeds a vector of FMAs, and each
    vector of weights loaded feeds every row); without one (a batch-1 step, a
    matrix-vector product), the last other spatial loop longer than 1, whose rows then
    give independent accumulators; or -1.
    """
    node = sch.get(block)
    loops = sch.get_loops(block)
    if node.init is None or len(node.writes) != 1 or len(loops) != len(node.iter_vars):
        return None
    realize = block_realize(sch, block, loops[-1])
    spatial, reduce, spatial_vars, column = [], [], [], None
    last = node.writes[0].region[-1].min
    for loop, iv, value in zip(loops, node.iter_vars, realize.iter_values):
        loop_node = sch.get(loop)
        if not value.same_as(loop_node.loop_var) or not isinstance(loop_node.extent, tirx.IntImm):
            return None
        if iv.iter_type == DATA_PAR:
            if last.same_as(iv.var):
                column = len(spatial)
            spatial.append(loop)
            spatial_vars.append(iv.var)
        else:
            reduce.append(loop)
    if not reduce or column is None or int(sch.get(spatial[column]).extent) % lanes:
        return None
    extents = [int(sch.get(loop).extent) for loop in spatial]
    broadcast = [r.region for r in node.reads if not _indexed_by(r.region, spatial_vars[column])]
    others = [i for i in range(len(spatial)) if i != column and extents[i] > 1]
    rows = [i for i in others if any(_indexed_by(region, spatial_vars[i]) for region in broadcast)]
    if rows:
        return spatial, reduce, column, max(rows, key=lambda i: extents[i]), True
    return spatial, reduce, column, others[-1] if others else -1, False


def _fuse_epilogue(sch: Schedule, block: SBlockRV, at: LoopRV) -> None:
    """Compute the product's lone elementwise consumer (a bias) per register block, at
    ``at``, when both are outside scans.

    Otherwise the hoisted input GEMM's output goes out to memory and comes back for the
    bias: at D two passes over 26 MB, more than L3 holds. Fused, the product's buffer
    shrinks to one block (TVM compacts it to its accesses under ``at``), as MultiLevelTiling's
    write cache does (its ``reuse_write``, schedule_rule/multi_level_tiling.cc). Inside a
    step the consumers are postprocs.FuseStepEpilogue's to place.
    """
    if block_role(sch, block) != Role.OUTSIDE:
        return
    consumers = sch.get_consumers(block)
    if len(consumers) != 1 or block_role(sch, consumers[0]) != Role.OUTSIDE:
        return
    if any(iv.iter_type != DATA_PAR for iv in sch.get(consumers[0]).iter_vars):
        return
    try:
        sch.reverse_compute_at(consumers[0], at, preserve_unit_loops=True)
    except (s_tir.ScheduleError, ValueError):
        pass  # the consumer needs more than one block (a transpose, a reduction over rows)


def _largest_divisor(extent: int, most: int) -> int:
    return max(d for d in range(1, min(extent, most) + 1) if extent % d == 0)


@derived_object
class RegisterTiling(PyScheduleRule):
    """Tile a reduction block as S0 S1 S2 R S3: S3 a fixed register block of rows (one
    loop) by ``max_vectors`` vectors of columns, S0-S2 sampled."""

    def __init__(self, max_vectors: int = 2, lanes: int = 0, registers: int = 0) -> None:
        super().__init__()
        self.max_vectors = max_vectors
        self.lanes = lanes
        self.registers = registers

    def _initialize_with_tune_context(self, context) -> None:
        if not self.lanes:
            self.lanes = vector_lanes(context.target)
        if not self.registers:
            self.registers = vector_registers(context.target)

    def _most_rows(self) -> int:
        return max(1, self.registers * 5 // 8 // self.max_vectors)

    def claims(self, sch: Schedule, block: SBlockRV) -> bool:
        """Whether ``block`` is a matrix-matrix product this rule's block suits: its rows
        reuse each loaded vector of weights, at least half the row budget of them (5 of
        AVX-512's 10). There the register block is what oneDNN's kernels are, and
        :class:`meta_rules.Preferred` offers it alone."""
        axes = _dense_axes(sch, block, self.lanes)
        if axes is None or not axes[4]:
            return False
        extent = int(sch.get(axes[0][axes[3]]).extent)
        return 2 * _largest_divisor(extent, self._most_rows()) >= self._most_rows()

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        axes = _dense_axes(sch, block, self.lanes)
        if axes is None:
            return [sch]
        spatial, reduce, column, row, _ = axes
        levels: list[list[LoopRV]] = [[], [], []]  # S0 S1 S2
        rows, columns = [], None
        for index, loop in enumerate(spatial):
            extent = int(sch.get(loop).extent)
            if index == column:
                width = self.lanes * _largest_divisor(extent // self.lanes, self.max_vectors)
                loop, columns = sch.split(loop, [None, width])
            elif index == row:
                loop, inner = sch.split(loop, [None, _largest_divisor(extent, self._most_rows())])
                rows.append(inner)
            tiles = sch.sample_perfect_tile(loop, n=3)
            for level, part in zip(levels, sch.split(loop, tiles)):
                level.append(part)
        sch.reorder(*levels[0], *levels[1], *levels[2], *reduce, *rows, columns)
        sch.vectorize(columns)
        for loop in rows:
            sch.unroll(loop)
        _fuse_epilogue(sch, block, levels[2][-1])
        return [sch]

    def clone(self) -> ScheduleRule:
        return RegisterTiling(self.max_vectors, self.lanes, self.registers)
