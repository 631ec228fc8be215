"""Row 9: the day-0 certifier Job (`python -m verify certify` in the cluster, awaited by the Kubernetes
provider), the one read of its result ConfigMap, and the stack outputs made from it."""

from __future__ import annotations

import json

import pytest
from conftest import dev_config

import stack_config
from components.fabric import certifier as certifier_mod
from components.fabric import fabric_check
from components.fabric.fabric_check import PENDING, parse_result
from tests.unit.verify.test_verify_cli import run as verify_cli  # python -m verify's main(), in this process

JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
CERTIFY_JOB = "kubernetes:batch/v1:Job"
CERTIFY = "fabric-check-certify"
COMMAND = "command:local:Command"


def argv(stack) -> list[str]:
    """`python -m verify` arguments of the certifier Job's one container (after `python3 -S -m verify`)."""
    (container,) = stack.one(CERTIFY_JOB, CERTIFY).inputs["spec"]["template"]["spec"]["containers"]
    assert container["command"][:4] == ["python3", "-S", "-m", "verify"]
    return container["command"][4:]


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def data(text: str | None) -> dict[str, str]:
    """The result ConfigMap's data as the certifier writes it (result.json only)."""
    return {} if text is None else {"result.json": text}


def test_no_local_command_waits_for_the_fabric(dev):
    """Issue 21: `pulumi up` waits on an in-cluster object; the only local Command left is the feature step."""
    assert [r.name for r in dev.of_type(COMMAND)] == ["ib-feature-register"]


def test_the_certifier_job_runs_after_the_test_job_and_its_own_objects(dev):
    certify, job = dev.one(CERTIFY_JOB, CERTIFY), dev.one(JOB, "fabric-test-job")
    assert job.urn in certify.dependencies
    for kind, name in (("ServiceAccount", "certifier-sa"), ("ConfigMap", "certifier-code"),
                       ("ConfigMap", "certifier-result")):
        assert dev.depends_on(certify, dev.one(f"kubernetes:core/v1:{kind}", name))


def test_the_certifier_judges_the_job_the_stack_creates(dev):
    args, job = argv(dev), dev.one(JOB, "fabric-test-job")
    assert args[0] == "certify"
    assert option(args, "--namespace") == job.inputs["metadata"]["namespace"]
    assert option(args, "--job") == job.inputs["metadata"]["name"]
    assert option(args, "--sku") == dev.outputs["vmSize"]
    assert option(args, "--nodes") == str(dev.outputs["nodeCount"])
    assert option(args, "--result-configmap") == certifier_mod.RESULT_CONFIGMAP
    assert "--json" in args


def test_no_credential_among_the_inputs(dev):
    """The pod uses its ServiceAccount: no kubeconfig, no az, nothing secret in the Job."""
    certify = dev.one(CERTIFY_JOB, CERTIFY)
    text = json.dumps(certify.inputs)
    assert certify.secret_inputs == []
    assert "offline-render-not-a-credential" not in text and "kubeconfig" not in text.lower()
    assert "--aks-cluster" not in text
    spec = certify.inputs["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == certifier_mod.SERVICE_ACCOUNT


def test_pulumi_awaits_the_job_and_a_failed_one_is_replaced_next_time(dev):
    certify = dev.one(CERTIFY_JOB, CERTIFY)
    meta = certify.inputs["metadata"]
    assert "pulumi.com/skipAwait" not in (meta.get("annotations") or {})  # the provider waits for Complete
    assert meta["annotations"]["pulumi.com/replaceUnready"] == "true"
    assert certify.inputs["spec"]["backoffLimit"] == 0


# The Kubernetes half of these configurations is what the tests below render (the certifier Job, its
# arguments and the fabric outputs are that half's: tests/stack/test_stack_parts.py); several keys are set at
# once where each test asserts its own key's effect, and the same dicts are rendered by test_nccl_job.py
# and test_image_prepull.py (one render per session for all of them).
# (the doctor keys and topologyFile are for test_nccl_job.py's deadline and topology-file tests)
SHORT = {"timeoutMinutes": 10, "topologyFile": False, "doctor": "never", "doctorMinutes": 10}
FLAGS = {"timeoutMinutes": 120, "failOnLowBandwidth": True, "thresholdGbps": 170, "sharp": True,
         "doctor": "always", "doctorMinutes": 15}
SHARP = {"sharp": True}  # alone: a SHARP run is a different run
IMAGE = {"image": "example.io/nccl:1.2.3"}
# changes that leave the job alone, together: either one changing it fails the test
UNCHANGED = {"tags": {"owner": "someone-else"}, "fabricTest": {"failOnLowBandwidth": True}}


@pytest.mark.parametrize("minutes, fabric_test", [(10, SHORT), (120, FLAGS)], ids=["10", "120"])
def test_timeouts_outlast_the_jobs_deadline(render_kubernetes, minutes, fabric_test):
    stack = render_kubernetes(fabricTest=fabric_test)
    assert fabric_test["timeoutMinutes"] == minutes
    certify = stack.one(CERTIFY_JOB, CERTIFY)
    waits = int(option(argv(stack), "--wait-minutes"))
    deadline = certify.inputs["spec"]["activeDeadlineSeconds"] / 60
    pulumi_limit = int(certify.custom_timeouts["create"].removesuffix("m"))
    assert minutes < waits < deadline < pulumi_limit


def test_fail_on_low_bandwidth_flag_only_when_configured(render_kubernetes, dev):
    assert "--fail-on-low-bandwidth" not in argv(dev)
    assert "--fail-on-low-bandwidth" in argv(render_kubernetes(**UNCHANGED))


def test_sharp_reaches_the_result_and_the_outputs(render_kubernetes, dev):
    """The result says which transport was measured: --sharp on the command line (recorded in the
    JSON) and the allReduceSharp output."""
    assert "--sharp" not in argv(dev) and dev.outputs["allReduceSharp"] is False
    sharp = render_kubernetes(fabricTest=SHARP)
    assert "--sharp" in argv(sharp) and sharp.outputs["allReduceSharp"] is True
    assert run_id(sharp) != run_id(dev)  # a SHARP run is a different run


def test_threshold_only_when_configured(render_kubernetes, dev):
    assert "--threshold-gbps" not in argv(dev)
    assert option(argv(render_kubernetes(fabricTest=FLAGS)), "--threshold-gbps") == str(FLAGS["thresholdGbps"]) == "170"


def run_id(stack) -> str:
    return option(argv(stack), "--run-id")


def job_name(stack) -> str:
    return stack.one(CERTIFY_JOB, CERTIFY).inputs["metadata"]["name"]


def volcano_name(stack) -> str:
    return stack.one(JOB, "fabric-test-job").inputs["metadata"]["name"]


def test_the_run_is_deterministic(dev, render_kubernetes):
    """Another run of the program (the Kubernetes half: a render of its own, not the dev render's copy)
    names the same run and job."""
    again = render_kubernetes()
    assert run_id(dev) == run_id(again) and job_name(dev) == job_name(again)


def test_the_certifier_job_changes_with_the_test_job_and_with_its_own_command(dev, render_kubernetes):
    """Each Job is named after its spec, so a changed one is a new Job (and its preview a dry-run create, which
    the server accepts: components/fabric/mpi_job.py hashed_name)."""
    for changed in (render_kubernetes(fabricTest=IMAGE), render_kubernetes(ibPool={"nodeCount": 4}),
                    render_kubernetes(rdmaMode="sriov")):
        assert volcano_name(changed) != volcano_name(dev)
        assert run_id(changed) != run_id(dev) and job_name(changed) != job_name(dev)
    # the tags change neither Job; failOnLowBandwidth the certify Job's command only: the test does not re-run,
    # its verdict is judged again
    tags = render_kubernetes(tags=UNCHANGED["tags"])
    assert (volcano_name(tags), job_name(tags), run_id(tags)) == (volcano_name(dev), job_name(dev), run_id(dev))
    gate = render_kubernetes(**UNCHANGED)
    assert (volcano_name(gate), run_id(gate)) == (volcano_name(dev), run_id(dev))
    assert job_name(gate) != job_name(dev)


def test_the_stack_names_the_job_it_judged(dev, render_kubernetes):
    """A user finds the run's pods and log by this output: the Job's name changes with its spec."""
    assert dev.outputs["fabricTestJob"] == f"fabric-test/{volcano_name(dev)}"
    changed = render_kubernetes(rdmaMode="sriov")
    assert changed.outputs["fabricTestJob"] == f"fabric-test/{volcano_name(changed)}" != dev.outputs["fabricTestJob"]


def test_each_job_is_named_after_its_spec(dev):
    from components.fabric.mpi_job import hashed_name
    from tests.schema_checks import as_api

    for kind, urn_name, base, namespace in ((JOB, "fabric-test-job", "nccl-allreduce", "fabric-test"),
                                            (CERTIFY_JOB, CERTIFY, "fabric-certify", "fabric-certifier")):
        job = as_api(dev.one(kind, urn_name).inputs)
        assert job["metadata"]["name"] == hashed_name(base, {"namespace": namespace, "spec": job["spec"]}), kind


def test_the_run_id_digests_the_rendered_job(dev):
    """The hash covers the spec that is sent, not a hand-picked subset of the config."""
    from components.fabric.mpi_job import spec_hash
    from tests.schema_checks import as_api

    job = as_api(dev.one(JOB, "fabric-test-job").inputs)
    meta = job["metadata"]
    assert run_id(dev) == spec_hash({"namespace": meta["namespace"], "name": meta["name"], "spec": job["spec"]})


def test_verify_cli_accepts_every_flag_the_job_passes(render_kubernetes):
    stack = render_kubernetes(fabricTest=FLAGS)
    done = verify_cli("certify", "--help")
    assert done.returncode == 0, done.stderr
    for flag in (a for a in argv(stack) if a.startswith("--")):
        assert flag in done.stdout, f"verify certify has no {flag}"


def test_the_gpu_command_is_the_nccl_kind_by_default(dev):
    job = dev.one(JOB, "fabric-test-job")
    cfg = stack_config.parse(dev_config(), "dev")
    args = argv(dev)
    assert args[:11] == [
        "certify", "--namespace", job.inputs["metadata"]["namespace"], "--job", job.inputs["metadata"]["name"],
        "--sku", dev.outputs["vmSize"], "--nodes", str(dev.outputs["nodeCount"]),
        # the job's deadline: the test's timeout plus the fabric doctor's budget (doctor auto)
        "--wait-minutes", str(fabric_check.NODE_SETUP_BUDGET_MINUTES + cfg.fabric_test.timeout_minutes
                              + cfg.fabric_test.doctor_minutes + fabric_check.COLLECT_MARGIN_MINUTES),
    ]
    assert "--kind" not in args
    assert not [k for k in dev.outputs if k.startswith("p2p")]


# --- outputs ------------------------------------------------------------------------------------
def test_outputs_are_pending_offline_never_a_number(dev):
    assert dev.outputs["fabricVerdict"] == PENDING
    assert dev.outputs["allReduceMaxBusBwGbps"] is None
    assert dev.outputs["allReduceBusBwAtMaxSizeGbps"] is None
    assert dev.outputs["ncclVersion"] == "pending"
    assert dev.outputs["fabricTransport"] == "pending"
    assert dev.outputs["fabricRanks"] == "pending (expected 2 nodes x 8 GPUs = 16 ranks)"


def test_no_certifier_job_when_the_test_is_disabled(render):
    stack = render(fabricTest={"enabled": False})
    assert not stack.of_type(CERTIFY_JOB)
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
    r = parse_result(data(json.dumps(SAMPLE, indent=2)))
    assert (r.verdict, r.busbw_at_max_size_gbps, r.max_busbw_gbps) == (SAMPLE["verdict"], 187.22,
                                                                       SAMPLE["max_busbw_gbps"])
    assert (r.ranks, r.hosts, r.gpus_per_node, r.nccl_version) == (16, 2, 8, SAMPLE["nccl_version"])
    assert r.ranks_text(2, 8) == "2 nodes x 8 GPUs = 16 ranks"
    assert r.reasons == tuple(SAMPLE["reasons"]) and r.reasons


@pytest.mark.parametrize("stdout", ["", "   \n", None])
def test_no_output_is_pending(stdout):
    r = parse_result(data(stdout))
    assert r.verdict == PENDING
    assert r.max_busbw_gbps is None and r.busbw_at_max_size_gbps is None and r.ranks is None


@pytest.mark.parametrize("stdout", ["Traceback (most recent call last):", "[1, 2]", "{not json"])
def test_garbage_is_unknown_with_a_reason(stdout):
    r = parse_result(data(stdout))
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
    r = parse_result(data(json.dumps({**SAMPLE, **change})))
    assert r.verdict == "UNKNOWN"
    assert (r.max_busbw_gbps, r.busbw_at_max_size_gbps, r.ranks) == (None, None, None)
    assert named in r.reasons[0]


def test_an_error_document_is_unknown_with_its_error():
    r = parse_result(data(json.dumps({"schemaVersion": 1, "verdict": None, "error": "no credentials"})))
    assert r.verdict == "UNKNOWN" and "no credentials" in r.reasons[0]


def test_parse_what_the_verify_cli_prints(reference):
    """The contract with `verify/`: its --json output, on Azure's published 2-node A100 run."""
    log = reference / "nccl-tests" / "sample-output_azure-aks-rdma-infiniband_expected-output.txt"
    done = verify_cli("report", str(log), "--sku", "Standard_ND96asr_v4", "--nodes", "2", "--json")
    assert done.returncode == 0, done.stderr
    r = parse_result(data(done.stdout))
    assert r.busbw_at_max_size_gbps == pytest.approx(187.22)
    assert r.ranks == 16
    assert r.verdict in ("PASS", "WARN")


def test_parse_what_the_verify_cli_prints_for_a_p2p_log():
    """The contract with `verify/` for the CPU-only kind: its --json output on a published HBv3 run."""
    from tests.unit.verify.test_osu_perftest import HBV3_BW, raw_rows

    done = verify_cli("report", str(HBV3_BW), "--sku", "Standard_HB120rs_v3", "--json")
    assert done.returncode == 0, done.stderr
    r = parse_result(data(done.stdout))
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
              "skipped": [], "notes": [], "tiers": {}}
    doc = json.dumps({**SAMPLE, "verdict": "FAIL", "suspects": [suspect], "doctor": doctor})
    assert parse_result(data(doc)).suspects == (suspect,)  # as the doctor named them, without the certifier's
    assert parse_result(data(json.dumps(SAMPLE))).suspects == ()
    assert parse_result(data("")).suspects == ()
    # suspects without the doctor's block, or a suspect missing a key, is not a v1 result
    assert parse_result(data(json.dumps({**SAMPLE, "suspects": [suspect]}))).verdict == "UNKNOWN"
    bad = {**SAMPLE, "suspects": [{k: v for k, v in suspect.items() if k != "hca"}], "doctor": doctor}
    assert "hca" in parse_result(data(json.dumps(bad))).reasons[0]
    # the certifier's names: the Kubernetes node and the VM, the pod host name kept as evidence
    named = {"node": "aks-ib-12345678-vmss000001", "vm": "aks-ib-12345678-vmss_1", **suspect}
    cert = {"verdict": "FAIL", "reasons": ["suspect w1 mlx5_ib3: port mlx5_ib3:1 runs at 200 Gb/s"],
            "suspects": [named]}
    r = parse_result({"result.json": doc, "certification.json": json.dumps(cert)})
    assert r.suspects == (named,) and r.suspects[0]["host"] == "w1" and r.reasons == tuple(cert["reasons"])


def test_the_gpu_stack_exports_fabric_suspects(dev):
    assert dev.outputs["fabricSuspects"] == []  # none until a run names some


def test_transport_output_is_the_results_one_line_summary():
    assert parse_result(data(json.dumps(SAMPLE))).transport == "NET/IB GDRDMA, 8 HCAs per node"
    assert parse_result(data(json.dumps({**SAMPLE, "transport": None}))).transport is None
    odd = {**SAMPLE, "transport": {**SAMPLE["transport"], "summary": 3}}
    assert parse_result(data(json.dumps(odd))).verdict == "UNKNOWN"
