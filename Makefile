# Both targets do all their own set-up: a .venv/ at the repo root, installed from setup.py.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: main test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The main job: a small tuning experiment. Tune topi.nn.lstm at configs A and B (32 trials
# each; the default lowering options, i.e. the fast path: vectorisable activations and the
# state copies made inside the step) with scan_tir.scan_space, then time it side by side
# with the untuned module, PyTorch (eager and torch.compile), onnxruntime, numpy and TVM's
# Relax path, and print the table. (Other configs and full budgets: experiments/tune.py,
# see notes.md.)
main: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[benchmarks]"
	rm -rf build/main-tuning
	TVM_NUM_THREADS=2 $(BIN)/python experiments/tune.py --configs A,B \
		--trials 32 --work-dir build/main-tuning

test: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[tests]"
	$(BIN)/ruff check .
# Two pytest workers, one per core, each test file on one worker (its module fixtures
# built once): most of the suite's time is single-threaded compilation.
	TVM_NUM_THREADS=2 $(BIN)/python -m pytest -q -n 2 --dist loadfile tests
