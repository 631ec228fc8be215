"""What both fabric tests share: a gang-scheduled Volcano MPI job on the InfiniBand pool.

One `mpimaster` pod runs a launcher script (mounted from a ConfigMap); `mpiworker` pods, one per
node, run sshd and hold their node's RDMA devices (and GPUs, for the NCCL test). Volcano's `ssh`
plugin gives the pods a shared key, its `svc` plugin a headless service and the hostfile
`/etc/volcano/mpiworker.host`. `NcclJob` (GPU sizes) and `P2pJob` (CPU-only sizes)
differ only in their launcher, its environment, the workers' resources and extra mounts.

The pod templates are built with the typed `pulumi_kubernetes.core.v1` Args classes (a misspelt
field fails at construction) and turned into plain dicts by `plain()`: the Volcano Job has no typed
class, its spec must be hashed deterministically for the collect step's trigger, and the tests
check the same dict against the Job CRD's schema. `plain()` uses no Pulumi internals;
tests/test_pulumi_adapter.py checks it against the SDK's own translation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace, NamespaceArgs
from components.platform import volcano_topology
from core import fabric

core = k8s.core.v1
meta = k8s.meta.v1

NAMESPACE = "fabric-test"
# The Volcano Job's API and the queue it runs in (Volcano makes `default` itself): what stack/preinstalled.py
# checks of a Volcano that another owner runs.
JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"  # the launchers (core/kinds.py Kind.launcher)
LAUNCHER_DIR = "/opt/aks-infiniband"
MPI_HOME = "/opt/hpcx/ompi"  # HPC-X Open MPI in the default (nccl-tests) image
SSH_PORT = 22  # the ssh plugin's default port, which its generated ssh config uses
# Finished jobs stay a day, so the launcher's log can still be read (by the collect step, and by a
# human the morning after); the pods of a finished job hold no GPUs or HCAs.
TTL_SECONDS_AFTER_FINISHED = 24 * 3600
# The launcher's bounded wait for every worker's sshd (pods start together; images are large), and its
# pause between attempts.
SSH_WAIT_SECONDS = 900
SSH_POLL_SECONDS = 5
HOSTFILE = "/etc/volcano/mpiworker.host"  # Volcano's svc plugin writes it: one worker host a line
POD_IFNAME = "eth0"  # the pod network's interface: mpirun's own channel (NCCL's and UCX's settings name it too)
# Host keys if the image has none, then sshd in the foreground, logging to stderr.
WORKER_COMMAND = "ssh-keygen -A >/dev/null; mkdir -p /run/sshd; exec /usr/sbin/sshd -D -e"
CONFIG_HASH_ANNOTATION = "aks-infiniband.io/config-sha256"
# The operator charts and drivers the test runs against ("name=version,..."), on every pod: a change
# of any changes the Job's spec, so the Job is replaced and the test runs again (a DOCA or GPU driver
# change can silently drop GPUDirect RDMA; docs/upgrade-runbook.md).
DRIVER_VERSIONS_ANNOTATION = "aks-infiniband.io/driver-versions"
# The ranks run as root (the nccl-tests image's sshd, and mpirun --allow-run-as-root). With CAP_IPC_LOCK
# (container_security) root may pin memory past RLIMIT_MEMLOCK, which RDMA memory registration counts
# against: the kernel skips the limit for a capable process (ib_umem_get), so no host memlock change
# is needed. Ranks that are not root would lose the capability at exec and need
# LimitMEMLOCK=infinity on containerd (as NVIDIA's AKS recipe sets); tested.
RANK_USER_ID = 0
ROLE_LABEL = "aks-infiniband.io/fabric-test-role"
MASTER_TASK, WORKER_TASK = "mpimaster", "mpiworker"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def plain(value: Any) -> Any:
    """Typed Args classes -> plain dicts with the API's (camelCase) field names.

    An Args object's fields are its instance attributes, by Python name, unset ones absent (the SDK's
    own `Output.from_input` decomposes input types the same way); the API's name is the camelCase of
    the Python name. That holds for every field used here, which a test checks against the SDK's
    translation; a Kubernetes field whose name is not plain camelCase (hostIPC) would fail it."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return {_camel(k): plain(v) for k, v in vars(value).items() if v is not None}


def spec_hash(value: Any) -> str:
    """A stable digest of plain data (sorted keys, no whitespace): same input, same hash, any run."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# A Job whose spec cannot be updated (Volcano's webhook allows only minAvailable and replicas; a batch Job's pod
# template is immutable) is named after its spec: a changed spec is a new Job. Under one fixed name the provider
# previews the replacement as a dry-run apply onto the old Job. It retries under another name only where the API
# server says "field is immutable" (provider/pkg/await/await.go, Creation); Volcano's webhook denies with a 400,
# so `pulumi preview` of a changed Volcano Job failed.
NAME_HASH_CHARS = 10


def hashed_name(base: str, value: Any) -> str:
    """`base` and the first NAME_HASH_CHARS of `value`'s spec_hash: one name per spec."""
    return f"{base}-{spec_hash(value)[:NAME_HASH_CHARS]}"


def labels(job_name: str, role: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": job_name, "app.kubernetes.io/part-of": "aks-infiniband", ROLE_LABEL: role}


def launcher_env() -> dict[str, str]:
    """What both launchers (scripts/*-launcher.sh) read about the job's shape: set here, no defaults there."""
    return {"HOSTFILE": HOSTFILE, "MPI_HOME": MPI_HOME, "SSH_WAIT_SECONDS": str(SSH_WAIT_SECONDS),
            "SSH_POLL_SECONDS": str(SSH_POLL_SECONDS), "POD_IFNAME": POD_IFNAME}


def check_host_names(job_name: str, workers: int) -> None:
    """The svc plugin names pods <job>-<task>-<index> and uses them as DNS labels (<= 63); the Job's name is
    `job_name` and its hash (hashed_name)."""
    if len(f"{job_name}-{'0' * NAME_HASH_CHARS}-{WORKER_TASK}-{workers - 1}") > 63:
        raise ValueError(f"job_name: {job_name!r} makes pod host names longer than 63 characters")


def container_security(ipc_lock: bool) -> core.SecurityContextArgs:
    """Unprivileged, no privilege escalation, NET_RAW dropped (nothing here uses raw sockets).
    `ipc_lock`: RDMA registers (pins) GPU and host memory, which needs IPC_LOCK and nothing more."""
    return core.SecurityContextArgs(
        privileged=False,
        allow_privilege_escalation=False,
        capabilities=core.CapabilitiesArgs(add=["IPC_LOCK"] if ipc_lock else None, drop=["NET_RAW"]),
    )


def pod_spec(timeout_minutes: int, containers: list[core.ContainerArgs], volumes: list[core.VolumeArgs],
             affinity: core.AffinityArgs | None = None,
             init_containers: list[core.ContainerArgs] | None = None,
             resource_claims: Sequence[core.PodResourceClaimArgs] = (),
             agent_pool: str | None = None) -> core.PodSpecArgs:
    """What every pod of a fabric test has: on the IB pool (with `agent_pool`, that one of several), bounded,
    no host network, no API token. The deadline covers the pod's initContainers too."""
    return core.PodSpecArgs(
        restart_policy="Never",  # a failed pod fails the job (policies below); no silent retry
        active_deadline_seconds=timeout_minutes * 60,
        termination_grace_period_seconds=5,
        # No host network (RDMA reaches the pod through the device plugin, not the host's stack): the default,
        # not written. Volcano's mutating webhook re-writes /spec/tasks from its Go types, whose omitempty drops
        # a false or "" field; one written here would be a diff in every later preview (a replace of the Job).
        enable_service_links=False,
        automount_service_account_token=False,
        # the container runtime's default seccomp filter; verbs and CUDA need only ordinary syscalls
        security_context=core.PodSecurityContextArgs(
            run_as_user=RANK_USER_ID, seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault")
        ),
        node_selector=fabric.pool_node_selector(agent_pool),
        tolerations=[core.TolerationArgs(**t) for t in fabric.fabric_tolerations()],
        affinity=affinity,
        init_containers=init_containers or None,
        containers=containers,
        volumes=volumes,
        resource_claims=list(resource_claims) or None,  # DRA claims (components/fabric/fabric_claims.py)
    )


def worker_template(
    job_name: str,
    image: str,
    resources: core.ResourceRequirementsArgs,
    timeout_minutes: int,
    config_hash: str,
    extra_mounts: Sequence[core.VolumeMountArgs] = (),
    extra_volumes: Sequence[core.VolumeArgs] = (),
    init_containers: Sequence[core.ContainerArgs] = (),
    resource_claims: Sequence[core.PodResourceClaimArgs] = (),
    same_node_labels: Sequence[str] = (),
    agent_pool: str | None = None,
) -> core.PodTemplateSpecArgs:
    """An sshd worker with `resources`, /dev/shm in memory, one per node; `init_containers` run
    to completion before sshd starts (within the pod's deadline). `resource_claims`: the pod's DRA
    claims (`resources.claims` names those the container uses). `same_node_labels`: every worker on
    nodes that share each label's value (one placement group; the NVL72 rack of the rack run)."""
    worker_labels = labels(job_name, "worker")
    together = core.PodAffinityArgs(required_during_scheduling_ignored_during_execution=[
        core.PodAffinityTermArgs(label_selector=meta.LabelSelectorArgs(match_labels=worker_labels), topology_key=key)
        for key in same_node_labels]) if same_node_labels else None
    return core.PodTemplateSpecArgs(
        metadata=meta.ObjectMetaArgs(labels=worker_labels, annotations={CONFIG_HASH_ANNOTATION: config_hash}),
        spec=pod_spec(
            timeout_minutes,
            affinity=core.AffinityArgs(
                pod_anti_affinity=core.PodAntiAffinityArgs(
                    # one worker per node: each owns its node's HCAs (and GPUs); two ranks on one
                    # node would talk over shared memory instead of the fabric
                    required_during_scheduling_ignored_during_execution=[
                        core.PodAffinityTermArgs(
                            label_selector=meta.LabelSelectorArgs(match_labels=worker_labels),
                            topology_key="kubernetes.io/hostname",
                        )
                    ]
                ),
                pod_affinity=together,
            ),
            init_containers=list(init_containers),
            resource_claims=resource_claims,
            agent_pool=agent_pool,
            containers=[
                core.ContainerArgs(
                    name=WORKER_TASK,
                    image=image,
                    command=["/bin/bash", "-c", WORKER_COMMAND],
                    ports=[core.ContainerPortArgs(name="ssh", container_port=SSH_PORT)],
                    resources=resources,
                    security_context=container_security(ipc_lock=True),
                    volume_mounts=[core.VolumeMountArgs(name="dshm", mount_path="/dev/shm"), *extra_mounts],
                )
            ],
            volumes=[
                # the ranks' shared memory (NCCL's intra-node buffers); the container default is 64 MiB
                core.VolumeArgs(name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory")),
                *extra_volumes,
            ],
        ),
    )


def launcher_template(
    job_name: str,
    image: str,
    env: Mapping[str, str],
    resources: core.ResourceRequirementsArgs,
    timeout_minutes: int,
    config_hash: str,
    launcher_configmap: str,
    agent_pool: str | None = None,
) -> core.PodTemplateSpecArgs:
    """The mpimaster: runs the launcher script with `env`; its exit status is the test's result.
    On the IB pool too: the image is pulled there for the workers anyway; it uses no GPU or HCA."""
    return core.PodTemplateSpecArgs(
        metadata=meta.ObjectMetaArgs(
            labels=labels(job_name, "launcher"), annotations={CONFIG_HASH_ANNOTATION: config_hash}
        ),
        spec=pod_spec(
            timeout_minutes,
            agent_pool=agent_pool,
            containers=[
                core.ContainerArgs(
                    name=MASTER_TASK,
                    image=image,
                    command=["/bin/bash", f"{LAUNCHER_DIR}/launcher.sh"],
                    # an empty value is no value: written as such, or Volcano's webhook drops it (above)
                    env=[core.EnvVarArgs(name=k, value=v or None) for k, v in env.items()],
                    resources=resources,
                    security_context=container_security(ipc_lock=False),
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


def versions_text(versions: Mapping[str, str]) -> str:
    """`name=version` pairs, sorted, comma-separated: the DRIVER_VERSIONS_ANNOTATION value."""
    return ",".join(f"{name}={versions[name]}" for name in sorted(versions))


def job_spec(workers: int, launcher: core.PodTemplateSpecArgs, worker: core.PodTemplateSpecArgs,
             agent_pool: str | None = None) -> dict[str, Any]:
    """The Volcano Job's spec as plain data (batch.volcano.sh/v1alpha1); with `agent_pool` (one of several
    pools), in that pool's queue (core/fabric.py pool_queue)."""
    return plain({
        "schedulerName": "volcano",
        "queue": fabric.pool_queue(agent_pool),
        # gang: nothing starts until the launcher and every worker can be placed at once
        "minAvailable": workers + 1,
        "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
        "plugins": {"ssh": [], "svc": []},
        # prefer one torset (soft: components/platform/volcano_topology.py says why)
        "networkTopology": volcano_topology.job_network_topology(),
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
                "template": launcher,
            },
            {"name": WORKER_TASK, "replicas": workers, "template": worker},
        ],
    })


# build_spec(launcher ConfigMap name, {suffix: ConfigMap name}, config hash) -> the Job's spec
SpecBuilder = Callable[[str, dict[str, str], str], dict[str, Any]]


@dataclass
class MpiJobResources:
    namespace: Namespace
    launcher: k8s.core.v1.ConfigMap
    configmaps: dict[str, k8s.core.v1.ConfigMap]
    job: k8s.apiextensions.CustomResource
    name: str  # the Job's: job_name and its spec's hash
    spec: dict[str, Any]
    spec_sha256: str  # changes exactly when the run would differ (spec, launcher, mounted data)


def declare_mpi_job(
    name: str,
    parent: pulumi.Resource,
    *,
    job_name: str,
    namespace_name: str,
    launcher_script: Path,
    build_spec: SpecBuilder,
    wait_for: Sequence[pulumi.Resource],
    configmaps: Mapping[str, Mapping[str, str] | None] | None = None,
    driver_versions: Mapping[str, str] | None = None,
    namespaced: Callable[[pulumi.Output[str]], Sequence[pulumi.Resource]] | None = None,
) -> MpiJobResources:
    """Declare `{name}-namespace`, `{name}-launcher`, `{name}-<suffix>` for each extra ConfigMap and
    `{name}-job` (the Volcano Job `<job_name>-<its spec's hash>`: hashed_name), as children of `parent`.

    - every pod carries `driver_versions` (DRIVER_VERSIONS_ANNOTATION), so the Job is replaced and
      the test re-runs whenever an operator chart or driver it depends on changes;

    - the namespace enforces `privileged` because the workers add IPC_LOCK, which is beyond
      `baseline`; warn and audit stay at `baseline`, so anything else that needs more shows up;
    - `namespaced(namespace name)` declares what else lives in the namespace (DRA claim templates),
      which the Job waits for too;
    - the Job waits for `wait_for` itself (a component's depends_on is not inherited by children);
    - the Job is replaced whenever its spec changes, since Volcano forbids most spec updates and a finished
      job never runs again: under a new name (hashed_name), the old one deleted first, since its pods hold
      the nodes' GPUs and HCAs that the new job's gang needs all at once.
    """
    child = pulumi.ResourceOptions(parent=parent)
    namespace = Namespace(
        f"{name}-namespace",
        NamespaceArgs(namespace_name=namespace_name, pod_security="privileged", warn="baseline", audit="baseline"),
        opts=child,
    )
    mounted = {"launcher": {"launcher.sh": launcher_script.read_text()}, **(configmaps or {})}
    names = {suffix: f"{job_name}-{suffix}" for suffix in mounted}
    config_hash = spec_hash(mounted)
    declared = {
        suffix: core.ConfigMap(
            f"{name}-{suffix}",
            core.ConfigMapInitArgs(
                metadata=meta.ObjectMetaArgs(name=names[suffix], namespace=namespace.name), data=dict(data)
            ),
            opts=child,
        )
        for suffix, data in mounted.items()
        if data
    }
    launcher = declared.pop("launcher")
    spec = build_spec(names["launcher"], names, config_hash)
    if driver_versions:
        for task in spec["tasks"]:
            task["template"]["metadata"]["annotations"][DRIVER_VERSIONS_ANNOTATION] = versions_text(driver_versions)
    job_object = hashed_name(job_name, {"namespace": namespace_name, "spec": spec})
    job = k8s.apiextensions.CustomResource(
        f"{name}-job",
        api_version=JOB_API_VERSION,
        kind="Job",
        metadata=meta.ObjectMetaArgs(name=job_object, namespace=namespace.name, labels=labels(job_name, "job")),
        spec=spec,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[*wait_for, launcher, *declared.values(), *(namespaced(namespace.name) if namespaced else ())],
            replace_on_changes=["spec"],
            delete_before_replace=True,
        ),
    )
    return MpiJobResources(
        namespace=namespace,
        launcher=launcher,
        configmaps=declared,
        job=job,
        name=job_object,
        spec=spec,
        spec_sha256=spec_hash({"namespace": namespace_name, "name": job_object, "spec": spec}),
    )
