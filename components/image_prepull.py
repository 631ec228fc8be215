"""The fabric test image, pulled onto every InfiniBand node while the drivers install.

The test image (nccl-tests, CUDA, HPC-X: several GB) is otherwise pulled only when the job's pods
start, and they start only after the DOCA driver, the GPU driver and the device plugins are ready:
the pull sits on the critical path of `pulumi up`. This DaemonSet pulls it as soon as a node of the
pool joins, in parallel with the driver containers, so the job's pods find it on the node
(`IfNotPresent`, the default for a pinned tag).

What it is:
- one pod per IB node (the pool's node selector, its taint tolerated), in its own namespace that
  enforces the `restricted` Pod Security level;
- an init container of the fabric test image that runs `true` and exits: the kubelet pulls the image
  to start it. It runs under runc, without GPUs, while the GPU driver may not be there yet: the pod
  names no runtime class, and with CDI on (the chart's default, kept here) the GPU Operator's toolkit
  adds the NVIDIA runtime to containerd without making it the default (it sets
  NVIDIA_RUNTIME_SET_AS_DEFAULT=false: NVIDIA/gpu-operator@10ee5b3 (v26.7.0)
  controllers/object_controls.go transformToolkitCtrForCDI). `NVIDIA_VISIBLE_DEVICES=void` is belt and
  braces, harmless under runc: should a node's default runtime be the NVIDIA one after all (AKS makes
  `nvidia-container-runtime` containerd's default on GPU nodes whose driver it installs:
  Azure/AgentBaker@06836ee pkg/agent/baker.go, the containerd templates), it still injects no GPU and
  needs no driver (the CUDA images set `all`; NVIDIA container toolkit user guide, GPU enumeration:
  "`void` or empty or unset: nvidia-container-runtime will have the same behavior as runc");
- then a `pause` container that only holds the pod (a few MiB), non-root, read-only, no
  capabilities, no GPU, no RDMA device, no service account token, no network traffic (a deny-all
  NetworkPolicy: the kubelet pulls the image, not the pod);
- it depends on nothing but the cluster's Kubernetes provider, and nothing waits for it
  (`pulumi.com/skipAwait`): it is best effort, the job's pods would pull the image themselves.

Kept after the test, on purpose: the exited init container keeps the image in use, so the kubelet's
image garbage collection leaves it on the node, and a re-run of the test (`pulumi up --replace`) or a
node that joins later (scale-out, a reimaged node) has it before the job needs it. It costs a pause
container per node and the disk the job needs anyway; `fabricTest.enabled: false` removes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace, NamespaceArgs
from core import fabric, pins

core = k8s.core.v1
meta = k8s.meta.v1

NAMESPACE = "fabric-test-prepull"
DAEMONSET = "fabric-test-image-prepull"
# registry.k8s.io's pause, pinned by its multi-arch index digest in the pin table. It only sleeps.
PAUSE_IMAGE = pins.component("pauseImage").version
NOBODY = 65534  # runs as nobody: the pull needs no privilege, `true` and `pause` need none either
SKIP_AWAIT = "pulumi.com/skipAwait"
PULL_CONTAINER, HOLD_CONTAINER = "pull", "hold"


@dataclass(frozen=True)
class ImagePrepullArgs:
    # The fabric test image, exactly as the job names it (the kubelet caches by reference).
    image: str
    namespace_name: str = NAMESPACE
    daemonset_name: str = DAEMONSET

    def __post_init__(self) -> None:
        if not self.image or self.image != self.image.strip():
            raise ValueError(f"image: got {self.image!r}; expected the fabric test image reference")


def _container_security() -> core.SecurityContextArgs:
    return core.SecurityContextArgs(
        privileged=False,
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        run_as_user=NOBODY,
        run_as_group=NOBODY,
        capabilities=core.CapabilitiesArgs(drop=["ALL"]),
    )


def _tiny() -> core.ResourceRequirementsArgs:
    # `true` and `pause` use next to nothing; limits keep them from ever taking more
    return core.ResourceRequirementsArgs(requests={"cpu": "1m", "memory": "8Mi"},
                                         limits={"cpu": "100m", "memory": "32Mi"})


def pod_spec(image: str) -> core.PodSpecArgs:
    """One pod per IB node: pull `image` (init container), then hold the pod with pause."""
    return core.PodSpecArgs(
        node_selector=fabric.pool_node_selector(),
        tolerations=[core.TolerationArgs(**fabric.toleration())],
        automount_service_account_token=False,
        enable_service_links=False,
        termination_grace_period_seconds=1,
        security_context=core.PodSecurityContextArgs(
            run_as_non_root=True, run_as_user=NOBODY, run_as_group=NOBODY,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        init_containers=[core.ContainerArgs(
            name=PULL_CONTAINER,
            image=image,
            image_pull_policy="IfNotPresent",  # the job's pods use the same, and find it here
            command=["true"],
            env=[core.EnvVarArgs(name="NVIDIA_VISIBLE_DEVICES", value="void")],
            resources=_tiny(),
            security_context=_container_security(),
        )],
        containers=[core.ContainerArgs(
            name=HOLD_CONTAINER,
            image=PAUSE_IMAGE,
            image_pull_policy="IfNotPresent",
            resources=_tiny(),
            security_context=_container_security(),
        )],
    )


class ImagePrepull(pulumi.ComponentResource):
    """`{name}-namespace` (restricted), `{name}-deny-all` and `{name}-daemonset`, pulling `args.image`
    on every IB node.
    Give it only the cluster's provider in `opts`: it must start when the nodes join."""

    namespace: Namespace
    network_policy: k8s.networking.v1.NetworkPolicy
    daemon_set: k8s.apps.v1.DaemonSet
    image: str

    def __init__(self, name: str, args: ImagePrepullArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:ImagePrepull", name, None, opts)
        self.image = args.image
        self.namespace = Namespace(f"{name}-namespace", NamespaceArgs(namespace_name=args.namespace_name),
                                   opts=pulumi.ResourceOptions(parent=self))
        labels = {"app.kubernetes.io/name": args.daemonset_name, "app.kubernetes.io/part-of": "aks-infiniband"}
        # The pods talk to nothing (the kubelet pulls the image, not the pod): no traffic in or out.
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-deny-all",
            k8s.networking.v1.NetworkPolicyInitArgs(
                metadata=meta.ObjectMetaArgs(name=f"{args.daemonset_name}-deny-all", namespace=self.namespace.name,
                                             labels=labels),
                spec=k8s.networking.v1.NetworkPolicySpecArgs(
                    pod_selector=meta.LabelSelectorArgs(match_labels=labels), policy_types=["Ingress", "Egress"]),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            k8s.apps.v1.DaemonSetInitArgs(
                metadata=meta.ObjectMetaArgs(
                    name=args.daemonset_name, namespace=self.namespace.name, labels=labels,
                    # nothing waits for it: best effort, the job's pods would pull the image themselves
                    annotations={SKIP_AWAIT: "true"},
                ),
                spec=k8s.apps.v1.DaemonSetSpecArgs(
                    selector=meta.LabelSelectorArgs(match_labels=labels),
                    # a new image is pulled on every node at once, not node by node
                    update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(
                        type="RollingUpdate",
                        rolling_update=k8s.apps.v1.RollingUpdateDaemonSetArgs(max_unavailable="100%"),
                    ),
                    template=core.PodTemplateSpecArgs(metadata=meta.ObjectMetaArgs(labels=labels),
                                                      spec=pod_spec(args.image)),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"namespace": self.namespace.name, "image": args.image})
