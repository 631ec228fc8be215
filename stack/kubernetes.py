"""The Kubernetes half: rows 4-11 of the design on the cluster that `handoff.ClusterHandle` names, one
module per feature: the operators and Volcano (stack/operators.py), the fabric test of the size's kind
and its verdict (stack/fabric_test.py), the GB200/GB300 rack's NVLink run (stack/rack.py).

Volcano's release manifest is checked against its pin first (`checked_volcano_manifest`), before either
half declares any resource."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.fabric.fabric_check import FabricCheck
from components.platform.volcano import ManifestError, checked_manifest
from stack import fabric_test, operators, rack
from stack.handoff import ClusterHandle
from stack_config import StackConfig, existing


@dataclass(frozen=True)
class KubernetesHalf:
    # each pool's day-0 verdict, by pool name; empty: fabricTest.enabled is false
    fabric_checks: dict[str, FabricCheck]
    # GB200/GB300 in one NVL72 rack: the rack's NVLink run, reported beside the verdict (`rack...` outputs)
    rack_check: FabricCheck | None = None

    @property
    def fabric_check(self) -> FabricCheck | None:
        """The one pool's verdict (None with several pools, or none run)."""
        return next(iter(self.fabric_checks.values())) if len(self.fabric_checks) == 1 else None


def checked_volcano_manifest(cfg: StackConfig) -> str | None:
    """Volcano's release manifest, checked against its pinned sha256 (components/platform/volcano.py). The program
    asks for it before any resource of either half exists: a copy that cannot be had or does not match
    stops it with one line, and nothing was created. None where Volcano is another owner's
    (existingCluster.preinstalled): the stack applies none of it."""
    if existing.VOLCANO in existing.owned_elsewhere(cfg):
        return None
    try:
        return checked_manifest(cfg.versions.volcano)
    except ManifestError as err:
        raise pulumi.RunError(f"{err} (nothing was created)") from None


def declare(cfg: StackConfig, cluster: ClusterHandle, volcano_manifest: str | None) -> KubernetesHalf:
    """`volcano_manifest`: what `checked_volcano_manifest` returned."""
    opts = pulumi.ResourceOptions(provider=cluster.provider)  # the stack's one Kubernetes provider
    ops = operators.declare(cfg, volcano_manifest, opts)
    if not cfg.fabric_test_enabled:
        return KubernetesHalf(fabric_checks={})
    rack_run = rack.RackRun() if rack.applies(cfg) else None
    test = fabric_test.declare(cfg, cluster, ops, opts, rack=rack_run.access if rack_run else None)
    rack_check = rack_run.declare(cfg, cluster, ops, test, opts) if rack_run else None
    return KubernetesHalf(fabric_checks=test.checks, rack_check=rack_check)
