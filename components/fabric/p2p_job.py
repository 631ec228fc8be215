"""Row 8 for CPU-only sizes (HB / HX): the point-to-point test ("p2p"), MPI between two nodes over
RDMA, as a gang-scheduled Volcano Job, in place of the NCCL all-reduce.

One `mpimaster` pod runs `scripts/p2p-launcher.sh`: `osu_bw` then `osu_latency` with one rank on
each of two `mpiworker` pods (one per node), over UCX on the HCA the RDMA mode hands the pod; no GPU.
The default image has no OSU binaries (its Dockerfile removes them), so each worker first runs an
`osu-build` initContainer (`scripts/build-osu.sh`) that links prebuilt ones at `OSU_PREBUILT_DIR` or
builds the pinned, checksummed OSU release into `OSU_DIR`. Not yet run on real HB/HX hardware; the
details and sources: docs/fabric-test.md#cpu-only-hpc-sizes-hb--hx.

The job's shape (gang scheduling, ssh/svc plugins, placement, security, replacement) is
`components.fabric.mpi_job`, shared with the NCCL test, so the two fabric tests cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.fabric import mpi_job
from components.fabric.mpi_job import MPI_HOME
from core import modes, pins
from core.catalog import Sku
from core.kinds import POINT_TO_POINT, Kind
from core.modes import RdmaMode

core = k8s.core.v1

LAUNCHER_SCRIPT = mpi_job.SCRIPTS / POINT_TO_POINT.launcher
BUILD_SCRIPT = mpi_job.SCRIPTS / "build-osu.sh"
# OSU Micro-Benchmarks, pinned: the official tarball and its sha256, as spack records it
# (spack/spack-packages@00caeea repos/spack_repo/builtin/packages/osu_micro_benchmarks/package.py:
# version("7.5", sha256="1cf84ac5...")). The only place these pins live; the script gets them as env.
OSU_VERSION = "7.5"
OSU_URL = f"https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-{OSU_VERSION}.tar.gz"
OSU_SHA256 = "1cf84ac5419456202757a757c5f9a4f5c6ecd05c65783c7976421cfd6020b3b3"
# Where an image that ships OSU has it (HPC-X's layout); used as is when both binaries are there.
OSU_PREBUILT_DIR = "/opt/hpcx/ompi/tests/osu-micro-benchmarks"
OSU_DOWNLOAD_ATTEMPTS = 3  # build-osu.sh's tries of the tarball's download
OSU_BUILD_CONTAINER = "osu-build"  # the workers' initContainer
OSU_VOLUME = "osu"  # emptyDir shared by the initContainer and the worker container
OSU_MOUNT = "/opt/osu"  # the emptyDir's path in both containers
OSU_PREFIX = f"{OSU_MOUNT}/install"  # `make install` prefix (on the emptyDir)
OSU_DIR = f"{OSU_MOUNT}/bin"  # osu_bw and osu_latency, at a fixed path on every worker
OSU_BUILD_DIR = "/opt/aks-infiniband-osu"  # build-osu.sh, from the `<job>-osu-build` ConfigMap
# Modest: configure + make of OSU takes minutes (make uses the cores that are free); the pod's
# effective request is the larger workers' anyway, so this adds nothing to scheduling.
OSU_BUILD_CPU, OSU_BUILD_MEMORY = "1", "1Gi"
WORKERS = POINT_TO_POINT.nodes  # point to point: one rank on each of two nodes
# A rank of osu_bw needs one core and little memory; the window of 64 x 4 MiB messages fits in 2 Gi.
WORKER_CPU, WORKER_MEMORY = "2", "4Gi"
# UCX over InfiniBand only: RC verbs and loopback; shared memory is never used between two nodes,
# and TCP is left out so that a missing RDMA device fails the run instead of measuring Ethernet.
UCX_ENV = {"UCX_TLS": "rc,self"}


@dataclass(frozen=True)
class P2pJobArgs:
    sku: Sku
    rdma_mode: RdmaMode  # how the workers get the HCAs (core.modes.MODES)
    image: str  # pinned; must carry Open MPI (UCX) with mpicc at MPI_HOME, sshd, and OSU at
    # OSU_PREBUILT_DIR or a compiler and curl/wget to build it (build-osu.sh)
    timeout_minutes: int  # the pods' activeDeadlineSeconds
    osu_bw_args: str = ""  # e.g. "-m 1:8388608"; empty: OSU's defaults (1 B to 4 MiB)
    osu_latency_args: str = ""
    # What the job must wait for: the IB pool, the NicClusterPolicy, Volcano (no GPU Operator).
    wait_for: Sequence[pulumi.Resource] = ()
    # Operator charts and drivers the test runs against (NetworkOperator/GpuOperator.driver_versions):
    # on every pod, so a change of any re-runs the test (mpi_job.DRIVER_VERSIONS_ANNOTATION).
    driver_versions: Mapping[str, str] = field(default_factory=dict)
    namespace_name: str = mpi_job.NAMESPACE
    job_name: str = "p2p"  # the pods' name label; the Job's name adds its spec's hash (mpi_job.hashed_name)
    # In a stack of several IB pools, the pool the job runs in (each its own fabric); None: every IB node.
    agent_pool: str | None = None

    def __post_init__(self) -> None:
        if self.sku.has_gpus != POINT_TO_POINT.gpus:
            raise ValueError(
                f"sku: {self.sku.vm_size} has {self.sku.gpus_per_vm} GPUs; the MPI point-to-point job is for "
                f"CPU-only sizes (GPU sizes run the NCCL all-reduce)"
            )
        pins.IMAGE_REF.require("image", self.image)
        modes.require(self.rdma_mode)  # the record, not a name
        mpi_job.check_host_names(self.job_name, WORKERS)


def worker_resources(args: P2pJobArgs) -> core.ResourceRequirementsArgs:
    """The HCAs as the configured RDMA mode hands them out (core/modes.py), a little CPU and memory, no GPU."""
    rdma = args.rdma_mode.limits(args.sku)
    return core.ResourceRequirementsArgs(
        requests={**rdma, "cpu": WORKER_CPU, "memory": WORKER_MEMORY},
        limits=rdma,
    )


def osu_build_container(image: str) -> core.ContainerArgs:
    """The workers' initContainer: build-osu.sh puts osu_bw and osu_latency into OSU_DIR on the
    shared emptyDir (from the image at OSU_PREBUILT_DIR, or built from the pinned tarball)."""
    env = {
        "OSU_URL": OSU_URL,
        "OSU_SHA256": OSU_SHA256,
        "OSU_DOWNLOAD_ATTEMPTS": str(OSU_DOWNLOAD_ATTEMPTS),
        "OSU_PREBUILT_DIR": OSU_PREBUILT_DIR,
        "OSU_PREFIX": OSU_PREFIX,
        "OSU_BIN_DIR": OSU_DIR,
        "MPI_HOME": MPI_HOME,
    }
    return core.ContainerArgs(
        name=OSU_BUILD_CONTAINER,
        image=image,
        command=["/bin/bash", f"{OSU_BUILD_DIR}/{BUILD_SCRIPT.name}"],
        env=[core.EnvVarArgs(name=k, value=v) for k, v in env.items()],
        resources=core.ResourceRequirementsArgs(requests={"cpu": OSU_BUILD_CPU, "memory": OSU_BUILD_MEMORY}),
        security_context=mpi_job.container_security(ipc_lock=False),
        volume_mounts=[
            core.VolumeMountArgs(name=OSU_VOLUME, mount_path=OSU_MOUNT),
            core.VolumeMountArgs(name=OSU_BUILD_CONTAINER, mount_path=OSU_BUILD_DIR, read_only=True),
        ],
    )


def job_spec(args: P2pJobArgs, launcher_configmap: str, configmaps: dict[str, str],
             config_hash: str) -> dict[str, Any]:
    """The Volcano Job's spec: the OSU launcher and two workers with the RDMA resource, no GPU; each
    worker gets OSU from its `osu-build` initContainer through the shared emptyDir."""
    env = {
        "OSU_DIR": OSU_DIR,
        "OSU_BW_ARGS": args.osu_bw_args,
        "OSU_LATENCY_ARGS": args.osu_latency_args,
        **mpi_job.launcher_env(),  # the hostfile, MPI_HOME, the sshd wait, the pod's interface
        **UCX_ENV,
    }
    return mpi_job.job_spec(
        workers=WORKERS,
        launcher=mpi_job.launcher_template(
            args.job_name, args.image, env, core.ResourceRequirementsArgs(requests={"cpu": "1", "memory": "1Gi"}),
            args.timeout_minutes, config_hash, launcher_configmap, agent_pool=args.agent_pool,
        ),
        worker=mpi_job.worker_template(
            args.job_name, args.image, worker_resources(args), args.timeout_minutes, config_hash,
            agent_pool=args.agent_pool,
            extra_mounts=[core.VolumeMountArgs(name=OSU_VOLUME, mount_path=OSU_MOUNT, read_only=True)],
            extra_volumes=[
                # a few MB of binaries; the build tree stays in the initContainer's own filesystem
                core.VolumeArgs(name=OSU_VOLUME, empty_dir=core.EmptyDirVolumeSourceArgs(size_limit="1Gi")),
                core.VolumeArgs(
                    name=OSU_BUILD_CONTAINER,
                    config_map=core.ConfigMapVolumeSourceArgs(
                        name=configmaps[OSU_BUILD_CONTAINER], default_mode=0o555
                    ),
                ),
            ],
            init_containers=[osu_build_container(args.image)],
        ),
        agent_pool=args.agent_pool,
    )


class P2pJob(pulumi.ComponentResource):
    """The CPU-only fabric test: a namespace, the launcher ConfigMap, the Volcano Job (see
    `mpi_job.declare_mpi_job`). Implements `fabric_test.FabricTestJob`, as `NcclJob` does, so the
    collect step takes either."""

    kind: Kind = POINT_TO_POINT
    sharp: bool = False  # no NCCL, no SHARP: MPI point to point over one HCA
    rack_run: bool = False  # no NVLink run: the rack's run is the all-reduce's
    retest: None = None  # the certifier re-runs none of it (POINT_TO_POINT.retests)
    namespace: pulumi.Resource
    launcher: k8s.core.v1.ConfigMap
    job: k8s.apiextensions.CustomResource
    sku: Sku
    job_name: str
    namespace_name: str
    node_count: int
    deadline_minutes: int
    spec: dict[str, Any]
    spec_sha256: str

    def __init__(self, name: str, args: P2pJobArgs, opts: pulumi.ResourceOptions | None = None):
        # Formerly MpiBandwidthJob: the alias keeps the component's and its children's URNs.
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_="aks-infiniband:kubernetes:MpiBandwidthJob")]))
        super().__init__("aks-infiniband:kubernetes:P2pJob", name, None, opts)
        self.sku = args.sku
        self.namespace_name = args.namespace_name
        self.node_count = WORKERS  # nodes the test spans
        self.deadline_minutes = args.timeout_minutes  # the pods' deadline (no doctor on this test)
        declared = mpi_job.declare_mpi_job(
            name,
            self,
            job_name=args.job_name,
            namespace_name=args.namespace_name,
            launcher_script=LAUNCHER_SCRIPT,
            configmaps={OSU_BUILD_CONTAINER: {BUILD_SCRIPT.name: BUILD_SCRIPT.read_text()}},
            build_spec=lambda launcher, configmaps, config_hash: job_spec(args, launcher, configmaps, config_hash),
            wait_for=args.wait_for,
            driver_versions=args.driver_versions,
        )
        self.namespace, self.launcher, self.job = declared.namespace, declared.launcher, declared.job
        self.job_name = declared.name  # the Volcano Job's: args.job_name and its spec's hash
        self.spec, self.spec_sha256 = declared.spec, declared.spec_sha256
        self.register_outputs({"job_name": self.job_name, "namespace": self.namespace.name,
                               "spec_sha256": self.spec_sha256})
