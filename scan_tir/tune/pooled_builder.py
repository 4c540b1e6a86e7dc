"""``PooledBuilder``: MetaSchedule's LocalBuilder with one pool of workers for a whole run.

LocalBuilder (tvm/s_tir/meta_schedule/builder/local_builder.py) starts a fresh pool of
worker processes for every batch of candidates, against a memory leak of long-lived
workers, and once more for its sanity check. Each fresh worker imports TVM, seconds of
CPU, so on two cores a tuning run of small batches (a model's many small tasks, a test's
budget of a few trials) spends most of its time starting workers, not compiling. This
builder keeps its pool and replaces a worker after ``uses`` builds
(``PopenPoolExecutor``'s ``maximum_process_uses``), which bounds the leak the same way.
Each build still runs in a worker process with LocalBuilder's timeout, through
LocalBuilder's own worker function.
"""

from __future__ import annotations

from collections.abc import Callable

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
from tvm.s_tir.meta_schedule.utils import cpu_count
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind


@derived_object
class PooledBuilder(PyBuilder):
    """Builds candidates in a pool of ``max_workers`` processes kept for the builder's life.

    Parameters
    ----------
    max_workers
        Worker processes; default the logical CPUs, as LocalBuilder.
    timeout_sec
        Per build; a worker that overruns is killed and replaced.
    f_build, f_export
        As LocalBuilder's (a callable is sent to the workers).
    uses
        Builds per worker before it is replaced.
    """

    def __init__(
        self,
        *,
        max_workers: int | None = None,
        timeout_sec: float = 30.0,
        f_build: Callable | str | None = None,
        f_export: Callable | str | None = None,
        uses: int = 32,
    ) -> None:
        super().__init__()
        self.f_build, self.f_export, self.timeout_sec = f_build, f_export, timeout_sec
        self.pool = PopenPoolExecutor(
            max_workers=max_workers or cpu_count(logical=True),
            timeout=timeout_sec,
            maximum_process_uses=uses,
        )

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        jobs = [
            (self.f_build, self.f_export, b.mod, b.target, _serialize_params(b.params))
            for b in build_inputs
        ]
        results = []
        for done in self.pool.map_with_error_catching(lambda job: _worker_func(*job), jobs):
            if done.status == StatusKind.COMPLETE:
                results.append(BuilderResult(done.value, None))
            elif done.status == StatusKind.TIMEOUT:
                why = f"PooledBuilder: Timeout, killed after {self.timeout_sec} seconds"
                results.append(BuilderResult(None, why))
            else:
                why = f"PooledBuilder: An exception occurred\n{done.value}"
                results.append(BuilderResult(None, why))
        return results
