# Both targets do all their own set-up: a .venv/ at the repo root, installed from setup.py.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: main test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The main job: a small tuning experiment. Tune topi.nn.lstm at configs A and B (32 trials
# each; vectorisable activations, scan_tir.fast_math) with scan_tir.scan_space, then time it
# side by side with the untuned module, PyTorch, numpy and TVM's Relax path, and print the
# table. (Full budgets and configs C, D: experiments/tune_lstm.py, see notes.md.)
main: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[benchmarks]"
	rm -rf build/main-tuning
	TVM_NUM_THREADS=2 $(BIN)/python experiments/tune_lstm.py --configs A-fast,B-fast \
		--trials 32 --work-dir build/main-tuning

test: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[tests]"
	$(BIN)/ruff check .
	TVM_NUM_THREADS=2 $(BIN)/python -m pytest -q tests
