"""The real Pulumi engine (e2e/engine.py) on a cluster where "another team" already runs Volcano: its pinned
release manifest, read from the reference copy as the stack reads it, applied with kubectl under that team's
field manager. The stack (e2e/stacks/Pulumi.e2e-preinstalled.yaml) is told so (existingCluster.preinstalled:
[volcano], stack/preinstalled.py) and must leave every object of that manifest alone.

In order: a preview succeeds before Volcano is there (it reads nothing of the cluster); `up` then stops at once,
before any resource, naming the missing CRD; after the team's apply, `up` succeeds without declaring any Volcano
object, a second preview finds no change, and `destroy` removes what the stack made. Every object of the manifest
is then still there, the same object (uid), unchanged (generation where the server keeps one, else
resourceVersion: controllers write status, which moves only resourceVersion), and none carries a field of the
stack's. The stand-ins are test_engine_lifecycle.py's: kwok plays each kubelet, so the manifest's Deployments
and its admission-init Job come up without a container running; no Volcano process runs."""

from __future__ import annotations

import json
from unittest import mock

import yaml

from components.platform import volcano
from e2e import engine, lifecycle
from e2e.lifecycle import DESTROY_SECONDS, UP_SECONDS
from stack_config import parse

STACK = "e2e-preinstalled"
TEAM = "another-team"  # the other owner's field manager


def release_manifest(stack: lifecycle.Stack) -> str:
    """Volcano's pinned release manifest as the stack reads it: the reference copy, checked against its sha256."""
    cfg = parse(stack.config, STACK)
    where = {k: v for k, v in engine.environment(stack.bin).items() if k in (volcano.CACHE_ENV, volcano.NO_FETCH_ENV)}
    with mock.patch.dict("os.environ", where):
        return volcano.checked_manifest(cfg.versions.volcano)


def identities(plane, manifest: str) -> dict[tuple[str, str, str], dict]:
    """Each object of the manifest, as the server has it: what says it is the same object, unchanged, and the
    field managers that applied to it."""
    got = plane.kubectl("get", "-f", "-", "-o", "json", "--show-managed-fields", input=manifest)
    listed = json.loads(got.stdout)["items"]
    out = {}
    for obj in listed:
        meta = obj["metadata"]
        kept = ({"generation": meta["generation"]} if "generation" in meta
                else {"resourceVersion": meta["resourceVersion"]})
        appliers = sorted({m["manager"] for m in meta.get("managedFields") or [] if m.get("operation") == "Apply"})
        out[(obj["kind"], meta.get("namespace", ""), meta["name"])] = {"uid": meta["uid"], **kept, "appliers": appliers}
    return out


def test_a_volcano_another_team_runs_is_left_alone(planes):
    plane, _, _ = planes.fresh("dev", with_volcano=False)  # Volcano comes from "another team" below
    stack = lifecycle.Stack(STACK, planes.bin)
    empty = lifecycle.listed(plane)
    stack.start()
    try:
        previewed = {s["urn"].rsplit("::", 1)[1] for s in stack.preview_steps() if s["op"] == "create"}
        assert "nfd-release" in previewed and not {n for n in previewed if n.startswith("volcano")}, previewed
        refused = stack.run("up", "--yes", "--skip-preview", timeout=UP_SECONDS, check=False)
        assert refused.returncode != 0
        assert ("aks-infiniband:existingCluster.preinstalled: got volcano; no CRD jobs.batch.volcano.sh"
                in refused.stdout + refused.stderr), refused.stdout[-3000:]
        assert lifecycle.listed(plane) - empty == set(), "the refused up created something"

        manifest = release_manifest(stack)
        plane.kubectl("apply", "--server-side", f"--field-manager={TEAM}", "-f", "-", input=manifest)
        theirs = identities(plane, manifest)
        assert len(theirs) == len([d for d in yaml.safe_load_all(manifest) if d]) > 40
        # (an object of no field but its name, such as a bare ServiceAccount, keeps no manager)
        assert {k: v["appliers"] for k, v in theirs.items() if v["appliers"] not in ([TEAM], [])} == {}
        before = lifecycle.listed(plane)

        stack.run("up", "--yes", "--skip-preview", timeout=UP_SECONDS)
        stack.run("preview", "--expect-no-changes", "--diff")
    finally:
        stack.run("destroy", "--yes", "--skip-preview", timeout=DESTROY_SECONDS)
        print(f"[engine] {STACK} step times (s): {json.dumps(stack.times)}")
    after = identities(plane, manifest)
    changed = {k: (theirs[k], after.get(k)) for k in theirs if after.get(k) != theirs[k]}
    assert changed == {}, f"the stack changed another team's Volcano objects: {changed}"
    others, crds = lifecycle.left_after_destroy(plane, before)
    assert others == set(), f"left after destroy: {sorted(others)}"
    print(f"[engine] CRDs Helm kept: {sorted(crds)}")
