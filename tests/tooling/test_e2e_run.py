"""`python -m e2e.run` (e2e/run.py), the tier's entry point, without running the tier: which tests a
command line runs, and that CI never skips the tier (issue 49: a tier that cannot run fails the run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import run


@pytest.mark.parametrize("args, whole", [
    ([], True),
    (["-k", "volcano"], True),  # an expression narrows the whole tier
    (["-k", "e2e"], True),  # a value of -k is no path, though a folder of that name exists
    (["e2e/tests/test_volcano.py"], False),
    (["-x", "e2e/tests/test_certifier.py::test_a_node_with_a_node_problem_detector_condition_stays_held"], False),
], ids=["nothing", "expression", "expression-named-as-a-folder", "file", "node-id"])
def test_the_whole_tier_runs_only_when_no_test_file_or_node_is_named(args, whole):
    argv = run.pytest_argv(args)
    assert (run.TESTS in argv) is whole, argv
    assert argv[len(argv) - len(args):] == args, "the given arguments are passed on as they are"


def test_under_ci_a_tier_whose_tools_are_missing_fails_with_the_reason(monkeypatch, capsys):
    """The build budget spent (a tool not built): outside CI the tier is skipped and says so (exit 0); under
    CI the run fails (exit 1) with the same reason."""
    monkeypatch.setattr(run.os, "geteuid", lambda: 0)
    monkeypatch.setattr(run.shutil, "which", lambda name: "/usr/bin/go")
    monkeypatch.setattr(run.preflight, "problem", lambda: None)
    monkeypatch.setattr(run.cluster, "tools", lambda budget: Path("/nonexistent-bin"))
    monkeypatch.setattr(run.cluster, "netns_up", lambda: pytest.fail("the tier must not start"))
    monkeypatch.delenv("CI", raising=False)
    assert run.main(["--budget", "60"]) == 0
    assert "SKIPPED" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    assert run.main(["--budget", "60"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "not built within the build budget of 60s" in out and "vc-scheduler" in out
