"""The InfiniBand pools of a stack: `ibPool` (the one-pool form) or `ibPools` (a map keyed by pool name),
read into one list of entries, each with the paths its messages name, and the rules of one pool and of
several pools in one cluster. model.py turns the entries into `IbPool` records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core import catalog, dra, kinds, modes, rdma_drivers
from stack_config import engine
from stack_config.schema import SCHEMA_BY_NAME

SINGLE, MANY = "ibPool", "ibPools"
# The fabricTest keys an ibPools entry may set for its own pool (they depend on the size).
POOL_FABRIC_KEYS = ("thresholdGbps", "p2pThresholdGbits", "allReduceArgs")


@dataclass(frozen=True)
class Entry:
    """One pool as configured: its values, where its messages point, and its size's records (None where the
    size's own check failed)."""

    name: str
    values: Mapping[str, Any]  # the entry's fields (vmSize, nodeCount, ...)
    at: str  # "ibPool" or "ibPools.<name>"
    alone: bool  # the stack's only pool
    own_fabric: Mapping[str, Any]  # ibPools.<name>.fabricTest: the size-bound keys this pool sets itself
    sku: catalog.Sku | None
    kind: kinds.Kind | None

    def key(self, field: str) -> str:
        return f"{self.at}.{field}"

    def fabric(self, ft: Mapping[str, Any]) -> dict[str, Any]:
        """fabricTest as this pool runs it: the stack's keys, with the pool's own size-bound ones over them."""
        return {**ft, **{k: v for k, v in self.own_fabric.items() if v is not None}}

    def fabric_key(self, field: str) -> str:
        """Where this pool's value of fabricTest.`field` is set, for a message: the entry's own key, or the
        stack's key and the pool it is judged for (in the map form)."""
        if self.own_fabric.get(field) is not None:
            return f"{self.at}.fabricTest.{field}"
        return f"fabricTest.{field}"

    @property
    def of(self) -> str:
        """What a message of a stack-wide key adds to say which pool it was judged for ('' with one pool)."""
        return "" if self.alone else f" (pool {self.name!r}, {self.values.get('vmSize')})"


def _set(raw: Any) -> bool:
    """Whether a pool key is set: the CLI hands an unset object key as Pulumi.yaml's default {}."""
    return raw not in (None, "", {}, "{}", "null")


def read(ours: Mapping[str, Any], prefix: str, problems: list[str]) -> list[Entry]:
    """The pools of the configuration `ours` (keys without the project prefix), each entry read and checked
    on its own; problems are appended. Entries whose values failed their own checks are left out."""
    single, many = ours.get(SINGLE), ours.get(MANY)
    if _set(many):
        pools = engine.read(SCHEMA_BY_NAME[MANY], many, f"{prefix}{MANY}", problems)
        if pools is None:  # not a map: said so
            return []
        if _set(single):
            problems.append(f"{prefix}{MANY}: set together with {SINGLE}; {SINGLE} is the one-pool form of {MANY}: "
                            f"keep one (move ibPool's fields under ibPools.<its name>)")
            return []
        if not pools:
            problems.append(f"{prefix}{MANY}: got an empty map; expected one entry or more, keyed by pool name")
        alone = len(pools) == 1
        return [_entry(name, values, f"{MANY}.{name}", alone, (values or {}).get("fabricTest") or {})
                for name, values in pools.items() if values is not None]
    if not _set(single):
        problems.append(f"{prefix}{SINGLE}: is required but not set; set ibPool (vmSize, nodeCount) or ibPools, a "
                        f"map of pool name to the same fields")
        return []
    values = engine.read(SCHEMA_BY_NAME[SINGLE], single, f"{prefix}{SINGLE}", problems)
    if values is None:
        return []
    return [_entry(values["name"], values, SINGLE, True, {})]


def _entry(name: str, values: Mapping[str, Any], at: str, alone: bool, own_fabric: Mapping[str, Any]) -> Entry:
    sku = catalog.lookup(values["vmSize"]) if values.get("vmSize") else None
    return Entry(name=name, values=values, at=at, alone=alone, own_fabric=own_fabric, sku=sku,
                 kind=kinds.kind_for(sku) if sku else None)


def cluster_problems(entries: list[Entry], prefix: str, mode: modes.RdmaMode | None) -> list[str]:
    """What several pools of one cluster must share, each refused with the reason: one feature registration
    for the subscription, one CPU architecture, one way the GPUs reach pods (the GPU Operator's one
    ClusterPolicy) and one RDMA driver stack (the NicClusterPolicy and that ClusterPolicy). One node OS for
    every GPU pool holds by construction: every pool is osSKU Ubuntu at the cluster's Kubernetes version
    (components/platform/ib_node_pool.py), so one Ubuntu release."""
    sized = [e for e in entries if e.sku is not None]
    if len(sized) < 2:
        return []
    where = f"{prefix}{MANY}"

    def listed(pools: list[Entry], what: Any) -> str:
        return ", ".join(f"{e.name} ({e.sku.vm_size}: {what(e)})" for e in pools)

    problems: list[str] = []
    if len({e.sku.ib_feature for e in sized}) > 1:
        feature = listed(sized, lambda e: "AKSInfinibandSupport " + e.sku.ib_feature.value)
        problems.append(f"{where}: got {feature}; the feature is registered for the whole subscription or must be "
                        f"absent from it: pools of these sizes need clusters of their own")
    if len({e.sku.cpu_arch for e in sized}) > 1:
        problems.append(f"{where}: got {listed(sized, lambda e: e.sku.cpu_arch)}; one CPU architecture per cluster: "
                        f"the driver containers and the topology labeler run one image set for every IB node")
    gpus = [e for e in sized if e.sku.has_gpus]

    def way(e: Entry) -> str:
        return "DRA claims" if dra.needs(e.sku, mode) else "device plugin"

    if mode is not None and len({way(e) for e in gpus}) > 1:
        problems.append(f"{where}: got {listed(gpus, way)}; the GPU Operator's one ClusterPolicy gives every GPU node "
                        f"its GPUs one way: pools of these sizes need clusters of their own")
    drivers = {e.values.get("rdmaDriver") for e in sized}
    if len(drivers) > 1:
        problems.append(f"{where}: got {listed(sized, lambda e: 'rdmaDriver ' + str(e.values.get('rdmaDriver')))}; "
                        f"the NicClusterPolicy and the GPU Operator's ClusterPolicy are one for the cluster "
                        f"(docs/rdma-drivers.md#several-pools): set the same rdmaDriver on every pool")
    return problems


def rdma_driver_problems(ib: dict[str, Any], prefix: str, sku: catalog.Sku, key: str) -> list[str]:
    """A pool's rdmaDriver (`key`: ibPool.rdmaDriver, ibPools.<name>.rdmaDriver) against the size's catalog
    evidence (core/rdma_drivers.py `problem`)."""
    name = ib.get("rdmaDriver")
    why = name and rdma_drivers.problem(sku, rdma_drivers.rdma_driver(name))
    return [f"{prefix}{key}: got {name!r}; {why}"] if why else []
