"""The shape every operator of the stack shares: its own namespace, then a pinned Helm release in it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.namespace import Namespace, NamespaceArgs


@dataclass(frozen=True)
class Chart:
    name: str  # also the release name
    repo: str  # a Helm repository URL, or an OCI registry path (oci://...) under which the chart is

    @property
    def ref(self) -> str:
        """What Helm installs: the chart's name in its repository, or its full OCI reference."""
        return f"{self.repo}/{self.name}" if self.repo.startswith("oci://") else self.name

    def repository_opts(self) -> k8s.helm.v3.RepositoryOptsArgs | None:
        return None if self.repo.startswith("oci://") else k8s.helm.v3.RepositoryOptsArgs(repo=self.repo)


def operator_release(
    name: str,
    parent: pulumi.Resource,
    *,
    chart: Chart,
    version: str,
    namespace_name: str,
    values: dict[str, Any],
    timeout_seconds: int,
    chart_archive: str | None = None,
) -> tuple[Namespace, k8s.helm.v3.Release]:
    """Declare `{name}-namespace` and `{name}-release` as children of `parent`.

    The namespace enforces the `privileged` pod-security level: each operator's DaemonSets load
    kernel modules or mount host paths and devices, which `baseline` forbids. The release is
    placed in the namespace through its output, so Pulumi creates the namespace first and deletes
    it last. With `chart_archive` (a checked local .tgz of `version`: stack/charts.py) Helm installs that
    file and reaches no repository.
    """
    namespace = Namespace(
        f"{name}-namespace",
        NamespaceArgs(namespace_name=namespace_name, pod_security="privileged"),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    release = k8s.helm.v3.Release(
        f"{name}-release",
        k8s.helm.v3.ReleaseArgs(
            name=chart.name,
            chart=chart_archive or chart.ref,
            version=version,
            repository_opts=None if chart_archive else chart.repository_opts(),
            namespace=namespace.name,
            values=values,
            timeout=timeout_seconds,
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return namespace, release
