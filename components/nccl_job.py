"""Row 8: the NCCL all-reduce across the InfiniBand pool, as a gang-scheduled Volcano Job.

One `mpimaster` pod runs `scripts/nccl-launcher.sh` (mpirun over `all_reduce_perf`); one
`mpiworker` pod per node runs sshd and holds all of its node's GPUs and RDMA devices. Volcano's
`ssh` plugin gives the pods a shared key, its `svc` plugin a headless service and the hostfile
`/etc/volcano/mpiworker.host`.

The pod templates are built with the typed `pulumi_kubernetes.core.v1` Args classes (a misspelt
field fails at construction) and turned into plain dicts by `plain()`: the Volcano Job has no typed
class, its spec must be hashed deterministically for the collect step's trigger, and the tests check
the same dict against the Job CRD's schema.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi import _types as pulumi_types

import fabric
from catalog import Sku
from components.namespace import Namespace, NamespaceArgs
from components.nccl_topology import render_xml

core = k8s.core.v1
meta = k8s.meta.v1

LAUNCHER_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "nccl-launcher.sh"
LAUNCHER_DIR = "/opt/aks-infiniband"
TOPOLOGY_DIR = "/opt/nccl-topology"
TOPOLOGY_KEY = "topo.xml"
ALL_REDUCE_BIN = "/opt/nccl_tests/build/all_reduce_perf"  # path in the nccl-tests image
MPI_HOME = "/opt/hpcx/ompi"  # HPC-X OpenMPI in the nccl-tests image
SSH_PORT = 22  # the ssh plugin's default port, which its generated ssh config uses
# Finished jobs stay a day, so the launcher's log can still be read (by the collect step, and by a
# human the morning after); the pods of a finished job hold no GPUs.
TTL_SECONDS_AFTER_FINISHED = 24 * 3600
# The launcher's bounded wait for every worker's sshd (pods start together; images are large).
SSH_WAIT_SECONDS = 900
# Host keys if the image has none, then sshd in the foreground, logging to stderr.
WORKER_COMMAND = "ssh-keygen -A >/dev/null; mkdir -p /run/sshd; exec /usr/sbin/sshd -D -e"
CONFIG_HASH_ANNOTATION = "aks-infiniband.io/config-sha256"
ROLE_LABEL = "aks-infiniband.io/fabric-test-role"
MASTER_TASK, WORKER_TASK = "mpimaster", "mpiworker"
# Per rank (one per GPU): a CPU core and host memory for its buffers and the NCCL proxy thread.
CPU_PER_RANK, MEMORY_GI_PER_RANK = 1, 8


def nccl_env(topology: bool) -> dict[str, str]:
    """The NCCL/UCX environment of the ranks (set on the launcher, forwarded by mpirun with -x)."""
    env = {
        # Use the InfiniBand transport (NCCL falls back to TCP sockets only when it finds no HCA).
        "NCCL_IB_DISABLE": "0",
        # GPUDirect RDMA at any PCI distance: the VM's virtual PCI tree puts every GPU and HCA on
        # its own domain, so NCCL would otherwise stage through host memory (Azure's test sets SYS).
        "NCCL_NET_GDR_LEVEL": "SYS",
        # Azure's HCAs are virtual functions; relaxed PCIe ordering is needed for full bandwidth
        # (azhpc-images' /etc/nccl.conf sets it on ND v4/v5).
        "NCCL_IB_PCI_RELAXED_ORDERING": "1",
        # NCCL's bootstrap and its out-of-band socket traffic on the pod network.
        "NCCL_SOCKET_IFNAME": "eth0",
        # NCCL's built-in IB transport, not the SHARP plugin that HPC-X puts on LD_LIBRARY_PATH
        # (Azure's fabric has no SHARP; the plugin would also change what is measured).
        "NCCL_NET_PLUGIN": "none",
        # The version line and which transport each rank chose (NET/IB vs NET/Socket) in the log;
        # the parser skips these lines.
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        # GPU numbering by PCI bus id, the order the topology file lists them in.
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        # MPI's own traffic (UCX, the HPC-X default PML) over TCP on eth0: it only launches the
        # ranks and exchanges NCCL's unique id; InfiniBand is left to NCCL.
        "UCX_TLS": "tcp",
        "UCX_NET_DEVICES": "eth0",
    }
    if topology:
        # The SKU's topology file (see components/nccl_topology.py): which HCA sits next to
        # which GPU, hidden from NCCL by virtualisation.
        env["NCCL_TOPO_FILE"] = f"{TOPOLOGY_DIR}/{TOPOLOGY_KEY}"
    return env


@dataclass(frozen=True)
class NcclJobArgs:
    sku: Sku
    node_count: int
    rdma_mode: str  # fabric.RDMA_MODES
    image: str
    all_reduce_args: str
    timeout_minutes: int  # the pods' activeDeadlineSeconds
    # What the job must wait for: the IB pool, the NicClusterPolicy, the GPU Operator, Volcano.
    # Passed to the Job itself (a component's depends_on is not inherited by its children).
    wait_for: Sequence[pulumi.Resource] = ()
    namespace_name: str = "fabric-test"
    job_name: str = "nccl-allreduce"

    def __post_init__(self) -> None:
        if not self.sku.has_gpus:
            raise ValueError(
                f"sku: {self.sku.vm_size} has no GPUs; the NCCL all-reduce needs GPU sizes "
                f"(CPU-only sizes get a separate fabric test)"
            )
        if self.node_count < 1:
            raise ValueError(f"node_count: got {self.node_count}; expected 1 or more")
        fabric.rdma_request(self.rdma_mode, self.sku)  # raises with the allowed modes
        # The svc plugin names pods <job>-<task>-<index> and uses them as DNS labels (<= 63).
        longest = f"{self.job_name}-{WORKER_TASK}-{self.node_count - 1}"
        if len(longest) > 63:
            raise ValueError(f"job_name: {self.job_name!r} makes pod host names longer than 63 characters")


def plain(value: Any) -> Any:
    """Typed pulumi input classes -> plain dicts with the API's (camelCase) field names."""
    if pulumi_types.is_input_type(type(value)):
        return {k: plain(v) for k, v in pulumi_types.input_type_to_dict(value).items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def spec_hash(value: Any) -> str:
    """A stable digest of plain data (sorted keys, no whitespace): same input, same hash, any run."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def pool_placement() -> dict[str, Any]:
    """On the IB pool: its node selector and the toleration of its taint (fabric.py)."""
    return {
        "node_selector": fabric.pool_node_selector(),
        "tolerations": [core.TolerationArgs(**fabric.toleration())],
    }


def labels(args: NcclJobArgs, role: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": args.job_name, "app.kubernetes.io/part-of": "aks-infiniband", ROLE_LABEL: role}


def worker_resources(args: NcclJobArgs) -> core.ResourceRequirementsArgs:
    """Every GPU of the node and the RDMA resource of the configured mode (fabric.py)."""
    rdma = fabric.rdma_request(args.rdma_mode, args.sku)
    gpus = args.sku.gpus_per_vm
    extended = {fabric.GPU_RESOURCE: str(gpus), rdma.resource: str(rdma.count)}
    return core.ResourceRequirementsArgs(
        requests={**extended, "cpu": str(CPU_PER_RANK * gpus), "memory": f"{MEMORY_GI_PER_RANK * gpus}Gi"},
        limits=extended,
    )


def worker_pod(args: NcclJobArgs, topology_configmap: str, config_hash: str) -> core.PodTemplateSpecArgs:
    worker_labels = labels(args, "worker")
    mounts = [core.VolumeMountArgs(name="dshm", mount_path="/dev/shm")]
    volumes = [
        # NCCL's intra-node buffers and the ranks' shared memory; the container default is 64 MiB.
        core.VolumeArgs(name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory")),
    ]
    if args.sku.nccl_topology:
        mounts.append(core.VolumeMountArgs(name="nccl-topology", mount_path=TOPOLOGY_DIR, read_only=True))
        volumes.append(core.VolumeArgs(
            name="nccl-topology",
            config_map=core.ConfigMapVolumeSourceArgs(
                name=topology_configmap, items=[core.KeyToPathArgs(key=TOPOLOGY_KEY, path=TOPOLOGY_KEY)]
            ),
        ))
    return core.PodTemplateSpecArgs(
        metadata=meta.ObjectMetaArgs(labels=worker_labels, annotations={CONFIG_HASH_ANNOTATION: config_hash}),
        spec=core.PodSpecArgs(
            restart_policy="Never",  # a failed worker fails the job (policy below), no silent retry
            active_deadline_seconds=args.timeout_minutes * 60,
            termination_grace_period_seconds=5,
            host_network=False,  # RDMA reaches the pod through the device plugin, not the host's stack
            enable_service_links=False,
            automount_service_account_token=False,
            **pool_placement(),
            affinity=core.AffinityArgs(
                pod_anti_affinity=core.PodAntiAffinityArgs(
                    # one worker per node: each must own its node's GPUs and HCAs
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
                    command=["/bin/bash", "-c", WORKER_COMMAND],
                    ports=[core.ContainerPortArgs(name="ssh", container_port=SSH_PORT)],
                    resources=worker_resources(args),
                    security_context=core.SecurityContextArgs(
                        privileged=False,
                        # RDMA registers (pins) GPU and host memory: needs IPC_LOCK, nothing more.
                        capabilities=core.CapabilitiesArgs(add=["IPC_LOCK"]),
                    ),
                    volume_mounts=mounts,
                )
            ],
            volumes=volumes,
        ),
    )


def master_pod(args: NcclJobArgs, launcher_configmap: str, config_hash: str) -> core.PodTemplateSpecArgs:
    sku = args.sku
    env = {
        "NODES": str(args.node_count),
        "GPUS_PER_NODE": str(sku.gpus_per_vm),
        "ALL_REDUCE_ARGS": args.all_reduce_args,
        "ALL_REDUCE_BIN": ALL_REDUCE_BIN,
        "MPI_HOME": MPI_HOME,
        "SSH_WAIT_SECONDS": str(SSH_WAIT_SECONDS),
        **nccl_env(topology=bool(sku.nccl_topology)),
    }
    return core.PodTemplateSpecArgs(
        metadata=meta.ObjectMetaArgs(
            labels=labels(args, "launcher"), annotations={CONFIG_HASH_ANNOTATION: config_hash}
        ),
        spec=core.PodSpecArgs(
            restart_policy="Never",  # the launcher's exit status is the test's result
            active_deadline_seconds=args.timeout_minutes * 60,
            termination_grace_period_seconds=5,
            host_network=False,
            enable_service_links=False,
            automount_service_account_token=False,
            # On the IB pool too: the image is pulled there for the workers anyway; it uses no GPU.
            **pool_placement(),
            containers=[
                core.ContainerArgs(
                    name=MASTER_TASK,
                    image=args.image,
                    command=["/bin/bash", f"{LAUNCHER_DIR}/launcher.sh"],
                    env=[core.EnvVarArgs(name=k, value=v) for k, v in env.items()],
                    resources=core.ResourceRequirementsArgs(requests={"cpu": "1", "memory": "2Gi"}),
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


def job_spec(args: NcclJobArgs, launcher_configmap: str, topology_configmap: str, config_hash: str) -> dict[str, Any]:
    """The Volcano Job's spec as plain data (batch.volcano.sh/v1alpha1)."""
    workers = args.node_count
    return plain({
        "schedulerName": "volcano",
        "queue": "default",
        # gang: nothing starts until the launcher and every worker can be placed at once
        "minAvailable": workers + 1,
        "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
        "plugins": {"ssh": [], "svc": []},
        # any pod that fails (its deadline included) or is evicted ends the job as Terminated
        "policies": [
            {"event": "PodFailed", "action": "TerminateJob"},
            {"event": "PodEvicted", "action": "TerminateJob"},
        ],
        "tasks": [
            {
                "name": MASTER_TASK,
                "replicas": 1,
                # the launcher's success completes the job (and stops the workers' sshd)
                "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                "template": master_pod(args, launcher_configmap, config_hash),
            },
            {
                "name": WORKER_TASK,
                "replicas": workers,
                "template": worker_pod(args, topology_configmap, config_hash),
            },
        ],
    })


class NcclJob(pulumi.ComponentResource):
    """The fabric test: a namespace, the launcher and topology ConfigMaps, the Volcano Job.

    - namespace `fabric-test`, Pod Security `privileged` enforced because the workers add
      IPC_LOCK, which is beyond `baseline`; warn and audit stay at `baseline` so anything else
      that needs more shows up;
    - the Job is replaced (delete first: it has a fixed name) whenever its spec changes, since
      Volcano forbids most spec updates and a finished job never runs again;
    - `spec_sha256` changes exactly when the run would differ (spec, launcher, topology).
    """

    namespace: Namespace
    topology: k8s.core.v1.ConfigMap | None
    launcher: k8s.core.v1.ConfigMap
    job: k8s.apiextensions.CustomResource
    job_name: str
    namespace_name: str
    spec: dict[str, Any]
    spec_sha256: str

    def __init__(self, name: str, args: NcclJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:NcclJob", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.job_name, self.namespace_name = args.job_name, args.namespace_name
        self.namespace = Namespace(
            f"{name}-namespace",
            NamespaceArgs(
                namespace_name=args.namespace_name,
                # IPC_LOCK exceeds `baseline`, so enforce must be `privileged`; warn/audit keep baseline.
                pod_security="privileged",
                labels={"pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/audit": "baseline"},
            ),
            opts=child,
        )
        launcher_data = {"launcher.sh": LAUNCHER_SCRIPT.read_text()}
        topology_data = {TOPOLOGY_KEY: render_xml(args.sku.nccl_topology)} if args.sku.nccl_topology else None
        launcher_cm, topology_cm = f"{args.job_name}-launcher", f"{args.job_name}-topology"
        config_hash = spec_hash({"launcher": launcher_data, "topology": topology_data})

        self.launcher = core.ConfigMap(
            f"{name}-launcher",
            core.ConfigMapInitArgs(
                metadata=meta.ObjectMetaArgs(name=launcher_cm, namespace=self.namespace.name),
                data=launcher_data,
            ),
            opts=child,
        )
        self.topology = (
            core.ConfigMap(
                f"{name}-topology",
                core.ConfigMapInitArgs(
                    metadata=meta.ObjectMetaArgs(name=topology_cm, namespace=self.namespace.name),
                    data=topology_data,
                ),
                opts=child,
            )
            if topology_data
            else None
        )
        self.spec = job_spec(args, launcher_cm, topology_cm, config_hash)
        self.spec_sha256 = spec_hash(
            {"namespace": args.namespace_name, "name": args.job_name, "spec": self.spec}
        )
        self.job = k8s.apiextensions.CustomResource(
            f"{name}-job",
            api_version="batch.volcano.sh/v1alpha1",
            kind="Job",
            metadata=meta.ObjectMetaArgs(
                name=args.job_name, namespace=self.namespace.name, labels=labels(args, "job")
            ),
            spec=self.spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*args.wait_for, self.launcher, *([self.topology] if self.topology else [])],
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        self.register_outputs({"job_name": args.job_name, "namespace": self.namespace.name,
                               "spec_sha256": self.spec_sha256})
