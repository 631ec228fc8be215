"""The fabric test image, pulled onto every InfiniBand node while the drivers install.

The test image (several GB) would otherwise be pulled only when the job's pods start, after the
DOCA driver, the GPU driver and the device plugins: on the critical path of `pulumi up`. This
DaemonSet pulls it as a node of the pool joins, so the job's pods find it there (`IfNotPresent`).
One pod per IB node in a `restricted` namespace: an init container of the test image that runs
`true` under runc (no GPU, `NVIDIA_VISIBLE_DEVICES=void`), then a `pause` container that holds the
pod; no network (deny-all NetworkPolicy), nothing waits for it (`pulumi.com/skipAwait`). It stays
after the test on purpose, so image garbage collection keeps the image for a re-run or a node that
joins later. Why runc, and the rest: docs/fabric-test.md#image-pre-pull.
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
        tolerations=[core.TolerationArgs(**t) for t in fabric.fabric_tolerations()],
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
