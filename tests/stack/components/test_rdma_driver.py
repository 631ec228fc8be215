"""ibPool.rdmaDriver (core/rdma_drivers.py): what `inbox` renders against the dev stack's `doca`, on a GPU size
(ND H100 v5) and a CPU-only one (HBv4): the NicClusterPolicy without the DOCA driver, the GPU Operator with
open kernel modules and no nvidia-peermem, NCCL's DMA-BUF setting, the launcher's filter keeping NCCL's DMA-BUF
lines, and the certifier judging with the pool's driver, day 0 and re-tests alike."""

from __future__ import annotations

import json

import pytest

from components.fabric import mpi_job
from components.platform import gpu_operator
from core import rdma_drivers
from offline import durations, schedule
from tests.stack.components.test_fabric_check import argv
from tests.stack.components.test_nccl_job import env, task

POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
RELEASE = "kubernetes:helm.sh/v3:Release"
P2P_JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
INBOX = {"ibPool": {"rdmaDriver": "inbox"}}
HB_INBOX = {"ibPool": {"vmSize": "Standard_HB176rs_v4", "rdmaDriver": "inbox"}}


@pytest.fixture(scope="module")
def inbox():
    from conftest import dev_kubernetes_half

    return dev_kubernetes_half(**INBOX)


def policy(stack) -> dict:
    return stack.one(POLICY).inputs["spec"]


def test_the_default_is_doca_with_its_driver_container_and_peermem(dev):
    assert rdma_drivers.DEFAULT == "doca"
    assert "ofedDriver" in policy(dev)
    driver = dev.one(RELEASE, "gpu-operator-release").inputs["values"]["driver"]
    assert driver["rdma"] == {"enabled": True, "useHostMofed": False} and "kernelModuleType" not in driver
    assert "NCCL_DMABUF_ENABLE" not in env(dev)
    assert "--rdma-driver" not in argv(dev)


def test_inbox_has_no_doca_driver_but_keeps_the_device_plugin(inbox, dev):
    spec = policy(inbox)
    assert "ofedDriver" not in spec
    assert spec["rdmaSharedDevicePlugin"] == policy(dev)["rdmaSharedDevicePlugin"]
    assert spec["nodeAffinity"] == policy(dev)["nodeAffinity"] and spec["tolerations"] == policy(dev)["tolerations"]


def test_inbox_gpu_driver_has_open_modules_and_no_peermem(inbox, dev):
    values = inbox.one(RELEASE, "gpu-operator-release").inputs["values"]
    assert values["driver"]["kernelModuleType"] == "open"
    assert values["driver"]["rdma"] == {"enabled": False}
    doca = dev.one(RELEASE, "gpu-operator-release").inputs["values"]
    # everything else of the release is the same
    assert {k: v for k, v in values.items() if k != "driver"} == {k: v for k, v in doca.items() if k != "driver"}
    assert values["driver"]["upgradePolicy"] == doca["driver"]["upgradePolicy"]
    assert values == gpu_operator.chart_values(rdma_driver=rdma_drivers.INBOX)


def test_inbox_ranks_register_gpu_memory_through_dmabuf_and_the_filter_keeps_the_proof(inbox, dev):
    ours, theirs = env(inbox), env(dev)
    assert ours["NCCL_DMABUF_ENABLE"] == "1"
    assert "DMA-BUF is available on GPU device" in ours["LOG_NCCL_KEEP_ERE"]
    assert "DMA-BUF" not in theirs["LOG_NCCL_KEEP_ERE"]
    changed = {k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k)}
    assert changed == {"NCCL_DMABUF_ENABLE", "LOG_NCCL_KEEP_ERE"}


def test_inbox_pods_record_no_doca_driver_version(inbox, dev):
    def annotation(stack) -> str:
        return task(stack, "mpiworker")["template"]["metadata"]["annotations"][mpi_job.DRIVER_VERSIONS_ANNOTATION]

    assert "docaDriver=" in annotation(dev) and "docaDriver=" not in annotation(inbox)


def test_the_certifier_judges_an_inbox_pool_as_inbox_day_0_and_in_its_retests(inbox):
    args = argv(inbox)
    assert args[args.index("--rdma-driver") + 1] == "inbox"
    template = json.loads(inbox.one("kubernetes:core/v1:ConfigMap", "certifier-template").inputs["data"]["job.json"])
    assert template["rdma_driver"] == "inbox"


def test_the_retest_template_of_a_doca_pool_is_unchanged(dev):
    template = json.loads(dev.one("kubernetes:core/v1:ConfigMap", "certifier-template").inputs["data"]["job.json"])
    assert "rdma_driver" not in template


def test_an_hb_pool_on_inbox_has_no_doca_and_no_gpu_operator():
    from conftest import dev_kubernetes_half

    hb = dev_kubernetes_half(**HB_INBOX)
    assert "ofedDriver" not in policy(hb) and "rdmaSharedDevicePlugin" in policy(hb)
    assert not [r for r in hb.of_type(RELEASE) if r.name == "gpu-operator-release"]
    assert hb.of_type(P2P_JOB)


def test_the_timeline_of_an_inbox_pool_has_no_doca_step(inbox, dev):
    """(The Kubernetes half: its on-node steps are there; the pool's step is the Azure half's.)"""
    def on_node(stack) -> set[str]:
        return {s.split("/")[-1] for s, step in schedule.build_timeline(stack).steps.items() if step.on_node}

    assert "doca-driver-ready" in on_node(dev) and "doca-driver-ready" not in on_node(inbox)
    assert "gpu-driver-ready" in on_node(inbox)


def test_the_plans_inbox_path_is_the_inbox_renders_own_timeline(render, dev):
    """plan.md shows the dev stack's critical path with inbox from its own timeline without the DOCA step
    (schedule.on_the_node_images_drivers); the inbox render's timeline is the same, step for step."""
    what_if = schedule.on_the_node_images_drivers(schedule.build_timeline(dev))
    real = schedule.build_timeline(render(**INBOX))  # the whole stack: the pool's step is in the path
    assert what_if.critical_path == real.critical_path
    for scenario in schedule.SCENARIOS:
        assert what_if.critical_total(scenario) == pytest.approx(real.critical_total(scenario))
        assert schedule.node_bring_up(what_if, scenario) == schedule.node_bring_up(real, scenario)
    assert schedule.on_the_node_images_drivers(real) is None


def test_the_model_puts_the_dev_stack_at_40_minutes_and_30_with_inbox_saving_10_per_new_node(dev):
    """Model figures (offline/durations.py), not measurements: 40 min typical with DOCA, whose build the GPU driver
    waits for (offline/schedule.py _waits_for_doca), and 30.05 with inbox, where the GPU driver starts as the node
    joins; a new node is ready after 15 min against 5, so inbox saves it the whole DOCA build. The inbox figure is
    what the model says (the resource group's 3 s over 30 min): nothing is tuned to a target."""
    tl = schedule.build_timeline(dev)
    inbox = schedule.on_the_node_images_drivers(tl)
    assert round(tl.critical_total("typical")) == 40 and round(inbox.critical_total("typical")) == 30
    assert inbox.critical_total("typical") == pytest.approx(30.05)
    assert [schedule.node_bring_up(t, "typical") for t in (tl, inbox)] == [15.0, 5.0]
    saved = schedule.node_bring_up(tl, "typical") - schedule.node_bring_up(inbox, "typical")
    assert saved == durations.DOCA_DRIVER_READY.typical_min


@pytest.mark.parametrize("stack", ["gb200", "gb300"])
def test_a_size_that_must_keep_doca_gets_no_inbox_path_in_its_plan(stack):
    from conftest import rendered

    from offline import synth

    plan = synth.synthesize(rendered(stack), images=False)["plan.md"].decode()
    assert "network-operator-policy/doca-driver-ready" in plan and "rdmaDriver: inbox" not in plan


def test_the_docs_state_the_models_inbox_figures(dev):
    """docs/architecture.md and docs/rdma-drivers.md say what the model says, both ways."""
    from tests.paths import ROOT

    def span(fn, unit: str) -> str:
        return f"{round(fn('typical'))} {unit} ({round(fn('low'))}–{round(fn('high'))})"

    tl = schedule.build_timeline(dev)
    inbox = schedule.on_the_node_images_drivers(tl)
    architecture = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    assert f"With `ibPool.rdmaDriver: inbox` it would be {span(inbox.critical_total, 'minutes')}" in architecture
    doca_node = span(lambda s: schedule.node_bring_up(tl, s), "minutes")
    assert f"so each new node spends {doca_node} on the two" in architecture
    page = (ROOT / "docs" / "rdma-drivers.md").read_text()
    assert f"| {span(tl.critical_total, 'min')} | {span(inbox.critical_total, 'min')} |" in page
    bring_up = [span(lambda s, t=t: schedule.node_bring_up(t, s), "min") for t in (tl, inbox)]
    assert f"| {bring_up[0]} | {bring_up[1]} |" in page
