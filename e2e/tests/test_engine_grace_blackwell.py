"""The real Pulumi engine on the Grace Blackwell layers (e2e/stacks/Pulumi.e2e-gb200.yaml, rdmaMode sriov, and
Pulumi.e2e-gb300.yaml, rdmaMode dra: the NVIDIA DRA driver and DRANET from the reference archives), each on a
fresh control plane of its stack's pools: preview, up, a preview that must find no change, and a destroy that
leaves nothing but the CRDs Helm keeps. The stand-ins are test_engine_lifecycle.py's; no DRA driver runs, and
with the fabric test off nothing claims a device, so no ResourceSlice is needed."""

from __future__ import annotations

import pytest

from e2e import lifecycle
from e2e.lifecycle import DESTROY_SECONDS, UP_SECONDS


@pytest.mark.parametrize("pools", ["gb200", "gb300"])
def test_preview_up_no_change_and_destroy(planes, pools):
    plane, _, _ = planes.fresh(pools, with_volcano=False)  # why: test_engine_lifecycle.py's dev fixture
    stack = lifecycle.Stack(f"e2e-{pools}", planes.bin)
    before = lifecycle.listed(plane)
    stack.start()
    try:
        assert any(s["op"] == "create" for s in stack.preview_steps())
        stack.run("up", "--yes", "--skip-preview", timeout=UP_SECONDS)
        stack.run("preview", "--expect-no-changes", "--diff")
    finally:
        stack.run("destroy", "--yes", "--skip-preview", timeout=DESTROY_SECONDS)
        print(f"[engine] {stack.name} step times (s): {stack.times}")
    others, crds = lifecycle.left_after_destroy(plane, before)
    assert others == set(), f"left after destroy: {sorted(others)}"
    print(f"[engine] CRDs Helm kept: {sorted(crds)}")
