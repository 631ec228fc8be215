"""No resource of an example stack changes its identity unnoticed: the URN (parents' type chain, type
token, name) and the parent of every resource are as tests/golden/urns/<stack>.txt records them. A
refactor that moves one would replace or orphan that resource on every deployed stack; `make golden`
rewrites the files when a change means to, and its diff shows each moved line."""

from __future__ import annotations

import difflib

import pytest
from conftest import rendered

from offline import urns
from tests.paths import ROOT

GOLDEN = ROOT / "tests" / "golden" / "urns"
STACKS = sorted(f.name[len("Pulumi."):-len(".yaml")] for f in ROOT.glob("Pulumi.*.yaml"))


def test_every_example_stack_has_its_identities_recorded():
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_no_resource_changes_its_urn_or_parent(stack: str):
    want = urns.golden_path(GOLDEN, stack).read_text().splitlines()
    got = urns.identity_lines(rendered(stack))
    diff = "\n".join(difflib.unified_diff(want, got, "recorded", "rendered", lineterm="", n=0))
    assert got == want, f"{stack}: resource identities moved (a replace on every deployed stack):\n{diff}"
