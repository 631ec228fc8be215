"""The fabric's shape on every IB node: torset, partition key, physical host and placement group
labels, written as Azure's own labelers write them (labeler/topology.py says where each comes from).

One DaemonSet on the IB pool. Two init containers run labeler/topology.py (shipped in a ConfigMap, its
sha256 in the pod template, so a change rolls the pods): `sharp`, privileged and with no API token, in
Azure's node-health image, which has the SHARP tools and python3 (Azure's torset labeler runs `python3`
and `sharp_cmd` in that image), asks SHARP for the node's topology; `label`, as nobody with no
capabilities, in the pin table's multi-arch Python image, reads every fact and patches the node. The
node-health image is amd64 only, so on an arm64 size (Grace Blackwell) the `sharp` step is left out and
the node gets the fallback torset (labeler/topology.py); everything else is labelled as on amd64.
A pause container then holds the pod, so the labels are written once per node, when it joins or is
reimaged. Azure's labelers are not run as they are: a one-off Job names torsets by discovery order
(`torset-00`, …), so a node that joins later gets no torset, or a name that clashes; here each node
finds its torset's name by itself (docs/topology.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components import node_bounds
from components.namespace import Namespace, NamespaceArgs
from core import fabric, pins

core = k8s.core.v1
meta = k8s.meta.v1
rbac = k8s.rbac.v1
adm = k8s.admissionregistration.v1

NAMESPACE = "fabric-topology"
NAME = "fabric-topology-labeler"
SCRIPT = Path(__file__).resolve().parents[2] / "labeler" / "topology.py"
SCRIPT_KEY = "topology.py"
SCRIPT_MOUNT = "/opt/aks-infiniband"
HYPERV_DIR = "/var/lib/hyperv"  # Hyper-V's KVP pools (.kvp_pool_3: the host's name), read by labeler/topology.py
# Azure's node-health image with the SHARP tools and python3: the image Azure's node_labeler and
# torset_labeler charts use (Azure/ai-infrastructure-on-azure@a01b073 utilities/aks/*/helm). Both in
# the pin table (core/pins.py); Renovate (renovate.json) pins the labeler's digest.
LABELER_IMAGE = pins.component("topologyLabelerImage").version
PYTHON_IMAGE = pins.component("pythonImage").version
PAUSE_IMAGE = pins.component("pauseImage").version
SKIP_AWAIT = "pulumi.com/skipAwait"
SCRIPT_HASH_ANNOTATION = "aks-infiniband.io/topology-script-sha256"


@dataclass(frozen=True)
class TopologyLabelerArgs:
    cpu_arch: str  # the IB size's (catalog): which steps' images can run there
    image: str = LABELER_IMAGE  # the SHARP step's
    python_image: str = PYTHON_IMAGE  # the labelling step's
    namespace_name: str = NAMESPACE
    # labels every IB node gets as well, through the API (e.g. the DRA kubelet plugin's: not a pool label)
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    # the IB pool's nodes (fabric.pool_node_selector): this stack's pool label, or on a cluster that already
    # exists AKS's agentpool label, with the pool label among extra_labels so the rest of the stack finds them
    node_selector: Mapping[str, str] = field(default_factory=fabric.pool_node_selector)

    def __post_init__(self) -> None:
        for key in ("image", "python_image"):
            value = getattr(self, key)
            if not value or value != value.strip():
                raise ValueError(f"{key}: got {value!r}; expected an image reference")
        if self.cpu_arch not in pins.component("pythonImage").platforms:
            raise ValueError(f"cpu_arch: got {self.cpu_arch!r}; the labelling image {self.python_image} covers "
                             f"{'/'.join(pins.component('pythonImage').platforms)} only")

    @property
    def runs_sharp(self) -> bool:
        """Whether the SHARP step's image has this architecture (Azure's node-health image: amd64 only)."""
        return self.cpu_arch in pins.component("topologyLabelerImage").platforms


def script_text() -> str:
    return SCRIPT.read_text()


def script_sha256() -> str:
    return hashlib.sha256(script_text().encode()).hexdigest()


def environment(extra_labels: Mapping[str, str]) -> list[core.EnvVarArgs]:
    """The label names (one place: fabric.py), the extra labels, and the node's own name."""
    env = [core.EnvVarArgs(name=f"TOPOLOGY_{fact.upper()}", value=name)
           for fact, name in fabric.topology_names().items()]
    env.append(core.EnvVarArgs(name="TOPOLOGY_EXTRA_LABELS", value=json.dumps(dict(extra_labels), sort_keys=True)))
    return [*env, core.EnvVarArgs(name="NODE_NAME", value_from=core.EnvVarSourceArgs(
        field_ref=core.ObjectFieldSelectorArgs(field_path="spec.nodeName")))]


NOBODY = 65534
# checkov's findings on this DaemonSet that its privileged SHARP step causes, each accepted here, on this
# one object, with its reason (checkov reads `checkov.io/skip<N>` annotations); everything else is fixed.
PRIVILEGED_SHARP_STEP = {
    "CKV_K8S_16": "privileged: SHARP's topology query opens /dev/infiniband/umad*, which only a privileged "
                  "container may open (Azure's labelers run it privileged); this container holds no API token",
    "CKV_K8S_20": "privilege escalation: implied by privileged, the SHARP step only",
    "CKV_K8S_23": "root: the SHARP step runs sharp_cmd as root, as Azure's image expects; the labelling step is nobody",
    "CKV_K8S_40": "high UID: the SHARP step is root, as above",
    "CKV_K8S_22": "read-only root filesystem: sharp_cmd writes its logs under the image's own directories",
    "CKV_K8S_37": "capabilities: the privileged SHARP step keeps them; the other containers drop ALL",
    "CKV_K8S_28": "NET_RAW: the privileged SHARP step keeps it; the other containers drop ALL",
}


def _small(cpu: str, memory: str) -> core.ResourceRequirementsArgs:
    return core.ResourceRequirementsArgs(requests={"cpu": "10m", "memory": "32Mi"},
                                         limits={"cpu": cpu, "memory": memory})


def _unprivileged() -> core.SecurityContextArgs:
    return core.SecurityContextArgs(
        privileged=False, allow_privilege_escalation=False, read_only_root_filesystem=True, run_as_non_root=True,
        run_as_user=NOBODY, run_as_group=NOBODY, capabilities=core.CapabilitiesArgs(drop=["ALL"]),
        seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"))


def pod_spec(args: TopologyLabelerArgs, config_map_name: pulumi.Input[str],
             service_account: pulumi.Input[str]) -> core.PodSpecArgs:
    script = core.VolumeMountArgs(name="script", mount_path=SCRIPT_MOUNT, read_only=True)
    work = core.VolumeMountArgs(name="work", mount_path="/work")
    command = lambda step: ["python3", f"{SCRIPT_MOUNT}/{SCRIPT_KEY}", step]  # noqa: E731
    return core.PodSpecArgs(
        node_selector=dict(args.node_selector),
        # before the node is certified too: the certifier reads these labels to plan its runs
        tolerations=[core.TolerationArgs(**t) for t in fabric.fabric_tolerations()],
        service_account_name=service_account,
        # the token goes to the labelling step alone (a projected volume), never to the privileged one
        automount_service_account_token=False,
        termination_grace_period_seconds=1,
        security_context=core.PodSecurityContextArgs(seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault")),
        init_containers=[
            *([core.ContainerArgs(
                name="sharp", image=args.image, image_pull_policy="IfNotPresent", command=command("sharp"),
                security_context=core.SecurityContextArgs(privileged=True),
                resources=_small("1", "256Mi"),
                volume_mounts=[script, work, core.VolumeMountArgs(name="dev-infiniband", mount_path="/dev/infiniband")],
            )] if args.runs_sharp else []),
            core.ContainerArgs(
                name="label", image=args.python_image, image_pull_policy="IfNotPresent", command=command("node"),
                env=environment(args.extra_labels), security_context=_unprivileged(), resources=_small("500m", "128Mi"),
                volume_mounts=[
                    script, work,
                    core.VolumeMountArgs(name="hyperv", mount_path=HYPERV_DIR, read_only=True),
                    core.VolumeMountArgs(name="token", mount_path="/var/run/secrets/kubernetes.io/serviceaccount",
                                         read_only=True),
                ],
            ),
        ],
        containers=[core.ContainerArgs(name="hold", image=PAUSE_IMAGE, image_pull_policy="IfNotPresent",
                                       resources=_small("100m", "32Mi"), security_context=_unprivileged())],
        volumes=[
            core.VolumeArgs(name="script", config_map=core.ConfigMapVolumeSourceArgs(name=config_map_name)),
            core.VolumeArgs(name="work", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit="16Mi")),
            # the KVP pool's directory, not the file: a `File` volume stops the pod where the file is absent,
            # and the script labels without it (no physical-host label, said)
            core.VolumeArgs(name="hyperv", host_path=core.HostPathVolumeSourceArgs(
                path=HYPERV_DIR, type="DirectoryOrCreate")),
            *([core.VolumeArgs(name="dev-infiniband", host_path=core.HostPathVolumeSourceArgs(
                path="/dev/infiniband", type="Directory"))] if args.runs_sharp else []),
            core.VolumeArgs(name="token", projected=core.ProjectedVolumeSourceArgs(sources=[
                core.VolumeProjectionArgs(service_account_token=core.ServiceAccountTokenProjectionArgs(
                    path="token", expiration_seconds=3600)),
                core.VolumeProjectionArgs(config_map=core.ConfigMapProjectionArgs(
                    name="kube-root-ca.crt", items=[core.KeyToPathArgs(key="ca.crt", path="ca.crt")])),
            ])),
        ],
    )


def checkov_skips() -> dict[str, str]:
    return {f"checkov.io/skip{i}": f"{check}={reason}"
            for i, (check, reason) in enumerate(sorted(PRIVILEGED_SHARP_STEP.items()), start=1)}


def node_validations(label_keys: Sequence[str]) -> list[dict[str, str]]:
    """The labeler's node writes: its labels and its annotation, nothing else (no taint: it could lift the
    certifier's hold; no cordon)."""
    annotations = (fabric.HCA_GUIDS_ANNOTATION,)
    return [
        {"expression": node_bounds.taints_change_only(()), "message": "the topology labeler changes no taint"},
        {"expression": node_bounds.SAME_CORDON, "message": "the topology labeler never cordons or uncordons a node"},
        {"expression": node_bounds.map_changes_only("labels", label_keys),
         "message": f"the topology labeler changes only its labels ({', '.join(sorted(label_keys))})"},
        {"expression": node_bounds.map_changes_only("annotations", annotations),
         "message": f"the topology labeler changes only its annotation {', '.join(annotations)}"},
    ]


def node_policy(name: str, args: TopologyLabelerArgs, labels: Mapping[str, str],
                opts: pulumi.ResourceOptions) -> adm.ValidatingAdmissionPolicy:
    """`{name}-nodes-policy` and its `-binding`: Deny, matched on the labeler's account."""
    keys = [n for fact, n in fabric.topology_names().items() if n != fabric.HCA_GUIDS_ANNOTATION]
    keys += list(args.extra_labels)
    policy_name = "aks-infiniband-topology-labeler-nodes"
    account = f"system:serviceaccount:{args.namespace_name}:{NAME}"
    policy = adm.ValidatingAdmissionPolicy(
        f"{name}-nodes-policy", metadata=meta.ObjectMetaArgs(name=policy_name, labels=dict(labels)),
        spec=adm.ValidatingAdmissionPolicySpecArgs(
            failure_policy="Fail",
            match_conditions=[adm.MatchConditionArgs(name="the-labeler",
                                                     expression=f"request.userInfo.username == '{account}'")],
            match_constraints=adm.MatchResourcesArgs(resource_rules=[adm.NamedRuleWithOperationsArgs(
                api_groups=[""], api_versions=["v1"], operations=["UPDATE"], resources=["nodes"])]),
            validations=[adm.ValidationArgs(**v, reason="Forbidden") for v in node_validations(keys)]),
        opts=opts)
    adm.ValidatingAdmissionPolicyBinding(
        f"{name}-nodes-policy-binding", metadata=meta.ObjectMetaArgs(name=policy_name, labels=dict(labels)),
        spec=adm.ValidatingAdmissionPolicyBindingSpecArgs(policy_name=policy.metadata.name,
                                                         validation_actions=["Deny"]),
        opts=opts)
    return policy


class TopologyLabeler(pulumi.ComponentResource):
    """`{name}-namespace` (privileged: the SHARP query), `{name}-sa`, `{name}-role` (nodes patch,
    nothing else), `{name}-binding`, `{name}-script` and `{name}-daemonset`. Depends only on the
    cluster's provider (in `opts`): it labels each node as it joins."""

    daemon_set: k8s.apps.v1.DaemonSet

    def __init__(self, name: str, args: TopologyLabelerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:TopologyLabeler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.namespace = Namespace(f"{name}-namespace", NamespaceArgs(
            namespace_name=args.namespace_name, pod_security="privileged", warn="baseline", audit="baseline"),
            opts=child)
        labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "aks-infiniband"}
        ns = self.namespace.name
        sa = core.ServiceAccount(f"{name}-sa", core.ServiceAccountInitArgs(
            metadata=meta.ObjectMetaArgs(name=NAME, namespace=ns, labels=labels)), opts=child)
        role = rbac.ClusterRole(f"{name}-role", rbac.ClusterRoleInitArgs(
            metadata=meta.ObjectMetaArgs(name=NAME, labels=labels),
            rules=[rbac.PolicyRuleArgs(api_groups=[""], resources=["nodes"], verbs=["patch"])]), opts=child)
        rbac.ClusterRoleBinding(f"{name}-binding", rbac.ClusterRoleBindingInitArgs(
            metadata=meta.ObjectMetaArgs(name=NAME, labels=labels),
            role_ref=rbac.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                                      name=role.metadata.name),
            subjects=[rbac.SubjectArgs(kind="ServiceAccount", name=sa.metadata.name, namespace=ns)]), opts=child)
        # RBAC cannot bound a node patch by field: the API server keeps it to the labeler's labels
        node_policy(name, args, labels, child)
        script = core.ConfigMap(f"{name}-script", core.ConfigMapInitArgs(
            metadata=meta.ObjectMetaArgs(name=f"{NAME}-script", namespace=ns, labels=labels),
            data={SCRIPT_KEY: script_text()}), opts=child)
        self.daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            k8s.apps.v1.DaemonSetInitArgs(
                # nothing waits for it: the pool may not exist yet, and the fabric test does not need it
                metadata=meta.ObjectMetaArgs(name=NAME, namespace=ns, labels=labels,
                                             annotations={SKIP_AWAIT: "true", **checkov_skips()}),
                spec=k8s.apps.v1.DaemonSetSpecArgs(
                    selector=meta.LabelSelectorArgs(match_labels=labels),
                    update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(
                        type="RollingUpdate",
                        rolling_update=k8s.apps.v1.RollingUpdateDaemonSetArgs(max_unavailable="100%")),
                    template=core.PodTemplateSpecArgs(
                        metadata=meta.ObjectMetaArgs(labels=labels,
                                                     annotations={SCRIPT_HASH_ANNOTATION: script_sha256()}),
                        spec=pod_spec(args, script.metadata.name, sa.metadata.name)),
                ),
            ),
            opts=child,
        )
        self.register_outputs({"namespace": ns})
