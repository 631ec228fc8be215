"""Row 9: the collect step (pulumi-command running `python -m verify collect`) and its outputs."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import dev_config

import stack_config
from components import fabric_check
from components.fabric_check import PENDING, parse_result
from core import catalog, kinds
from offline import engine, mocks
from tests.test_verify_cli import run as verify_cli  # python -m verify's main(), in this process
from verify.collect import AksCluster

COMMAND = "command:local:Command"
JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
COLLECT = "fabric-check-collect"
ROOT = fabric_check.__file__.rsplit("/components/", 1)[0]


def argv(stack) -> list[str]:
    return shlex.split(stack.one(COMMAND, COLLECT).inputs["create"])


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_collect_runs_after_the_job(dev):
    collect, job = dev.one(COMMAND, COLLECT), dev.one(JOB, "fabric-test-job")
    assert job.urn in collect.dependencies
    assert dev.depends_on(collect, job)


def test_collect_names_the_job_the_stack_creates(dev):
    args, job = argv(dev), dev.one(JOB, "fabric-test-job")
    assert args[:4] == [fabric_check.python_command(), "-m", "verify", "collect"]
    assert option(args, "--namespace") == job.inputs["metadata"]["namespace"]
    assert option(args, "--job") == job.inputs["metadata"]["name"]
    assert option(args, "--sku") == dev.outputs["vmSize"]
    assert option(args, "--nodes") == str(dev.outputs["nodeCount"])
    assert "--json" in args


def test_the_interpreter_is_the_one_running_the_program_named_from_the_project(tmp_path):
    """sys.executable, relative to the project when the environment lives in it (every checkout
    then reads .venv/bin/python); absolute only for an environment elsewhere."""
    project = tmp_path / "checkout"
    assert fabric_check.python_command(str(project / ".venv/bin/python"), project) == ".venv/bin/python"
    assert fabric_check.python_command("/opt/poetry/envs/x/bin/python", project) == "/opt/poetry/envs/x/bin/python"
    assert fabric_check.python_command() == Path(sys.executable).relative_to(fabric_check.PROJECT_DIR).as_posix(), (
        "run the tests with the project's .venv/bin/python (as make test does)")


def test_paths_are_relative_to_the_project(dev):
    collect = dev.one(COMMAND, COLLECT)
    assert not [a for a in argv(dev) if a.startswith("/")], "an absolute path differs between checkouts"
    assert "dir" not in collect.inputs
    assert ROOT not in json.dumps(collect.inputs)


def test_no_kubeconfig_among_the_inputs(dev):
    """A Command with no `update` re-runs on any input diff; the kubeconfig is read afresh on every
    run and changes with each credential rotation. So it is no input at all, not even a secret one."""
    collect = dev.one(COMMAND, COLLECT)
    assert "environment" not in collect.inputs
    assert collect.secret_inputs == [] and collect.additional_secret_outputs == []
    text = json.dumps(collect.inputs)
    assert "offline-render-not-a-credential" not in text and "clusters:" not in text
    assert "kubeconfig" not in text.lower()


def test_the_command_line_names_the_cluster_and_its_subscription(dev):
    args = argv(dev)
    assert option(args, "--aks-resource-group") == dev.outputs["resourceGroupName"]
    assert option(args, "--aks-cluster") == dev.outputs["clusterName"]
    # the subscription Pulumi deploys to (getClientConfig; all zeros under the mocks), so az reads
    # the credentials of this cluster even when its own default subscription is another one
    assert option(args, "--subscription") == mocks.OFFLINE_ID
    # the collector's own az call for those coordinates (what the step will run)
    assert AksCluster(option(args, "--aks-resource-group"), option(args, "--aks-cluster"),
                      option(args, "--subscription")).az_argv() == [
        "aks", "get-credentials", "--resource-group", dev.outputs["resourceGroupName"],
        "--name", dev.outputs["clusterName"], "--subscription", mocks.OFFLINE_ID, "--file", "-",
        "--only-show-errors"]


def test_cluster_names_from_the_config_reach_the_command_line(render):
    args = argv(render(resourceGroupName="rg-ib-test", clusterName="aks-ib-test"))
    assert (option(args, "--aks-resource-group"), option(args, "--aks-cluster")) == ("rg-ib-test", "aks-ib-test")


def test_a_credential_rotation_changes_no_input_of_the_collect_step(dev, monkeypatch):
    """The property behind "a second `pulumi up` changes nothing": AKS hands out another kubeconfig
    (rotated certificates, a new token), everything the collect step is given stays the same."""
    rotated = mocks.FAKE_KUBECONFIG.replace("offline-render-not-a-credential", "rotated-not-a-credential")
    monkeypatch.setattr(mocks, "FAKE_KUBECONFIG", rotated)
    again = engine.render("dev")
    assert "rotated-not-a-credential" in again.outputs["kubeconfig"]  # the control: the kubeconfig did change
    before, after = dev.one(COMMAND, COLLECT), again.one(COMMAND, COLLECT)
    assert after.inputs == before.inputs
    assert after.secret_inputs == before.secret_inputs and after.dependencies == before.dependencies


def test_collect_command_without_a_subscription_leaves_it_to_az():
    job = SimpleNamespace(kind=kinds.ALL_REDUCE, sku=catalog.lookup("Standard_ND96asr_v4"),
                          namespace_name="fabric-test", job_name="nccl-allreduce", node_count=2, deadline_minutes=60,
                          spec_sha256="0" * 64, sharp=False, job=None)  # a FabricTestJob without Pulumi
    args = fabric_check.FabricCheckArgs(resource_group_name="rg", cluster_name="aks", job=job)
    with_sub = shlex.split(fabric_check.collect_command(args, AksCluster("rg", "aks", "sub-id")))
    without = shlex.split(fabric_check.collect_command(args, AksCluster("rg", "aks")))
    assert option(with_sub, "--subscription") == "sub-id" and "--subscription" not in without
    assert option(without, "--aks-resource-group") == "rg" and option(without, "--aks-cluster") == "aks"


def test_progress_is_shown_and_the_result_captured(dev):
    assert dev.one(COMMAND, COLLECT).inputs["logging"] == "stderr"


@pytest.mark.parametrize("minutes", [10, 120])
def test_timeouts_outlast_the_jobs_deadline(render, minutes):
    stack = render(fabricTest={"timeoutMinutes": minutes})
    collect = stack.one(COMMAND, COLLECT)
    waits = int(option(argv(stack), "--timeout-minutes"))
    pulumi_limit = int(collect.custom_timeouts["create"].removesuffix("m"))
    assert minutes < waits < pulumi_limit


def test_fail_on_low_bandwidth_flag_only_when_configured(render, dev):
    assert "--fail-on-low-bandwidth" not in argv(dev)
    assert "--fail-on-low-bandwidth" in argv(render(fabricTest={"failOnLowBandwidth": True}))


def test_sharp_reaches_the_result_and_the_outputs(render, dev):
    """The result says which transport was measured: --sharp on the command line (recorded in the
    JSON) and the allReduceSharp output."""
    assert "--sharp" not in argv(dev) and dev.outputs["allReduceSharp"] is False
    sharp = render(fabricTest={"sharp": True})
    assert "--sharp" in argv(sharp) and sharp.outputs["allReduceSharp"] is True
    assert trigger(sharp) != trigger(dev)  # a SHARP run is a different run


def test_threshold_only_when_configured(render, dev):
    assert "--threshold-gbps" not in argv(dev)
    assert option(argv(render(fabricTest={"thresholdGbps": 170})), "--threshold-gbps") == "170"


def trigger(stack) -> list[str]:
    return stack.one(COMMAND, COLLECT).inputs["triggers"]


def test_trigger_is_deterministic(dev, render):
    assert trigger(dev) == trigger(render())


def test_trigger_changes_with_the_job_and_only_then(dev, render):
    assert trigger(render(fabricTest={"image": "example.io/nccl:9.9.9"})) != trigger(dev)
    assert trigger(render(ibPool={"nodeCount": 3})) != trigger(dev)
    assert trigger(render(rdmaMode="sriov")) != trigger(dev)
    # a change that leaves the job alone does not re-run the test
    assert trigger(render(tags={"owner": "someone-else"})) == trigger(dev)
    assert trigger(render(fabricTest={"failOnLowBandwidth": True})) == trigger(dev)


def test_trigger_digests_the_rendered_job(dev):
    """The hash covers the spec that is sent, not a hand-picked subset of the config."""
    from components.mpi_job import spec_hash
    from tests.schema_checks import as_api

    job = as_api(dev.one(JOB, "fabric-test-job").inputs)
    meta = job["metadata"]
    assert trigger(dev) == [spec_hash({"namespace": meta["namespace"], "name": meta["name"], "spec": job["spec"]})]


# --- outputs ------------------------------------------------------------------------------------
def test_outputs_are_pending_offline_never_a_number(dev):
    assert dev.outputs["fabricVerdict"] == PENDING
    assert dev.outputs["allReduceMaxBusBwGbps"] is None
    assert dev.outputs["allReduceBusBwAtMaxSizeGbps"] is None
    assert dev.outputs["ncclVersion"] == "pending"
    assert dev.outputs["fabricTransport"] == "pending"
    assert dev.outputs["fabricRanks"] == "pending (expected 2 nodes x 8 GPUs = 16 ranks)"


def test_no_collect_step_when_the_test_is_disabled(render):
    stack = render(fabricTest={"enabled": False})
    assert not [r for r in stack.of_type(COMMAND) if r.name == COLLECT]
    assert "allReduceMaxBusBwGbps" not in stack.outputs


def _sample() -> dict:
    """A real all-reduce result document: a 2 x 8-GPU ND A100 v4 log through verify's own report."""
    from tests.nccl_logs import launcher_log, worker_hosts
    from verify.nccl import parse
    from verify.report import summary
    from verify.verdict import judge

    result = parse(launcher_log(worker_hosts(2), 8, busbw_gbps=187.22))
    return summary(result, judge(result, sku="Standard_ND96asr_v4", nodes=2)).to_json()


SAMPLE = _sample()


def test_parse_a_result():
    r = parse_result(json.dumps(SAMPLE, indent=2))
    assert (r.verdict, r.busbw_at_max_size_gbps, r.max_busbw_gbps) == (SAMPLE["verdict"], 187.22,
                                                                       SAMPLE["max_busbw_gbps"])
    assert (r.ranks, r.hosts, r.gpus_per_node, r.nccl_version) == (16, 2, 8, SAMPLE["nccl_version"])
    assert r.ranks_text(2, 8) == "2 nodes x 8 GPUs = 16 ranks"
    assert r.reasons == tuple(SAMPLE["reasons"]) and r.reasons


@pytest.mark.parametrize("stdout", ["", "   \n", None])
def test_no_output_is_pending(stdout):
    r = parse_result(stdout)
    assert r.verdict == PENDING
    assert r.max_busbw_gbps is None and r.busbw_at_max_size_gbps is None and r.ranks is None


@pytest.mark.parametrize("stdout", ["Traceback (most recent call last):", "[1, 2]", "{not json"])
def test_garbage_is_unknown_with_a_reason(stdout):
    r = parse_result(stdout)
    assert r.verdict == "UNKNOWN"
    assert r.reasons and r.max_busbw_gbps is None


@pytest.mark.parametrize(("change", "named"), [
    ({"busbw_at_max_size_gbps": "fast"}, "busbw_at_max_size_gbps"),
    ({"ranks": True}, "ranks"),
    ({"schemaVersion": 2}, "schemaVersion"),
    ({"extra": 1}, "extra"),
])
def test_a_result_the_schema_refuses_is_unknown_naming_the_key(change, named):
    """Read through the type (verify/result.py), not key by key: a wrong value is not half-read."""
    r = parse_result(json.dumps({**SAMPLE, **change}))
    assert r.verdict == "UNKNOWN"
    assert (r.max_busbw_gbps, r.busbw_at_max_size_gbps, r.ranks) == (None, None, None)
    assert named in r.reasons[0]


def test_an_error_document_is_unknown_with_its_error():
    r = parse_result(json.dumps({"schemaVersion": 1, "verdict": None, "error": "no credentials"}))
    assert r.verdict == "UNKNOWN" and "no credentials" in r.reasons[0]


def test_parse_what_the_verify_cli_prints(reference):
    """The contract with `verify/`: its --json output, on Azure's published 2-node A100 run."""
    log = reference / "nccl-tests" / "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
    done = verify_cli("report", str(log), "--sku", "Standard_ND96asr_v4", "--nodes", "2", "--json")
    assert done.returncode == 0, done.stderr
    r = parse_result(done.stdout)
    assert r.busbw_at_max_size_gbps == pytest.approx(187.22)
    assert r.ranks == 16
    assert r.verdict in ("PASS", "WARN")


def test_verify_cli_accepts_every_flag_the_step_passes(render):
    stack = render(fabricTest={"failOnLowBandwidth": True, "thresholdGbps": 170, "sharp": True})
    done = verify_cli("collect", "--help")
    assert done.returncode == 0, done.stderr
    for flag in (a for a in argv(stack) if a.startswith("--")):
        assert flag in done.stdout, f"verify collect has no {flag}"


def test_the_gpu_command_is_the_nccl_kind_by_default(dev):
    """The GPU stack's command is what it was before the p2p kind existed: nccl is the collector's
    default, so no --kind, and the all-reduce's node count."""
    job = dev.one(JOB, "fabric-test-job")
    assert argv(dev) == [
        fabric_check.python_command(), "-m", "verify", "collect",
        "--aks-resource-group", dev.outputs["resourceGroupName"], "--aks-cluster", dev.outputs["clusterName"],
        "--subscription", mocks.OFFLINE_ID,
        "--namespace", job.inputs["metadata"]["namespace"], "--job", job.inputs["metadata"]["name"],
        "--sku", dev.outputs["vmSize"], "--nodes", str(dev.outputs["nodeCount"]),
        # the job's deadline: the test's timeout plus the fabric doctor's budget (doctor auto)
        "--timeout-minutes", str(fabric_check.NODE_SETUP_BUDGET_MINUTES
                                 + stack_config.parse(dev_config(), "dev").fabric_test.timeout_minutes
                                 + stack_config.parse(dev_config(), "dev").fabric_test.doctor_minutes
                                 + fabric_check.COLLECT_MARGIN_MINUTES),
        "--incomplete-as-fail", "--json",
    ]
    assert not [k for k in dev.outputs if k.startswith("p2p")]


def test_parse_what_the_verify_cli_prints_for_a_p2p_log():
    """The contract with `verify/` for the CPU-only kind: its --json output on a published HBv3 run."""
    from tests.test_osu_perftest import HBV3_BW, raw_rows

    done = verify_cli("report", str(HBV3_BW), "--sku", "Standard_HB120rs_v3", "--json")
    assert done.returncode == 0, done.stderr
    r = parse_result(done.stdout)
    rows = raw_rows(HBV3_BW)
    assert r.bw_at_max_size_gbits == pytest.approx(float(rows[max(rows)][0]) * 8 / 1000, abs=0.01)
    assert r.max_bw_gbits == pytest.approx(max(float(v[0]) for v in rows.values()) * 8 / 1000, abs=0.01)
    assert r.latency_us is None  # osu_bw alone: no latency table
    assert r.verdict == "PASS" and r.max_busbw_gbps is None and r.nccl_version is None


def test_suspects_become_the_fabricsuspects_output():
    suspect = {"host": "w1", "hca": "mlx5_ib3", "reason": "port mlx5_ib3:1 runs at 200 Gb/s",
               "evidence": {"rate_gbits": 200}, "verdict": "FAIL"}
    doctor = {"mode": "auto", "ran": True, "reason": "slow", "decision": None, "finished": True, "elapsed_s": 30,
              "budget_s": 600, "nodes_checked": ["w0", "w1"], "pairs": [], "slow_pairs": [], "hca_bw": [],
              "skipped": [], "notes": []}
    r = parse_result(json.dumps({**SAMPLE, "verdict": "FAIL", "suspects": [suspect], "doctor": doctor}))
    assert r.suspects == (suspect,)
    assert parse_result(json.dumps(SAMPLE)).suspects == ()
    assert parse_result("").suspects == ()
    # suspects without the doctor's block, or a suspect missing a key, is not a v1 result
    assert parse_result(json.dumps({**SAMPLE, "suspects": [suspect]})).verdict == "UNKNOWN"
    bad = {**SAMPLE, "suspects": [{k: v for k, v in suspect.items() if k != "hca"}], "doctor": doctor}
    assert "hca" in parse_result(json.dumps(bad)).reasons[0]


def test_the_gpu_stack_exports_fabric_suspects(dev):
    assert dev.outputs["fabricSuspects"] == []  # none until a run names some


def test_transport_output_is_the_results_one_line_summary():
    assert parse_result(json.dumps(SAMPLE)).transport == "NET/IB GDRDMA, 8 HCAs per node"
    assert parse_result(json.dumps({**SAMPLE, "transport": None})).transport is None
    odd = {**SAMPLE, "transport": {**SAMPLE["transport"], "summary": 3}}
    assert parse_result(json.dumps(odd)).verdict == "UNKNOWN"
