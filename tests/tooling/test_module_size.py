"""No module over 500 lines, the size this codebase set itself (issue 37): every Python module of the
project, its tests included; not the data and golden files under tests/, nor the environments and tools
beside the code. A module that grows past it does several jobs: split it by job."""

from __future__ import annotations

import os
from pathlib import Path

from tests.paths import ROOT

MAX_LINES = 500
# Not the project's modules: recorded data and goldens, and what is installed or built beside the code.
EXCLUDED = {"tests/data", "tests/golden", ".venv", ".venv-scan", "tools/bin", "tools/node_modules", "build", ".git",
            "node_modules"}


def modules(root: Path) -> list[Path]:
    """Every .py file under `root` outside EXCLUDED (symlinked directories, such as .venv, not followed)."""
    found = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root)
        dirs[:] = sorted(d for d in dirs if (here / d).as_posix() not in EXCLUDED and d != "__pycache__")
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
    return found


def oversized(root: Path) -> dict[str, int]:
    """{module: lines} for each module over its limit."""
    sizes = {p.relative_to(root).as_posix(): len(p.read_text(errors="replace").splitlines()) for p in modules(root)}
    return {name: lines for name, lines in sizes.items() if lines > MAX_LINES}


def test_no_module_is_over_500_lines():
    assert len(modules(ROOT)) > 50  # the walk found the project (verify/, components/, offline/, tests/ ...)
    assert oversized(ROOT) == {}, f"over {MAX_LINES} lines: split by job"


def test_the_check_sees_a_long_module_and_not_the_data(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "pkg" / "fits.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "tests" / "data" / "recorded.py").write_text("x = 1\n" * 5000)
    (tmp_path / "tests" / "test_long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "tests" / "test_fits.py").write_text("x = 1\n" * MAX_LINES)
    assert oversized(tmp_path) == {"pkg/long.py": MAX_LINES + 1, "tests/test_long.py": MAX_LINES + 1}
