# Two commands a new user runs: `make run` and `make test`. Everything else is set up by them.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
# llama-cpp-python builds from source (about 12 minutes on 2 cores); pip caches the built wheel,
# so only the first install on a machine pays for it. LLAVA is the multimodal library we do not use.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

.PHONY: run test lint typecheck check bench screenshot clean

run: $(STAMP) $(MODEL)
	$(BIN)/floodgate --model $(MODEL)

test: $(STAMP) $(MODEL)
	QT_QPA_PLATFORM=offscreen $(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check app tests models
	$(BIN)/ruff format --check app tests models

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(STAMP) $(MODEL)
	mkdir -p build
	QT_QPA_PLATFORM=offscreen $(BIN)/floodgate bench --model $(MODEL) --json build/bench.json

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[test]'
	touch $@

$(MODEL): | $(BIN)/python
	$(BIN)/python models/fetch_default_model.py models

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
