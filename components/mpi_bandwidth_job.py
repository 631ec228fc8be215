"""Row 8 for CPU-only sizes (HB / HX): an MPI point-to-point test between two nodes over RDMA, as a
gang-scheduled Volcano Job, in place of the NCCL all-reduce.

One `mpimaster` pod runs `scripts/mpi-p2p-launcher.sh`: `osu_bw` then `osu_latency` with one rank on
each of two `mpiworker` pods (one per node: pod anti-affinity). Open MPI's UCX PML carries the
measured traffic over the InfiniBand HCA that the RDMA device plugin hands the pod; the launch
itself stays on the pod network. No GPU is requested and none is needed.

The image: by default the stack's `fabricTest.image`, the pinned CoreWeave nccl-tests image, which
carries HPC-X with its OSU micro-benchmarks at `OSU_DIR` (coreweave/nccl-tests Dockerfile.ubuntu22,
HPCX_OSU_DIR) and sshd. It is a CUDA image: on a GPU-less node its CPU binaries run (nothing here
asks for `-d cuda`), but it is large and this combination has not been run on real HB/HX hardware.

The job's shape (gang scheduling, ssh/svc plugins, placement, security, replacement) is
`components.mpi_job`, shared with the NCCL test, so the two fabric tests cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

import fabric
from catalog import Sku
from components import mpi_job
from components.mpi_job import MPI_HOME, SSH_WAIT_SECONDS

core = k8s.core.v1

LAUNCHER_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mpi-p2p-launcher.sh"
OSU_DIR = "/opt/hpcx/ompi/tests/osu-micro-benchmarks"  # HPC-X's OMB in the default image
WORKERS = 2  # point to point: one rank on each of two nodes
# A rank of osu_bw needs one core and little memory; the window of 64 x 4 MiB messages fits in 2 Gi.
WORKER_CPU, WORKER_MEMORY = "2", "4Gi"
# UCX over InfiniBand only: RC verbs and loopback; shared memory is never used between two nodes,
# and TCP is left out so that a missing RDMA device fails the run instead of measuring Ethernet.
UCX_ENV = {"UCX_TLS": "rc,self"}


@dataclass(frozen=True)
class MpiBandwidthJobArgs:
    sku: Sku
    rdma_mode: str  # fabric.RDMA_MODES
    image: str  # pinned; must carry OSU at OSU_DIR, Open MPI (UCX) at MPI_HOME and sshd
    timeout_minutes: int  # the pods' activeDeadlineSeconds
    osu_bw_args: str = ""  # e.g. "-m 1:8388608"; empty: OSU's defaults (1 B to 4 MiB)
    osu_latency_args: str = ""
    # What the job must wait for: the IB pool, the NicClusterPolicy, Volcano (no GPU Operator).
    wait_for: Sequence[pulumi.Resource] = ()
    namespace_name: str = mpi_job.NAMESPACE
    job_name: str = "mpi-p2p"

    def __post_init__(self) -> None:
        if self.sku.has_gpus:
            raise ValueError(
                f"sku: {self.sku.vm_size} has {self.sku.gpus_per_vm} GPUs; the MPI point-to-point job is for "
                f"CPU-only sizes (GPU sizes run the NCCL all-reduce)"
            )
        fabric.rdma_request(self.rdma_mode, self.sku)  # raises with the allowed modes
        mpi_job.check_host_names(self.job_name, WORKERS)


def worker_resources(args: MpiBandwidthJobArgs) -> core.ResourceRequirementsArgs:
    """The RDMA resource of the configured mode (fabric.py), a little CPU and memory, no GPU."""
    rdma = fabric.rdma_request(args.rdma_mode, args.sku)
    return core.ResourceRequirementsArgs(
        requests={rdma.resource: str(rdma.count), "cpu": WORKER_CPU, "memory": WORKER_MEMORY},
        limits={rdma.resource: str(rdma.count)},
    )


def job_spec(args: MpiBandwidthJobArgs, launcher_configmap: str, config_hash: str) -> dict[str, Any]:
    """The Volcano Job's spec: the OSU launcher and two workers with the RDMA resource, no GPU."""
    env = {
        "OSU_DIR": OSU_DIR,
        "OSU_BW_ARGS": args.osu_bw_args,
        "OSU_LATENCY_ARGS": args.osu_latency_args,
        "MPI_HOME": MPI_HOME,
        "SSH_WAIT_SECONDS": str(SSH_WAIT_SECONDS),
        **UCX_ENV,
    }
    return mpi_job.job_spec(
        workers=WORKERS,
        launcher=mpi_job.launcher_template(
            args.job_name, args.image, env, core.ResourceRequirementsArgs(requests={"cpu": "1", "memory": "1Gi"}),
            args.timeout_minutes, config_hash, launcher_configmap,
        ),
        worker=mpi_job.worker_template(
            args.job_name, args.image, worker_resources(args), args.timeout_minutes, config_hash
        ),
    )


class MpiBandwidthJob(pulumi.ComponentResource):
    """The CPU-only fabric test: a namespace, the launcher ConfigMap, the Volcano Job (see
    `mpi_job.declare_mpi_job`), with the same contract as `NcclJob` so the collect step treats
    both alike."""

    namespace: pulumi.Resource
    launcher: k8s.core.v1.ConfigMap
    job: k8s.apiextensions.CustomResource
    job_name: str
    namespace_name: str
    node_count: int
    spec: dict[str, Any]
    spec_sha256: str

    def __init__(self, name: str, args: MpiBandwidthJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:MpiBandwidthJob", name, None, opts)
        self.job_name, self.namespace_name = args.job_name, args.namespace_name
        self.node_count = WORKERS  # nodes the test spans
        declared = mpi_job.declare_mpi_job(
            name,
            self,
            job_name=args.job_name,
            namespace_name=args.namespace_name,
            launcher_script=LAUNCHER_SCRIPT,
            build_spec=lambda launcher, _configmaps, config_hash: job_spec(args, launcher, config_hash),
            wait_for=args.wait_for,
        )
        self.namespace, self.launcher, self.job = declared.namespace, declared.launcher, declared.job
        self.spec, self.spec_sha256 = declared.spec, declared.spec_sha256
        self.register_outputs({"job_name": args.job_name, "namespace": self.namespace.name,
                               "spec_sha256": self.spec_sha256})
