"""Bad input is refused by the real program: one `pulumi.RunError` that names the key and shows the
value, no traceback, and not a single resource registered with the engine.

The cases are data files in tests/bad_configs/, one bad configuration each, with a comment saying
what is wrong. Each file holds:

    overrides:  merged into the dev stack's config (see conftest.dev_config; null removes a key)
    key:        the key the message must name (project prefix added unless the key has a namespace)
    value:      text the message must show (the value received, or e.g. "required"/"unknown key")
    stack:      optional stack name (default dev), for defaults derived from the stack name
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from conftest import dev_config, rendered, with_part

import stack_config
from offline import engine
from offline.mocks import OfflineMocks
from tests.paths import TESTS

CASES_DIR = TESTS / "bad_configs"
CASES = sorted(CASES_DIR.glob("*.yaml"))
HEADER = "invalid configuration for stack"


def load_case(path: Path) -> dict[str, Any]:
    case = yaml.safe_load(path.read_text())
    assert set(case) <= {"overrides", "key", "value", "stack"}, f"{path.name}: unexpected fields {sorted(case)}"
    return case


def full_key(key: str) -> str:
    return key if ":" in key else f"{stack_config.PROJECT}:{key}"


def run_bad(case: dict[str, Any]) -> tuple[pulumi.RunError, engine.RecordingMonitor]:
    monitor = engine.RecordingMonitor(OfflineMocks())
    config = dev_config(**(case.get("overrides") or {}))
    with pytest.raises(pulumi.RunError) as caught:
        engine.render(case.get("stack", "dev"), config=config, monitor=monitor)
    return caught.value, monitor


def test_corpus_is_large_and_every_case_says_what_is_wrong():
    assert len(CASES) >= 30
    for path in CASES:
        first = path.read_text().splitlines()[0]
        assert first.startswith("# ") and len(first) > 10, f"{path.name} must open with a comment saying what is wrong"


def _leaf_keys() -> set[str]:
    out = {stack_config.LOCATION_KEY}
    for key in stack_config.SCHEMA:
        if key.fields:
            out.update(f"{key.name}.{f.name}" for f in key.fields)
        else:
            out.add(key.name)
    return {full_key(k) for k in out}


def test_every_config_key_has_a_bad_case():
    covered = {full_key(load_case(p)["key"]) for p in CASES}
    missing = sorted(_leaf_keys() - covered)
    assert not missing, f"add a case to tests/bad_configs/ for: {missing}"


def test_the_base_config_is_good():
    """Control: the dev config every case starts from renders (the session's render of it), so each failure
    is the case's doing; and the monitor run_bad watches records what a program declares (here the Azure
    half of that config, the half declared first), so its empty record below means nothing was declared."""
    assert rendered("dev", dev_config()).resources
    monitor = engine.RecordingMonitor(OfflineMocks())
    rendering = engine.render("dev", config=with_part(dev_config(), "azure"), monitor=monitor)
    assert rendering.resources and monitor.registrations


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bad_config_is_refused_with_one_message_naming_the_key(path: Path):
    case = load_case(path)
    err, monitor = run_bad(case)
    message = str(err)
    key, value = full_key(case["key"]), str(case["value"])

    # One message: a header, then exactly one problem line - the one this case is about.
    assert message.startswith(HEADER), message
    problems = [line.strip() for line in message.splitlines()[1:] if line.strip()]
    assert len(problems) == 1, f"expected one problem, got: {problems}"
    assert problems[0].startswith(key + ":"), f"{problems[0]!r} does not name {key}"
    assert value in problems[0], f"{problems[0]!r} does not show {value!r}"

    # No traceback: Pulumi prints a RunError without one, and nothing is chained onto it.
    assert err.__cause__ is None and err.__suppress_context__, "the RunError must be raised `from None`"
    assert "Traceback" not in message

    # Nothing was registered with the engine: validation runs before the first resource.
    assert monitor.registrations == []
    assert [u for u in monitor.resources if "pulumi:pulumi:Stack" not in u] == []


def test_every_problem_is_reported_at_once():
    """Several bad keys: one RunError listing each of them, so a user fixes them in one go."""
    err, monitor = run_bad({"overrides": {"rdmaMode": "sr-iov", "ibPool": {"nodeCount": 0},
                                          "versions": {"volcano": "latest"}}})
    message = str(err)
    for key in ("rdmaMode", "ibPool.nodeCount", "versions.volcano"):
        assert full_key(key) + ":" in message
    assert monitor.registrations == []
