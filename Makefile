# Both targets do all their own set-up: a .venv/ at the repo root, installed from setup.py.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: main test lint

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The main job: convert, build and time topi.nn.lstm (configs A and B) against numpy and
# TVM's Relax path, and print the table.
main: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[benchmarks]"
	TVM_NUM_THREADS=2 $(BIN)/python experiments/bench_convert.py

test: $(BIN)/python
	$(BIN)/pip install --quiet -e ".[tests]"
	$(BIN)/ruff check .
	TVM_NUM_THREADS=2 $(BIN)/python -m pytest -q tests
