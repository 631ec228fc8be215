"""The fabric doctor's launcher on a fake cluster, shared by the tests of tests/stack/components/
test_doctor_launcher*.py: the job's own environment (from the Kubernetes half of the stack), a run of
scripts/nccl-launcher.sh over tests/launcher_stubs.py, and `python -m verify report` on its output."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

from conftest import dev_kubernetes_half

from core import catalog
from tests import launcher_stubs
from tests.paths import ROOT
from verify import sections
from verify.__main__ import main as verify_main

LAUNCHER = ROOT / "scripts" / "nccl-launcher.sh"
H100 = "Standard_ND96isr_H100_v5"
SKU = catalog.lookup(H100)
# what the stub mpirun measures on a healthy fabric: the catalog's baselines (tests/launcher_stubs.py)
HEALTHY = {"STUB_ALL_BUSBW": f"{SKU.allreduce_expectation(4).baseline_gbps}",
           "STUB_PAIR_BUSBW": f"{SKU.allreduce_expectation(2).baseline_gbps}",
           "STUB_NODE_BUSBW": f"{SKU.allreduce_1_node.threshold_gbps + 10}"}
JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"


def launcher_env(nodes: int) -> dict[str, str]:
    """The launcher container's environment, from the Kubernetes half of the stack (which declares the
    job exactly as the whole stack does: tests/stack/test_stack_parts.py); two nodes is the dev stack."""
    stack = dev_kubernetes_half(ibPool={"vmSize": H100, "nodeCount": nodes})
    (job,) = [r for r in stack.resources if r.type == JOB]
    master = next(t for t in job.inputs["spec"]["tasks"] if t["name"] == "mpimaster")
    return {e["name"]: e.get("value", "") for e in master["template"]["spec"]["containers"][0]["env"]}


def forwarded(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def host(i: int) -> str:
    return f"nccl-allreduce-mpiworker-{i}.nccl-allreduce"


class Run:
    def __init__(self, root: Path, done: subprocess.CompletedProcess, nodes: int):
        self.root, self.done, self.nodes = root, done, nodes
        self.sections = sections.split(done.stdout)

    @property
    def calls(self) -> list[list[str]]:
        return launcher_stubs.calls(self.root)

    def named(self, name: str) -> list[sections.Section]:
        return [s for s in self.sections if s.name == name]

    def report(self) -> dict:
        log = self.root / "launcher.log"
        log.write_text(self.done.stdout + self.done.stderr)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert verify_main(["report", str(log), "--sku", H100, "--nodes", str(self.nodes), "--json"]) == 0
        return json.loads(out.getvalue())


def run(tmp_path: Path, env: dict[str, str], nodes: int, setup=None, **extra: str) -> Run:
    root = launcher_stubs.install(tmp_path, fake_timeout="STUB_TIMEOUT_ON" in extra)
    for i in range(nodes):
        launcher_stubs.add_node(root, host(i), **((setup or {}).get(i, {})))
    hostfile = root / "mpiworker.host"
    hostfile.write_text("".join(host(i) + "\n" for i in range(nodes)))
    run_env = launcher_stubs.env_for(root, env, hostfile, **{**HEALTHY, **extra})
    done = subprocess.run(["bash", str(LAUNCHER)], env=run_env, capture_output=True, text=True, timeout=120)
    return Run(root, done, nodes)
