"""Tag every committed tuning database's function with its workload and lowering options.

Run once, when ``LoweringOptions`` replaced the converter's booleans (notes.md, section 3,
"Lowering options"): databases made before it hold untagged functions (experiments/results/A,
found by a structural match against the configs) or tags without options. Each database's
workload line is rewritten with the function the zoo builds today for its directory's
config: ``-FAST``/``-INSTEP``/``-MERGED`` suffixes as named, none meaning every option off,
which was the default when they were tuned. A database is rewritten only where that
function, tag aside, is structurally the function it holds; the tuning records are not
touched (a trace replays on the function whatever its attributes).

    python experiments/archive/tag_databases.py experiments/results tests/data
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tvm
import tvm_ffi
from tvm.s_tir import meta_schedule as ms

from scan_tir import LoweringOptions, workloads
from scan_tir.workloads.base import WORKLOAD_ATTR


def _untagged(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    tagged = func.attrs is not None and WORKLOAD_ATTR in func.attrs
    return func.without_attr(WORKLOAD_ATTR) if tagged else func


def _function_for(work_dir: Path, stored: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    tag = stored.attrs.get(WORKLOAD_ATTR) if stored.attrs is not None else None
    if tag is not None and "options" not in json.loads(str(tag)):
        spec = json.loads(str(tag))
        return workloads.get(spec["name"], LoweringOptions.legacy(), **spec["sizes"]).prim_func()
    base, options = workloads.parse_config(work_dir.name)
    return workloads.get(base, options or LoweringOptions.legacy()).prim_func()


def tag(work_dir: Path) -> str:
    path = work_dir / "database_workload.json"
    (line,) = path.read_text().splitlines()
    stored = ms.database.Workload.from_json(json.loads(line)).mod["main"]
    if stored.attrs is not None and WORKLOAD_ATTR in stored.attrs:
        if "options" in json.loads(str(stored.attrs[WORKLOAD_ATTR])):
            return "tagged already"
    func = _function_for(work_dir, stored)
    if not tvm_ffi.structural_equal(_untagged(stored), _untagged(func)):
        return "NOT the config's function: left as it is"
    workload = ms.database.Workload(tvm.IRModule({"main": func}))
    path.write_text(json.dumps(workload.as_json()) + "\n")
    return f"tagged {func.attrs[WORKLOAD_ATTR]}"


if __name__ == "__main__":
    for root in sys.argv[1:]:
        for path in sorted(Path(root).rglob("database_workload.json")):
            print(f"{path.parent}: {tag(path.parent)}", flush=True)
