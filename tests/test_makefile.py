"""The Makefile is the front door: `make` alone lists every target with what it does, and no target
reinstalls an environment whose pinned requirements have not changed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = (ROOT / "Makefile").read_text()
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(*args: str) -> str:
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_make_alone_lists_every_target_with_what_it_does():
    phony = re.search(r"^\.PHONY:(.*)$", MAKEFILE, re.M).group(1).split()
    assert {"help", "synth", "test", "reference", "golden"} <= set(phony)
    listed = dict(re.findall(r"^  ([a-z-]+) +(\S.*)$", _make(), re.M))
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
