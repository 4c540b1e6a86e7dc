"""What every experiment script shares, so that two scripts never time, build or feed a
function two ways.

- ``timing``: latencies (``time_evaluator`` for TVM modules, a ``perf_counter`` loop for
  Python callables) and medians.
- ``check``: outputs against the reference, before anything is timed.
- ``build``: the target, compiling a PrimFunc, arguments by parameter name.
- ``prepack``: packing a tuned function's weights once, as a deployment does.
- ``database``: finding, opening and summarising a config's tuning database.
- ``torch_baselines``, ``onnx_baseline`` and ``relax_baseline``: PyTorch eager and
  ``torch.compile``, onnxruntime's own RNN kernels at a thread count (on a workload's module
  or a model), and TVM's own Relax path for the LSTM.
- ``models`` (the Relax benchmark's two models), ``frontends`` (export and the three
  importers), ``torch_module`` (eager and cold ``torch.compile`` of a module), ``limited`` (a
  call in a child process with a time limit), ``cli`` (name lists on the command line): the
  model benchmarks, ``relax_models.py`` and ``relax_import.py``.
- ``bound``: the hardware bound (from ``experiments/machine.py``'s measured constants).
- ``report``: formatting, JSON, threads and load average.

Inputs always come from the workload itself (``Workload.input_arrays``) and references from
its numpy (``Workload.numpy``): one distribution per workload, the one it is meant for.
The scripts run from the repository root as ``python experiments/<script>.py``, which puts
``experiments/`` on ``sys.path``; that is how ``bench`` and ``machine`` are found.
"""
