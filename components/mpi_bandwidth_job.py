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

Shared pieces (placement on the pool, TTL, labels, plain/spec_hash, task names, namespace policy)
come from `components.nccl_job`, so the two fabric tests cannot drift apart.
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
from components.namespace import Namespace, NamespaceArgs
from components.nccl_job import (
    CONFIG_HASH_ANNOTATION,
    MASTER_TASK,
    MPI_HOME,
    SSH_PORT,
    SSH_WAIT_SECONDS,
    TTL_SECONDS_AFTER_FINISHED,
    WORKER_TASK,
    labels,
    plain,
    pool_placement,
    spec_hash,
)

core = k8s.core.v1
meta = k8s.meta.v1

LAUNCHER_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mpi-p2p-launcher.sh"
LAUNCHER_DIR = "/opt/aks-infiniband"
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
    namespace_name: str = "fabric-test"
    job_name: str = "mpi-p2p"

    def __post_init__(self) -> None:
        if self.sku.has_gpus:
            raise ValueError(
                f"sku: {self.sku.vm_size} has {self.sku.gpus_per_vm} GPUs; the MPI point-to-point job is for "
                f"CPU-only sizes (GPU sizes run the NCCL all-reduce)"
            )
        fabric.rdma_request(self.rdma_mode, self.sku)  # raises with the allowed modes
        if len(f"{self.job_name}-{WORKER_TASK}-{WORKERS - 1}") > 63:
            raise ValueError(f"job_name: {self.job_name!r} makes pod host names longer than 63 characters")


def worker_resources(args: MpiBandwidthJobArgs) -> core.ResourceRequirementsArgs:
    """The RDMA resource of the configured mode (fabric.py), a little CPU and memory, no GPU."""
    rdma = fabric.rdma_request(args.rdma_mode, args.sku)
    return core.ResourceRequirementsArgs(
        requests={rdma.resource: str(rdma.count), "cpu": WORKER_CPU, "memory": WORKER_MEMORY},
        limits={rdma.resource: str(rdma.count)},
    )


def _pod_basics(args: MpiBandwidthJobArgs) -> dict[str, Any]:
    return dict(
        restart_policy="Never",
        active_deadline_seconds=args.timeout_minutes * 60,
        termination_grace_period_seconds=5,
        host_network=False,  # RDMA reaches the pod through the device plugin, not the host's stack
        enable_service_links=False,
        automount_service_account_token=False,
        **pool_placement(),
    )


def worker_pod(args: MpiBandwidthJobArgs, config_hash: str) -> core.PodTemplateSpecArgs:
    worker_labels = labels(args, "worker")  # type: ignore[arg-type]  (uses job_name only)
    return core.PodTemplateSpecArgs(
        metadata=meta.ObjectMetaArgs(labels=worker_labels, annotations={CONFIG_HASH_ANNOTATION: config_hash}),
        spec=core.PodSpecArgs(
            **_pod_basics(args),
            affinity=core.AffinityArgs(
                pod_anti_affinity=core.PodAntiAffinityArgs(
                    # one worker per node: otherwise the two ranks would talk over shared memory
                    required_during_scheduling_ignored_during_execution=[
                        core.PodAffinityTermArgs(
                            label_selector=meta.LabelSelectorArgs(match_labels=worker_labels),
                            topology_key="kubernetes.io/hostname",
                        )
                    ]
                )
            ),
            containers=[
                core.ContainerArgs(
                    name=WORKER_TASK,
                    image=args.image,
                    command=["/bin/bash", "-c",
                             "ssh-keygen -A >/dev/null; mkdir -p /run/sshd; exec /usr/sbin/sshd -D -e"],
                    ports=[core.ContainerPortArgs(name="ssh", container_port=SSH_PORT)],
                    resources=worker_resources(args),
                    security_context=core.SecurityContextArgs(
                        privileged=False,
                        # RDMA registers (pins) host memory: IPC_LOCK, nothing more.
                        capabilities=core.CapabilitiesArgs(add=["IPC_LOCK"]),
                    ),
                    volume_mounts=[core.VolumeMountArgs(name="dshm", mount_path="/dev/shm")],
                )
            ],
            volumes=[core.VolumeArgs(name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory"))],
        ),
    )


def master_pod(args: MpiBandwidthJobArgs, launcher_configmap: str, config_hash: str) -> core.PodTemplateSpecArgs:
    env = {
        "OSU_DIR": OSU_DIR,
        "OSU_BW_ARGS": args.osu_bw_args,
        "OSU_LATENCY_ARGS": args.osu_latency_args,
        "MPI_HOME": MPI_HOME,
        "SSH_WAIT_SECONDS": str(SSH_WAIT_SECONDS),
        **UCX_ENV,
    }
    return core.PodTemplateSpecArgs(
        metadata=meta.ObjectMetaArgs(labels=labels(args, "launcher"),  # type: ignore[arg-type]
                                     annotations={CONFIG_HASH_ANNOTATION: config_hash}),
        spec=core.PodSpecArgs(
            **_pod_basics(args),
            containers=[
                core.ContainerArgs(
                    name=MASTER_TASK,
                    image=args.image,
                    command=["/bin/bash", f"{LAUNCHER_DIR}/launcher.sh"],
                    env=[core.EnvVarArgs(name=k, value=v) for k, v in env.items()],
                    resources=core.ResourceRequirementsArgs(requests={"cpu": "1", "memory": "1Gi"}),
                    security_context=core.SecurityContextArgs(privileged=False),
                    volume_mounts=[core.VolumeMountArgs(name="launcher", mount_path=LAUNCHER_DIR, read_only=True)],
                )
            ],
            volumes=[
                core.VolumeArgs(
                    name="launcher",
                    config_map=core.ConfigMapVolumeSourceArgs(name=launcher_configmap, default_mode=0o555),
                )
            ],
        ),
    )


def job_spec(args: MpiBandwidthJobArgs, launcher_configmap: str, config_hash: str) -> dict[str, Any]:
    """The Volcano Job's spec as plain data (batch.volcano.sh/v1alpha1)."""
    return plain({
        "schedulerName": "volcano",
        "queue": "default",
        "minAvailable": WORKERS + 1,  # gang: the launcher and both workers, or nothing
        "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
        "plugins": {"ssh": [], "svc": []},
        "policies": [
            {"event": "PodFailed", "action": "TerminateJob"},
            {"event": "PodEvicted", "action": "TerminateJob"},
        ],
        "tasks": [
            {
                "name": MASTER_TASK,
                "replicas": 1,
                "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                "template": master_pod(args, launcher_configmap, config_hash),
            },
            {"name": WORKER_TASK, "replicas": WORKERS, "template": worker_pod(args, config_hash)},
        ],
    })


class MpiBandwidthJob(pulumi.ComponentResource):
    """The CPU-only fabric test: a namespace, the launcher ConfigMap, the Volcano Job.

    Same contract as `NcclJob` (namespace `fabric-test` with Pod Security `privileged` enforced for
    IPC_LOCK, warn/audit `baseline`; the Job replaced, delete first, whenever its spec changes;
    `spec_sha256` changes exactly when the run would differ), so the collect step treats both alike.
    """

    namespace: Namespace
    launcher: k8s.core.v1.ConfigMap
    job: k8s.apiextensions.CustomResource
    job_name: str
    namespace_name: str
    spec: dict[str, Any]
    spec_sha256: str

    def __init__(self, name: str, args: MpiBandwidthJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:MpiBandwidthJob", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.job_name, self.namespace_name = args.job_name, args.namespace_name
        self.namespace = Namespace(
            f"{name}-namespace",
            NamespaceArgs(
                namespace_name=args.namespace_name,
                pod_security="privileged",
                labels={"pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/audit": "baseline"},
            ),
            opts=child,
        )
        launcher_data = {"launcher.sh": LAUNCHER_SCRIPT.read_text()}
        launcher_cm = f"{args.job_name}-launcher"
        config_hash = spec_hash({"launcher": launcher_data})
        self.launcher = core.ConfigMap(
            f"{name}-launcher",
            core.ConfigMapInitArgs(
                metadata=meta.ObjectMetaArgs(name=launcher_cm, namespace=self.namespace.name),
                data=launcher_data,
            ),
            opts=child,
        )
        self.spec = job_spec(args, launcher_cm, config_hash)
        self.spec_sha256 = spec_hash({"namespace": args.namespace_name, "name": args.job_name, "spec": self.spec})
        self.job = k8s.apiextensions.CustomResource(
            f"{name}-job",
            api_version="batch.volcano.sh/v1alpha1",
            kind="Job",
            metadata=meta.ObjectMetaArgs(
                name=args.job_name, namespace=self.namespace.name,
                labels=labels(args, "job"),  # type: ignore[arg-type]
            ),
            spec=self.spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*args.wait_for, self.launcher],
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        self.register_outputs({"job_name": args.job_name, "namespace": self.namespace.name,
                               "spec_sha256": self.spec_sha256})
