# The two first commands: `make synth` (render the stack offline) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STACK  ?= dev

.PHONY: venv test synth golden lint clean

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed

test: venv
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf build .pytest_cache
