"""The certifier judges a REAL recorded launcher log through the real API server: the day-0 path on two kwok
nodes whose finished fabric test's launcher log is tests/data/nccl-info_2.30.4_socket-fallback_2-fake-hosts-
x1-gpu_h200x1.log, the merged output of scripts/nccl-launcher.sh with NCCL 2.30.4 and nccl-tests 2.19.6 on a
lent H200 (tests/data/nccl-info_recorded_2.30.4_h200x1.md). Nothing in it is edited but its two host names
(`node-0`, `node-1`, the recording's fake hosts), which become the worker pods' hostnames here so that the
certifier can find the pods (and so the nodes) the ranks ran on.

What that run was: two hosts without InfiniBand, so NCCL fell back to TCP sockets (`NET/Socket`). The
certifier must read that from the log served by kwok and refuse to admit either node: a fabric that is not
RDMA is not certified, whatever its figures. No recorded run has InfiniBand nodes (nothing here has a
fabric), so the IB scenarios stay on constructed logs (e2e/tests/test_certifier.py).
"""

from __future__ import annotations

import json

import pytest

from core import fabric
from e2e import fabric_run
from e2e.tests.test_certifier import CONFIG, World

TWO_NODES = {**CONFIG, "ibPool": {**CONFIG["ibPool"], "nodeCount": 2}}


@pytest.fixture
def world(planes, tmp_path):
    return World(planes, tmp_path, TWO_NODES)


def test_a_recorded_run_over_tcp_sockets_certifies_no_node_and_says_rdma_was_not_used(world):
    assert len(world.ib) == 2
    assert world.admit_once().returncode == 0
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in world.ib)
    code, out, err = world.run_and_certify(fabric_run.recorded_log(world.job["metadata"]["name"]))
    cert = out.get("certification", {})
    assert cert.get("verdict") == "FAIL", (code, err)
    assert out["result"]["transport"]["network"] == "Socket", out["result"]["transport"]
    assert any("RDMA was not used" in r for r in out["result"]["reasons"]), out["result"]["reasons"]
    # no node is to blame for a fabric that never used RDMA: none quarantined, none admitted
    assert cert["suspects"] == [] and not cert["breaker"], cert
    assert all(world.fabric_taints(n) == [fabric.UNCERTIFIED] for n in world.ib), "every hold stays"
    assert cert["failed_writes"] == []
    # the verdict is kept on the real server, where the runbook reads it
    kept = json.loads(world.kubectl("get", "configmap", "-n", "fabric-certifier", "fabric-certifier-result", "-o",
                                    "json").stdout)["data"]
    assert json.loads(kept["certification.json"])["verdict"] == "FAIL"
