"""What the job hands the fabric test's launcher, against what reads it after the job: the recurring
certifier's re-test (clusterside/certify_recurring.py), which sets the launcher's inputs for n nodes on the
day-0 job's spec."""

from __future__ import annotations

import pytest

from components.fabric import nccl_job
from core import catalog, modes
from verify import doctor


@pytest.mark.parametrize("mode", ["never", "auto", "always"])
def test_a_re_test_sets_every_doctor_input_on_the_day_0_spec_whatever_its_mode(mode):
    """clusterside/certify_recurring.py's re-test replaces the launcher's inputs that the day-0 spec has: so
    the day-0 job carries every doctor input in every mode (with fabricTest.doctor never, the re-test's
    doctor had no pair rounds, arguments or figures before)."""
    from clusterside import certify_recurring

    args = nccl_job.NcclJobArgs(sku=catalog.lookup("Standard_ND96asr_v4"), node_count=3,
                                rdma_mode=modes.rdma_mode("shared"),
                                image="x/y:1", all_reduce_args="-b 8 -e 8G -f 2 -g 1", timeout_minutes=30,
                                doctor=mode)
    spec = nccl_job.job_spec(args, "launcher", {"topology": "topology"}, "hash")
    template = nccl_job.retest_template(args, spec)
    for n, wanted in template["env_by_nodes"].items():
        job = certify_recurring.retest_job(template, [f"node-{i}" for i in range(int(n))], "re-test")
        master = next(t for t in job["spec"]["tasks"] if t["name"] == "mpimaster")
        env = {e["name"]: e["value"] for e in master["template"]["spec"]["containers"][0]["env"]}
        assert {k: env.get(k) for k in wanted} == wanted
        assert (env["DOCTOR"], env["DOCTOR_RUN"], env["DOCTOR_PAIR_ROUNDS"]) == (
            "always", "yes", doctor.rounds_env(doctor.plan_pairs(int(n))))
