"""The code base stays clean under the linter the Makefile runs (`make lint`)."""

import subprocess
import sys

from tests.paths import ROOT


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
