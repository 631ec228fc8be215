"""A Namespace labelled with its Pod Security Admission level - the one helper every Kubernetes
component of the stack uses to get a namespace (the fabric test job's too)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

# Pod Security Standards levels, least to most permissive.
POD_SECURITY_LEVELS = ("restricted", "baseline", "privileged")
POD_SECURITY_ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
POD_SECURITY_WARN_LABEL = "pod-security.kubernetes.io/warn"
POD_SECURITY_AUDIT_LABEL = "pod-security.kubernetes.io/audit"
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF = "aks-infiniband"


@dataclass(frozen=True)
class NamespaceArgs:
    # The namespace's name in the cluster (fixed, not auto-named: operators and docs refer to it).
    namespace_name: str
    # Pod Security Admission level enforced in the namespace. Default `restricted`, the most
    # secure; take `privileged` only where a DaemonSet needs host access (driver containers,
    # hostPath mounts, device plugins) and say why.
    pod_security: str = "restricted"
    # Optional `warn` / `audit` levels (e.g. `baseline` under a `privileged` enforce, so that what
    # exceeds baseline shows up in kubectl warnings and the audit log). None: not set.
    warn: str | None = None
    audit: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in ("pod_security", "warn", "audit"):
            value = getattr(self, key)
            if value not in POD_SECURITY_LEVELS and not (key != "pod_security" and value is None):
                raise ValueError(f"{key}: got {value!r}; expected one of {', '.join(POD_SECURITY_LEVELS)}")


def namespace_labels(args: NamespaceArgs) -> dict[str, str]:
    labels = {**dict(args.labels), PART_OF_LABEL: PART_OF, POD_SECURITY_ENFORCE_LABEL: args.pod_security}
    if args.warn:
        labels[POD_SECURITY_WARN_LABEL] = args.warn
    if args.audit:
        labels[POD_SECURITY_AUDIT_LABEL] = args.audit
    return labels


class Namespace(pulumi.ComponentResource):
    """One `v1/Namespace` with the Pod Security Admission `enforce` label set to `pod_security`.

    `name` is the namespace's name as an output: pass it as the `namespace` of what goes inside,
    so that it is created first and deleted last.
    """

    namespace: k8s.core.v1.Namespace
    name: pulumi.Output[str]

    def __init__(self, name: str, args: NamespaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:Namespace", name, None, opts)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            k8s.core.v1.NamespaceInitArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace_name, labels=namespace_labels(args)),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.name = self.namespace.metadata.apply(lambda m: m.name)
        self.register_outputs({"name": self.name})
