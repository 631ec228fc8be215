"""The Makefile is the front door: `make` alone lists every target with what it does, and no target
reinstalls an environment whose pinned requirements have not changed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paths import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(*args: str) -> str:
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_make_alone_lists_every_target_with_what_it_does():
    phony = re.search(r"^\.PHONY:(.*)$", MAKEFILE, re.M).group(1).split()
    assert {"help", "synth", "test", "reference", "golden"} <= set(phony)
    listed = dict(re.findall(r"^  ([a-z0-9-]+) +(\S.*)$", _make(), re.M))
    assert _make("help") == _make()
    assert set(listed) == set(phony), "every .PHONY target needs a `## what it does` comment, and only those"
    assert all(len(text) > 10 for text in listed.values()), listed


def test_an_installed_venv_is_not_reinstalled_for_a_newer_file_date(tmp_path: Path):
    """The stamp carries the requirements' content hash: with it present, `make -n synth` runs no pip."""
    stamp = re.search(r"^\S*: requirements", MAKEFILE, re.M)
    assert stamp is None, "an environment rule must not depend on the requirements' file dates"
    plan = _make("-n", "synth", f"VENV={tmp_path}")
    (stamp_line,) = [line for line in plan.splitlines() if "touch" in line]
    (tmp_path / stamp_line.split("touch ")[-1].split("/")[-1]).touch()
    again = _make("-n", "synth", f"VENV={tmp_path}")
    assert "pip install" in plan and "pip install" not in again, again


def _venv_interpreter(tmp_path: Path, *args: str) -> str:
    """The interpreter `make venv` would make tmp_path/venv with (its plan, `make -n`), with no PYTHON in the
    environment (make would take it from there)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    plan = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "-n", "venv", f"VENV={tmp_path / 'venv'}",
                           *args], capture_output=True, text=True, check=True, timeout=60, env=env).stdout
    (line,) = [line for line in plan.splitlines() if " -m venv " in line]
    return line.split("||")[-1].split(" -m venv ")[0].strip()


def _script(path: Path, exit_code: int) -> str:
    path.write_text(f"#!/bin/sh\nexit {exit_code}\n")
    path.chmod(0o755)
    return str(path)


def test_the_venv_is_made_from_the_systems_python_where_it_can_make_one(tmp_path: Path):
    """The system's python3 when its check passes (3.11 or newer, with venv and ensurepip), else python3 from
    PATH; PYTHON, when given, wins (docs/ci-and-previews.md: the suite's CPU on each build)."""
    able, unable = _script(tmp_path / "able", 0), _script(tmp_path / "unable", 1)
    assert _venv_interpreter(tmp_path, f"SYSTEM_PYTHON={able}") == able
    assert _venv_interpreter(tmp_path, f"SYSTEM_PYTHON={unable}") == "python3"
    assert _venv_interpreter(tmp_path, f"SYSTEM_PYTHON={tmp_path / 'none'}") == "python3"
    given = "/opt/py/bin/python3.12"
    assert _venv_interpreter(tmp_path, f"SYSTEM_PYTHON={able}", f"PYTHON={given}") == given
    # and the check itself, on this machine's /usr/bin/python3 when there is one
    system = Path("/usr/bin/python3")
    if system.exists():
        check = subprocess.run([str(system), "-c", "import ensurepip, sys, venv; sys.exit(sys.version_info < (3, 11))"],
                               capture_output=True, timeout=60)
        assert _venv_interpreter(tmp_path) == (str(system) if check.returncode == 0 else "python3")
