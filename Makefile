# The two commands of the README:
#   make demo   - simulated fleet -> detectors -> alerts on the terminal + metrics on :9108
#   make test   - installs and starts every real service it needs, then the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test services lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/fleetepi demo

services: $(BIN)/.installed
	bash scripts/install-services.sh

test: services
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -ra

lint: $(BIN)/.installed
	VENV=$(VENV) bash scripts/check

bench: $(BIN)/.installed
	$(BIN)/python bench/replay.py
	$(BIN)/python bench/detection.py

clean:
	rm -rf $(VENV) .cache
