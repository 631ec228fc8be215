"""Every Kubernetes object of every example stack's offline render, applied server-side to the real API
server after the Helm releases of the pinned charts: accepted, or the test names the object and the
server's message."""

from __future__ import annotations

import pytest

from e2e import apply
from offline import engine

# Each example stack, and the dev stack in each rdmaMode (shared is dev's own).
VARIANTS = [("dev", None), ("dev", {"rdmaMode": "sriov"}), ("dev", {"rdmaMode": "dra"}), ("hb", None),
            ("gb200", None), ("gb300", None), ("private", None), ("private-kubernetes", None)]


@pytest.mark.parametrize(("stack", "override"), VARIANTS,
                         ids=[s + (f"-{o['rdmaMode']}" if o else "") for s, o in VARIANTS])
def test_every_object_of_the_render_is_accepted_by_the_real_api_server(planes, tmp_path, stack, override):
    config = {**engine.stack_file_config(stack), **override} if override else None
    rendering = engine.render(stack, config=config)
    plane, _, _ = planes.fresh(stack)
    outcome = apply.apply_rendering(plane, rendering, tmp_path)
    assert not outcome.refused, f"{stack}: the real API server refused:\n{apply.failures(outcome)}"
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
