"""The CPU-only stack (Pulumi.hb.yaml, 2 x Standard_HB176rs_v4): the full render has no GPU object at
all, and its fabric test is the MPI point-to-point Volcano job, which passes the Job CRD's schema."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components import fabric_check
from components.fabric_check import PENDING, FabricCheckArgs, collect_command, parse_result
from components.p2p_job import OSU_DIR, WORKERS, P2pJobArgs
from core import catalog, fabric, kinds, modes
from offline import engine
from verify import collect as collect_mod

ROOT = Path(__file__).resolve().parent.parent

JOB_TYPE = "kubernetes:batch.volcano.sh/v1alpha1:Job"
HB = "Standard_HB176rs_v4"


def _job(r: engine.Rendering) -> dict:
    (job,) = r.of_type(JOB_TYPE)
    return job


def _tasks(r: engine.Rendering) -> dict[str, dict]:
    return {t["name"]: t for t in _job(r).inputs["spec"]["tasks"]}


def test_hb_stack_is_the_cpu_only_size(hb):
    sku = catalog.lookup(engine.stack_file_config("hb")["aks-infiniband:ibPool"]["vmSize"])
    assert sku.vm_size == HB and not sku.has_gpus
    assert hb.outputs["vmSize"] == HB


def test_no_gpu_object_anywhere_in_the_render(hb):
    types = {r.type for r in hb.resources}
    assert not any("GpuOperator" in t or "NcclJob" in t or "NcclTopology" in t for t in types), types
    for r in hb.resources:
        text = json.dumps(r.inputs, default=str).lower()
        assert fabric.GPU_RESOURCE not in text, f"{r.type} {r.name} mentions {fabric.GPU_RESOURCE}"
        assert "gpu-operator" not in text and "nccl_topo" not in text, f"{r.type} {r.name}"
    pool = hb.one("azure-native:containerservice:AgentPool")
    assert not pool.inputs.get("gpuProfile")
    charts = {r.inputs.get("chart") for r in hb.of_type("kubernetes:helm.sh/v3:Release")}
    assert not any("gpu" in str(c) for c in charts), charts


def test_the_fabric_test_is_the_p2p_job_and_passes_the_volcano_crd(hb, reference):
    from tests.schema_checks import custom_resource_errors, load_crds

    job = _job(hb)
    obj = {"apiVersion": job.inputs["apiVersion"], "kind": job.inputs["kind"],
           "metadata": job.inputs["metadata"], "spec": job.inputs["spec"]}
    assert custom_resource_errors(obj, load_crds(reference)) == []
    broken = json.loads(json.dumps(obj))
    broken["spec"]["tasks"][1]["replica"] = 2  # a misspelt field is caught
    assert custom_resource_errors(broken, load_crds(reference))


def test_job_runs_osu_between_two_workers_one_per_node(hb):
    spec = _job(hb).inputs["spec"]
    tasks = _tasks(hb)
    assert spec["schedulerName"] == "volcano" and set(spec["plugins"]) == {"ssh", "svc"}
    assert tasks["mpiworker"]["replicas"] == WORKERS == 2 and spec["minAvailable"] == WORKERS + 1
    worker = tasks["mpiworker"]["template"]
    anti = worker["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["labelSelector"]["matchLabels"].items() <= worker["metadata"]["labels"].items()
    master = tasks["mpimaster"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in master["env"]}
    assert env["OSU_DIR"] == OSU_DIR and "rc" in env["UCX_TLS"].split(",") and "tcp" not in env["UCX_TLS"]


# the device-plugin modes; `dra` pairs GPUs with HCAs and is refused on CPU-only sizes (test_config)
@pytest.mark.parametrize("mode", [m.name for m in modes.MODES.values() if not m.dra])
def test_workers_request_rdma_and_ipc_lock_on_the_tainted_pool(render, mode):
    r = render(ibPool={"vmSize": HB}, rdmaMode=mode)
    sku = catalog.lookup(HB)
    want = modes.rdma_mode(mode).request(sku)
    for name, task in _tasks(r).items():
        pod = task["template"]["spec"]
        assert pod["tolerations"] == [fabric.toleration()], name
        assert pod["nodeSelector"] == fabric.pool_node_selector(), name
        for c in pod["containers"]:
            sc = c.get("securityContext", {})
            assert sc.get("privileged") is False, name
            limits = c["resources"].get("limits", {})
            assert fabric.GPU_RESOURCE not in {**limits, **c["resources"].get("requests", {})}
            if name == "mpiworker":
                assert limits[want.resource] == str(want.count)
                assert sc["capabilities"]["add"] == ["IPC_LOCK"]


def test_job_waits_for_pool_policy_and_volcano_only(hb):
    job = _job(hb)
    assert hb.depends_on(job, hb.one("azure-native:containerservice:AgentPool"))
    assert hb.depends_on(job, hb.one("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"))
    assert any(hb.depends_on(job, v) for v in hb.of_type("kubernetes:yaml/v2:ConfigFile"))


def test_gpu_sizes_are_refused_by_the_p2p_job():
    with pytest.raises(ValueError, match="GPUs"):
        P2pJobArgs(sku=catalog.lookup("Standard_ND96asr_v4"), rdma_mode="shared",
                   image="example.invalid/img:1.0", timeout_minutes=30)


def test_disabled_fabric_test_renders_no_job(render):
    assert render(ibPool={"vmSize": HB}, fabricTest={"enabled": False}).of_type(JOB_TYPE) == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_launcher_script_is_valid_bash():
    from components.p2p_job import LAUNCHER_SCRIPT

    subprocess.run(["bash", "-n", str(LAUNCHER_SCRIPT)], check=True)


# --- row 9 on CPU-only sizes: the collect step judges the p2p job --------------------------------
COMMAND = "command:local:Command"
COLLECT = "fabric-check-collect"
CHECK_TYPE = "aks-infiniband:verify:FabricCheck"


def _collect_argv(r: engine.Rendering) -> list[str]:
    return shlex.split(r.one(COMMAND, COLLECT).inputs["create"])


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_hb_stack_collects_the_p2p_job_with_the_p2p_kind(hb):
    check, collect, job = hb.one(CHECK_TYPE, "fabric-check"), hb.one(COMMAND, COLLECT), _job(hb)
    assert collect.parent == check.urn
    assert hb.depends_on(collect, job)
    args = _collect_argv(hb)
    assert args[:4] == [fabric_check.python_command(), "-m", "verify", "collect"]
    assert _option(args, "--kind") == kinds.P2P
    assert _option(args, "--namespace") == job.inputs["metadata"]["namespace"]
    assert _option(args, "--job") == job.inputs["metadata"]["name"]
    assert _option(args, "--sku") == HB
    # the collector fetches its own credentials for this cluster (no kubeconfig among its inputs)
    assert _option(args, "--aks-resource-group") == hb.outputs["resourceGroupName"]
    assert _option(args, "--aks-cluster") == hb.outputs["clusterName"]
    assert "environment" not in collect.inputs
    # a point-to-point result is judged in Gb/s and spans two nodes: no GB/s threshold, no --nodes
    assert "--nodes" not in args and "--threshold-gbps" not in args and "--threshold-gbits" not in args
    # matplotlib is a dev requirement: the deploy-time step never plots (docs/verify-cli.md: plot afterwards)
    assert "--plot" not in args
    # the collector looks for the launcher under the task name the p2p job gives it
    assert collect_mod.LAUNCHER_TASK in _tasks(hb)


def test_hb_collect_trigger_is_the_p2p_jobs_spec_hash(hb):
    from components.mpi_job import spec_hash
    from tests.schema_checks import as_api

    job = as_api(_job(hb).inputs)
    meta = job["metadata"]
    assert hb.one(COMMAND, COLLECT).inputs["triggers"] == [
        spec_hash({"namespace": meta["namespace"], "name": meta["name"], "spec": job["spec"]})]


def test_hb_outputs_are_pending_offline_never_a_number(hb):
    assert hb.outputs["fabricVerdict"] == PENDING
    assert hb.outputs["fabricVerdictReasons"] == ["the collect step has produced no result yet"]
    for key in ("p2pBandwidthAtMaxSizeGbits", "p2pMaxBandwidthGbits", "p2pLatencyUs"):
        assert key in hb.outputs and hb.outputs[key] is None, key
    # the all-reduce's outputs belong to GPU sizes only
    assert not [k for k in hb.outputs if k.startswith("allReduce") or k in ("ncclVersion", "fabricRanks")]


def test_hb_threshold_and_fail_switch_reach_the_command(render):
    args = _collect_argv(render(ibPool={"vmSize": HB}, fabricTest={"p2pThresholdGbits": 350,
                                                                   "failOnLowBandwidth": True}))
    assert _option(args, "--threshold-gbits") == "350" and "--fail-on-low-bandwidth" in args
    assert "--threshold-gbps" not in args


def test_hb_no_collect_step_when_the_test_is_disabled(render):
    r = render(ibPool={"vmSize": HB}, fabricTest={"enabled": False})
    assert r.of_type(CHECK_TYPE) == [] and r.outputs["fabricVerdict"].startswith("not run")
    assert "p2pBandwidthAtMaxSizeGbits" not in r.outputs


class _Job:
    """A fabric test job as FabricCheckArgs sees it (the FabricTestJob protocol), without Pulumi."""

    def __init__(self, kind: kinds.Kind, sku: str, node_count: int):
        self.kind, self.sku, self.node_count = kind, catalog.lookup(sku), node_count
        self.namespace_name, self.job_name, self.deadline_minutes = "fabric-test", "j", 60
        self.spec_sha256, self.job, self.sharp = "0" * 64, None, False


def test_the_threshold_goes_out_in_the_unit_of_the_jobs_kind():
    """One rule, the kind's: the all-reduce's threshold is GB/s busbw, point to point's Gb/s."""
    cluster = collect_mod.AksCluster("rg", "aks")
    p2p = shlex.split(collect_command(FabricCheckArgs("rg", "aks", _Job(kinds.POINT_TO_POINT, HB, WORKERS),
                                                      threshold=150.0), cluster))
    assert _option(p2p, "--threshold-gbits") == "150" and "--threshold-gbps" not in p2p
    gpu = shlex.split(collect_command(FabricCheckArgs("rg", "aks", _Job(kinds.ALL_REDUCE,
                                                                        "Standard_ND96asr_v4", 2), threshold=150.0),
                                      cluster))
    assert _option(gpu, "--threshold-gbps") == "150" and "--threshold-gbits" not in gpu


def test_the_other_kinds_threshold_is_named_as_the_wrong_one():
    thresholds = {"thresholdGbps": 50.0, "p2pThresholdGbits": None}
    problems = kinds.threshold_problems(kinds.kind_for(catalog.lookup(HB)), thresholds)
    assert list(problems) == ["thresholdGbps"] and "Gb/s (bits)" in problems["thresholdGbps"]
    assert kinds.threshold_problems(kinds.ALL_REDUCE, thresholds) == {}


def test_the_rendered_hb_command_against_a_fake_kubernetes_api(render, tmp_path):
    """End to end, offline: the command line the HB stack renders, run as the Pulumi step runs it
    (credentials from a fake logged-in `az` on PATH, nothing in the environment) against the fake API
    serving a real two-VM HBv3 log; its stdout read by the stack's own parse_result. The figure is the
    one the fixture's last row gives."""
    from tests.fake_kube import FakeKube, az_calls, fake_az
    from tests.test_osu_perftest import HBV3_BW, HBV3_LAT, raw_rows

    hbv3 = "Standard_HB120rs_v3"
    stack = render(ibPool={"vmSize": hbv3})
    args, job = _collect_argv(stack), _job(stack)
    assert args[0] == fabric_check.python_command()
    args = [sys.executable, *args[1:], "--poll-seconds", "0.05"]
    log = HBV3_BW.read_text() + "\n" + HBV3_LAT.read_text()
    with FakeKube(["Running", "Completed"], log, namespace=job.inputs["metadata"]["namespace"],
                  job=job.inputs["metadata"]["name"]) as kube:
        bindir, calls = fake_az(tmp_path, stdout=kube.kubeconfig())
        env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": "/nonexistent"}
        done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (call,) = az_calls(calls)
    assert call[:6] == ["aks", "get-credentials", "--resource-group", stack.outputs["resourceGroupName"],
                        "--name", stack.outputs["clusterName"]]
    result = parse_result(done.stdout)
    rows = raw_rows(HBV3_BW)
    assert result.verdict == "PASS"
    assert result.bw_at_max_size_gbits == round(float(rows[max(rows)][0]) * 8 / 1000, 2)
    assert result.latency_us == round(float(raw_rows(HBV3_LAT)[1][0]), 2)
    assert result.busbw_at_max_size_gbps is None  # not an all-reduce


def test_the_p2p_job_keeps_its_urns_across_its_rename(hb):
    """MpiBandwidthJob is now P2pJob: the component answers to its former type, and the engine gives
    its children (named from the component's name, which is unchanged) the same aliases."""
    (component,) = hb.of_type("aks-infiniband:kubernetes:P2pJob")
    assert component.name == "fabric-test-p2p"
    assert component.aliases == [{"type": "aks-infiniband:kubernetes:MpiBandwidthJob"}]
    assert all(r.name.startswith("fabric-test-p2p-") for r in hb.resources if r.parent == component.urn)


def test_the_point_to_point_test_has_one_name():
    """p2p: the kind, the component, the job, the launcher, the config key, the outputs."""
    names = [p.name for p in (ROOT / "components").glob("*.py")] + [p.name for p in (ROOT / "scripts").glob("*")]
    assert "p2p_job.py" in names and "p2p-launcher.sh" in names
    assert not [n for n in names if "bandwidth" in n or "mpi-p2p" in n]
    assert P2pJobArgs.job_name == "p2p" and kinds.POINT_TO_POINT.name == kinds.P2P == "p2p"


def test_the_plan_names_the_point_to_point_test_and_its_gate(hb):
    from offline import synth

    files = synth.synthesize(hb, images=False)
    link = catalog.lookup("Standard_HB176rs_v4").p2p
    plan = files["plan.md"].decode()
    assert "all-reduce" not in synth.summary(files) and "the first osu_bw point-to-point result" in synth.summary(files)
    assert f"| FAIL below | **{link.threshold_gbits:g} Gb/s** (Azure's `{link.gate_tool}` gate) |" in plan
    assert f"| line rate | {link.baseline_gbits:g} Gb/s (NDR) |" in plan
