"""scan-tir: first-class recurrent tensor programs (te.scan) for TVM MetaSchedule."""

from setuptools import setup

setup(
    name="scan-tir",
    version="0.1.0",
    description="Lower te.scan to S-TIR and tune recurrences with MetaSchedule",
    python_requires=">=3.10",
    packages=[
        "scan_tir",
        "scan_tir.db",
        "scan_tir.experimental",
        "scan_tir.lower",
        "scan_tir.relax",
        "scan_tir.transform",
        "scan_tir.tune",
        "scan_tir.workloads",
        "meta_rules",
        "postprocs",
    ],
    install_requires=[
        # ffi 0.1.15.x segfaults in tvm.ir.save_json, i.e. on every MetaSchedule
        # database write (../shared/FIELD_NOTES.md); pin both.
        "apache-tvm==0.27.0.post1",
        "apache-tvm-ffi==0.1.14.post1",
        "numpy",
        "xgboost",
        "psutil",
        "cloudpickle",
        "matplotlib",  # scan-tir db plot
        # Inside Jupyter, MetaSchedule prints its tuning table with pandas and fails
        # without it (tvm/s_tir/meta_schedule/utils.py, print_interactive_table).
        "pandas",
    ],
    extras_require={
        # nbclient, nbformat, ipykernel: test_notebook.py runs notebooks/ headless;
        # tornado: test_rpc.py starts an RPC tracker.
        # torch: tests/test_workloads.py checks the zoo against nn.GRU, nn.RNN and nn.LSTM.
        # onnx, onnxruntime: tests/test_relax_onnx.py builds ONNX RNN nodes and checks
        # scan_tir.relax.from_onnx against onnxruntime (skipped where they are missing).
        "tests": [
            "pytest",
            "pytest-xdist",
            "hypothesis",
            "ruff",
            "nbclient",
            "nbformat",
            "ipykernel",
            "tornado",
            "torch==2.13.0",
            "onnx",
            "onnxruntime",
        ],
        # The CPU build on local disk; a bare "torch" pulls a multi-GB CUDA build.
        # onnxruntime: the ONNX baseline (its own CPU LSTM/GRU/RNN kernels).
        # numba: the channel-parallel selective scan and minGRU baselines.
        "benchmarks": ["torch==2.13.0", "onnx", "onnxruntime", "numba"],
    },
    entry_points={"console_scripts": ["scan-tir=scan_tir.cli:main"]},
)
