"""The NCCL job's launcher script (scripts/nccl-launcher.sh) run for real with the rendered job's environment on a
fake cluster (tests/launcher_stubs.py): one rank per GPU, the NCCL environment forwarded, waits and refusals, the
log condensed. The job around it: tests/stack/components/test_nccl_job.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import dev_kubernetes_half

from components.fabric import mpi_job, nccl_job
from core import catalog
from tests import launcher_stubs
from tests.paths import DATA
from tests.stack.components.test_nccl_job import A100, H100, LAUNCHER, env


def test_launcher_is_valid_bash():
    subprocess.run(["bash", "-n", str(LAUNCHER)], check=True)


@pytest.fixture
def fake_cluster(tmp_path):
    """A PATH with stub ssh, mpirun, nvidia-smi and ib_write_bw (tests/launcher_stubs.py)."""
    return launcher_stubs.install(tmp_path)


def run_launcher(fake_cluster: Path, stack, hosts: int, **extra: str) -> subprocess.CompletedProcess:
    hostfile = fake_cluster / "mpiworker.host"
    hostfile.write_text("".join(f"nccl-allreduce-mpiworker-{i}.nccl-allreduce\n" for i in range(hosts)))
    run_env = launcher_stubs.env_for(fake_cluster, env(stack), hostfile, **extra)
    return subprocess.run(["bash", str(LAUNCHER)], env=run_env, capture_output=True, text=True, timeout=60)


def mpirun_args(fake_cluster: Path) -> list[str]:
    return (fake_cluster / "mpirun.args").read_text().splitlines()


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("vm_size, nodes", [(A100, 2), (H100, 4)])
def test_launcher_runs_one_rank_per_gpu(fake_cluster, vm_size, nodes):
    stack = dev_kubernetes_half(ibPool={"vmSize": vm_size, "nodeCount": nodes})
    gpus = catalog.lookup(vm_size).gpus_per_vm
    done = run_launcher(fake_cluster, stack, hosts=nodes)
    assert done.returncode == 0, done.stderr
    args = mpirun_args(fake_cluster)
    assert flag(args, "-np") == str(nodes * gpus)
    sku = catalog.lookup(vm_size)
    if sku.generation == "ndv5":  # Azure's core binding: cores per VM / GPUs per VM each
        assert flag(args, "--map-by") == f"ppr:{gpus}:node:pe={sku.cpu_cores_per_vm // gpus}" == "ppr:8:node:pe=12"
        assert flag(args, "--bind-to") == "core" and "-npernode" not in args
    else:
        assert flag(args, "-npernode") == str(gpus) and flag(args, "--bind-to") == "none"
    assert (fake_cluster / "hostfile").read_text().splitlines() == [
        f"nccl-allreduce-mpiworker-{i}.nccl-allreduce slots={gpus}" for i in range(nodes)
    ]
    # the benchmark and its configured arguments close the command line
    bench = args.index(nccl_job.ALL_REDUCE_BIN)
    assert args[bench + 1:] == env(stack)["ALL_REDUCE_ARGS"].split()
    assert flag(args, "--prefix") == mpi_job.MPI_HOME


def test_launcher_forwards_the_nccl_environment(fake_cluster, dev):
    assert run_launcher(fake_cluster, dev, hosts=2).returncode == 0
    args = mpirun_args(fake_cluster)
    forwarded = {args[i + 1] for i, a in enumerate(args) if a == "-x"}
    wanted = {k for k in env(dev) if k.startswith(("NCCL_", "UCX_", "SHARP_"))} | {"CUDA_DEVICE_ORDER", "PATH"}
    assert wanted <= forwarded
    assert "NCCL_TOPO_FILE" in forwarded and "NCCL_IB_DISABLE" in forwarded


def test_launcher_waits_for_a_slow_sshd(fake_cluster, dev):
    done = run_launcher(fake_cluster, dev, hosts=2, SSH_FAILS="3")
    assert done.returncode == 0, done.stderr
    assert (fake_cluster / "ssh.nccl-allreduce-mpiworker-0.nccl-allreduce").read_text().strip() == "4"


def test_launcher_gives_up_on_a_dead_worker(fake_cluster, dev):
    # no wait at all: it gives up at its first failed attempt (the retries: test_launcher_waits_for_a_slow_sshd)
    done = run_launcher(fake_cluster, dev, hosts=2, SSH_FAILS="1000000", SSH_WAIT_SECONDS="0")
    assert done.returncode == 4
    assert "did not answer within 0s" in done.stderr
    assert not (fake_cluster / "mpirun.args").exists()


def test_launcher_refuses_a_wrong_number_of_workers(fake_cluster, dev):
    done = run_launcher(fake_cluster, dev, hosts=1)
    assert done.returncode == 3
    assert "expected 2 workers" in done.stderr


def test_launcher_passes_on_mpiruns_failure(fake_cluster, dev):
    # the doctor: test_doctor_launcher
    done = run_launcher(fake_cluster, dev, hosts=2, MPIRUN_EXIT="7", **launcher_stubs.doctor_mode("never", 2))
    assert done.returncode == 7
    assert "mpirun exited with status 7" in done.stderr


def test_launcher_tags_every_rank_and_keeps_mpi_on_the_pod_interface(fake_cluster, dev):
    assert run_launcher(fake_cluster, dev, hosts=2).returncode == 0
    args = mpirun_args(fake_cluster)
    assert "--tag-output" in args  # "[1,RANK]<stdout>:": interleaved ranks stay attributable
    assert args[args.index("oob_tcp_if_include") + 1] == "eth0"
    assert run_launcher(fake_cluster, dev, hosts=2, POD_IFNAME="ens5").returncode == 0
    args = mpirun_args(fake_cluster)
    assert args[args.index("oob_tcp_if_include") + 1] == "ens5"


def test_launcher_condenses_nccls_info_lines_of_a_real_log(fake_cluster, dev):
    """mpirun's output (a real NCCL 2.28.9 log, tests/data) goes through the launcher's filter: the
    nccl-tests table and the transport lines stay, the rest of NCCL's INFO goes."""
    from verify import nccl

    data = DATA
    recorded = data / "nccl-info_2.28.9_socket-fallback_2-fake-hosts-x2-gpus_h200x2.log"
    done = run_launcher(fake_cluster, dev, hosts=2, MPIRUN_OUTPUT=str(recorded), NCCL_DEBUG="WARN",
                        **launcher_stubs.doctor_mode("never", 2))
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    (count,) = [line for line in out if line.startswith("[nccl-launcher] NCCL INFO lines: ")]
    assert count.endswith("keeps all)")
    assert not any("via P2P/" in line or "Trees [" in line for line in out)  # intra-node, topology: dropped
    nets = [line for line in out if "NET/IB : Using" in line]
    assert len(nets) == 2  # once per host, not once per rank (4 ranks)
    assert nccl.parse(done.stdout).transport == nccl.parse(recorded.read_text()).transport
    full = run_launcher(fake_cluster, dev, hosts=2, MPIRUN_OUTPUT=str(recorded), LAUNCHER_NCCL_LOG="full",
                        **launcher_stubs.doctor_mode("never", 2))
    assert any("via P2P/" in line for line in full.stdout.splitlines())


def test_launcher_refuses_an_unknown_log_mode(fake_cluster, dev):
    done = run_launcher(fake_cluster, dev, hosts=2, LAUNCHER_NCCL_LOG="everything")
    assert done.returncode == 2 and "expected condensed or full" in done.stderr
    assert not (fake_cluster / "mpirun.args").exists()
