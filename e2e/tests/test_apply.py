"""Every Kubernetes object of every example stack's offline render, applied server-side to the real API
server after the Helm releases of the pinned charts: accepted, or the test names the object and the
server's message."""

from __future__ import annotations

import pytest

from e2e import apply
from offline import engine

# Each example stack, the dev stack in each rdmaMode (shared is dev's own), and dev and hb on the node image's
# own RDMA drivers (ibPool.rdmaDriver inbox: no DOCA driver in the policy, the GPU Operator without peermem),
# and the stack of several pools (each its own test namespace, certify Job and admission loop).
INBOX = {"rdmaDriver": "inbox"}
VARIANTS = [("dev", None), ("dev", {"rdmaMode": "sriov"}), ("dev", {"rdmaMode": "dra"}), ("hb", None),
            ("gb200", None), ("gb300", None), ("private", None), ("private-kubernetes", None),
            ("dev", {"ibPool": INBOX}), ("hb", {"ibPool": INBOX}), ("multipool", None)]


def variant_id(stack: str, override: dict | None) -> str:
    if not override:
        return stack
    return f"{stack}-" + (override["rdmaMode"] if "rdmaMode" in override else override["ibPool"]["rdmaDriver"])


def with_override(stack: str, override: dict) -> dict:
    """The stack file's config with `override`'s keys set; an object key (ibPool) merged into the file's."""
    config = engine.stack_file_config(stack)
    for key, value in override.items():
        full = f"{engine.PROJECT}:{key}"
        config[full] = {**config[full], **value} if isinstance(value, dict) else value
    return config


# Volcano v1.10's webhook checks a Job's pod templates with Kubernetes 1.30's types, where a pod's
# resourceClaims entry names its claim under `source`: the v1 field the stack writes is not seen, so a Job
# that claims devices (rdmaMode dra, the GB sizes' GPUs) is refused (docs/real-control-plane.md, DRA).
DRA_REFUSAL = ('admission webhook "validatejob.volcano.sh" denied the request', ".resourceClaims[0].source",
               "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")


def claiming_jobs(rendering) -> set[str]:
    """The render's Volcano Jobs whose pods claim devices (resourceClaims)."""
    _, single = apply.stack_objects(rendering)
    return {apply.label(o) for o in single if o["apiVersion"].startswith("batch.volcano.sh/")
            and any(t["template"]["spec"].get("resourceClaims") for t in o["spec"]["tasks"])}


@pytest.mark.parametrize(("stack", "override"), VARIANTS, ids=[variant_id(s, o) for s, o in VARIANTS])
def test_every_object_of_the_render_is_accepted_by_the_real_api_server(planes, tmp_path, stack, override):
    config = with_override(stack, override) if override else None
    rendering = engine.render(stack, config=config)
    plane, _, _ = planes.fresh(stack)
    outcome = apply.apply_rendering(plane, rendering, tmp_path)
    claiming = claiming_jobs(rendering)
    by_1_10 = {w for w, m in outcome.refused if w in claiming and all(p in m for p in DRA_REFUSAL)}
    outcome.refused = [r for r in outcome.refused if r[0] not in by_1_10]
    assert not outcome.refused, f"{stack}: the real API server refused:\n{apply.failures(outcome)}"
    assert by_1_10 == claiming, "each Job that claims devices is refused by Volcano 1.10's webhook, and only those"
    assert outcome.applied and outcome.releases


def test_an_object_the_server_refuses_is_named_with_the_servers_message(planes, tmp_path):
    """The check above can fail: a Node-scoped Event in a namespace other than default is what the real
    API server refuses (pkg/apis/core/validation/events.go legacyValidateEvent), and the refusal comes back
    naming the object and quoting the server."""
    plane = planes.current[0] if planes.current else planes.fresh("dev")[0]
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "probe.1", "namespace": "kube-system"},
             "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "aks-probe-0"},
             "reason": "Probe", "message": "probe", "type": "Normal", "source": {"component": "e2e"},
             "firstTimestamp": "2026-12-01T00:00:00Z", "lastTimestamp": "2026-12-01T00:00:00Z", "count": 1}
    message = apply.apply_one(plane, event)
    assert message and "involvedObject.namespace" in message, message


def test_cron_schedules_the_api_server_accepts_are_the_ones_the_config_accepts(planes):
    """stack_config/cron.py against the real CronJob validation: every schedule its tests accept is
    accepted by the server, and every one it refuses for a reason of syntax is refused there too (a
    schedule that can never fire is the server's to accept and this stack's to refuse)."""
    import json

    from tests.unit.stack_config.test_cron import ACCEPTED, REFUSED

    plane = planes.current[0] if planes.current else planes.fresh("dev")[0]

    def server_accepts(schedule: str) -> bool:
        job = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "probe", "namespace": "default"},
               "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}}}
        done = plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False)
        return done.returncode == 0

    assert [s for s in ACCEPTED if not server_accepts(s)] == []
    ours = ("never fire", "never pause")  # the server accepts these; the stack refuses them
    syntax = [s for s, why in REFUSED.items() if not any(w in why for w in ours)]
    assert [s for s in syntax if server_accepts(s)] == []
    assert all(server_accepts(s) for s, why in REFUSED.items() if any(w in why for w in ours))
