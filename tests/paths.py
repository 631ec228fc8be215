"""Where the checkout and the tests' shared files are, for the tests in their folders by tier and package
(tests/unit/<package>, tests/stack, tests/fidelity, tests/tooling): a test takes these, not a path counted up
from its own file, which a move would break. A plain module, importable as `tests.paths` from anywhere
(e2e/tests and a fresh interpreter's render too), unlike conftest."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
DATA = TESTS / "data"
