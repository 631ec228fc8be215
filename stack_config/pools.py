"""The InfiniBand pools of a stack: `ibPool` (the one-pool form) or `ibPools` (a map keyed by pool name),
read into one list of entries, each with the paths its messages name, and the rules of one pool and of
several pools in one cluster. model.py turns the entries into `IbPool` records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core import catalog, dra, kinds, modes, nccl_sizing, pins, rdma_drivers
from stack_config import checks, engine
from stack_config.engine import shown
from stack_config.schema import DEFAULT_NCCL_TESTS_IMAGE, SCHEMA_BY_NAME

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


def moved_problems(entries: list[Entry], prefix: str) -> list[str]:
    """movedFromIbPool on one entry at most: only the pool that was ibPool answers to its names, and two
    resources claiming one former name would stop `pulumi up` (Pulumi refuses two aliases of one resource)."""
    moved = [e.name for e in entries if e.values.get("movedFromIbPool")]
    if len(moved) < 2:
        return []
    return [f"{prefix}{MANY}: got movedFromIbPool on {', '.join(moved)}; only the pool that was ibPool answers to "
            f"its names: set it on that one entry (keyed by ibPool.name)"]


def subnets(entries: list[Entry]) -> dict[str, str | None]:
    """With ibPools, each entry's subnetId key and value (None: unset, the pool takes network.ibSubnetId), for the
    network rules (core/enterprise.py); {} with ibPool, which has no subnet of its own."""
    return {e.key("subnetId"): e.values.get("subnetId") for e in entries if e.at != SINGLE}


def rdma_driver_problems(ib: dict[str, Any], prefix: str, sku: catalog.Sku, key: str) -> list[str]:
    """A pool's rdmaDriver (`key`: ibPool.rdmaDriver, ibPools.<name>.rdmaDriver) against the size's catalog
    evidence (core/rdma_drivers.py `problem`)."""
    name = ib.get("rdmaDriver")
    why = name and rdma_drivers.problem(sku, rdma_drivers.rdma_driver(name))
    return [f"{prefix}{key}: got {name!r}; {why}"] if why else []


def pool_problems(e: Entry, ft: dict[str, Any], prefix: str, mode: modes.RdmaMode | None) -> list[str]:
    """One pool's rules: its node count against the test and the autoscaler's range, its thresholds, arguments and
    image against its size, the DRA claims (scale to zero with the hold is allowed: a node back alone waits
    for a peer, clusterside/certify_admit.py). Each message names the pool's key (ibPool.*, ibPools.<name>.*)
    or, for a stack-wide fabricTest key, the pool it was judged for."""
    problems: list[str] = []
    ib, sku, kind = e.values, e.sku, e.kind
    if ib.get("nodeCount") == 1 and ft.get("enabled"):
        problems.append(
            f"{prefix}{e.key('nodeCount')}: got 1; the fabric test needs 2 or more nodes to cross InfiniBand "
            f"(or set fabricTest.enabled: false)"
        )
    low, count = ib.get("minNodeCount"), ib.get("nodeCount")
    if low is not None and count is not None and low > count:
        problems.append(f"{prefix}{e.key('minNodeCount')}: got {low}; expected at most {e.key('nodeCount')} "
                        f"({count}), the autoscaler's maximum")
    if sku is None or kind is None:
        return problems
    if ib.get("nodeCount"):
        problems += threshold_problems(sku, ib["nodeCount"], ft, prefix, e)
    if ft.get("allReduceArgs"):
        why = nccl_sizing.fit_problem(ft["allReduceArgs"], sku)
        if why:
            problems.append(f"{prefix}{e.fabric_key('allReduceArgs')}: got {shown(ft['allReduceArgs'])}{e.of}; {why}")
    default_platforms = pins.component("ncclTestsImage").platforms
    if ft.get("enabled") and ft.get("image") == DEFAULT_NCCL_TESTS_IMAGE and sku.cpu_arch not in default_platforms:
        problems.append(
            f"{prefix}fabricTest.image: got the default {DEFAULT_NCCL_TESTS_IMAGE!r}{e.of}, which is "
            f"{'/'.join(default_platforms)} only; "
            f"{sku.vm_size} is {sku.cpu_arch}: set an {sku.cpu_arch} image with nccl-tests, MPI and sshd"
        )
    # Each fabric test has its own threshold, in its own unit: the other one would be silently ignored.
    thresholds = {k.threshold_key: ft.get(k.threshold_key) for k in kinds.BY_NAME.values()}
    for key, why in kinds.threshold_problems(kind, thresholds).items():
        if e.alone or e.own_fabric.get(key) is not None:  # a stack-wide one applies to the pools of its unit
            problems.append(f"{prefix}{e.fabric_key(key)}: got {ft[key]}; {sku.vm_size}: {why}")
    if e.alone and not kind.has_doctor and ft.get("doctor") == "always":
        problems.append(f"{prefix}fabricTest.doctor: got 'always'; on {sku.vm_size} the fabric test is "
                        f"{kind.test}, which has no doctor: leave it unset (auto) or set never")
    if ft.get("sharp") and e.alone and not kind.runs_nccl:
        problems.append(f"{prefix}fabricTest.sharp: got true; on {sku.vm_size} the fabric test is "
                        f"{kind.test}, which has no NCCL and no SHARP setting: remove the key "
                        f"or set it to false")
    if ft.get("sharp") and sku.has_mnnvl:
        problems.append(f"{prefix}fabricTest.sharp: got true{e.of}; {sku.vm_size} runs Azure's Grace Blackwell NCCL "
                        f"settings, which have no SHARP/CollNet (its GB300 values null every SHARP variable): remove "
                        f"the key or set it to false")
    problems += rdma_driver_problems(ib, prefix, sku, e.key("rdmaDriver"))
    if mode and mode.dra and not sku.has_gpus:
        problems.append(f"{prefix}rdmaMode: got {mode.name!r}{e.of}; {sku.vm_size} has no GPUs, and the DRA claims "
                        f"pair each GPU with its HCA: use shared or sriov")
    elif mode and mode.dra and not dra.can_pair(sku):
        problems.append(f"{prefix}rdmaMode: got {mode.name!r}{e.of}; no published source says which HCA sits beside "
                        f"which GPU on {sku.vm_size}, so its claims cannot be paired: use shared or sriov")
    return problems


def stack_wide_test_problems(entries: list[Entry], ft: dict[str, Any], prefix: str) -> list[str]:
    """With several pools, a fabricTest key that only some kinds take applies to the pools whose kind takes it,
    and is refused only when none does (one pool: pool_problems says it of that pool)."""
    sized = [e for e in entries if e.kind is not None and not e.alone]
    if not sized:
        return []
    problems: list[str] = []
    if ft.get("doctor") == "always" and not any(e.kind.has_doctor for e in sized):
        problems.append(f"{prefix}fabricTest.doctor: got 'always'; no pool's fabric test has a doctor: leave it "
                        f"unset (auto) or set never")
    if ft.get("sharp") and not any(e.kind.runs_nccl for e in sized):
        problems.append(f"{prefix}fabricTest.sharp: got true; no pool's fabric test runs NCCL: remove the key or set "
                        f"it to false")
    for key in (k.threshold_key for k in kinds.BY_NAME.values()):
        if ft.get(key) is not None and not any(e.kind.threshold_key == key for e in sized):
            problems.append(f"{prefix}fabricTest.{key}: got {ft[key]}; no pool's fabric test is judged by it: remove "
                            f"the key")
    return problems


def threshold_problems(sku: catalog.Sku, nodes: int, ft: dict[str, Any], prefix: str, e: Entry) -> list[str]:
    """A threshold the size cannot reach (every run would FAIL) or below the floor (it would not act)."""
    problems: list[str] = []
    gbps, gbits = ft.get("thresholdGbps"), ft.get("p2pThresholdGbits")
    span = checks.allreduce_threshold_range(sku, nodes)
    if gbps is not None and span is not None:
        low, high = span
        if gbps > high:
            problems.append(f"{prefix}{e.fabric_key('thresholdGbps')}: got {gbps}{e.of}; {nodes} x {sku.vm_size} "
                            f"cannot reach it: "
                            f"busbw stays below twice the node's InfiniBand rate ({sku.ib_hcas_per_vm} x "
                            f"{sku.ib_link_gbits} Gb/s: {high:g} GB/s); set {math.ceil(low) or 1} to {high:g}")
        elif gbps < low:
            problems.append(f"{prefix}{e.fabric_key('thresholdGbps')}: got {gbps}{e.of}; on {sku.vm_size} a run below "
                            f"{low:g} GB/s "
                            f"(35 % of the baseline) is FAIL whatever the threshold, so this one would not act; set "
                            f"{math.ceil(low)} to {high:g}")
    if gbits is not None and not sku.has_gpus and gbits > sku.ib_link_gbits:
        problems.append(f"{prefix}{e.fabric_key('p2pThresholdGbits')}: got {gbits}{e.of}; one {sku.ib_generation} "
                        f"link of {sku.vm_size} carries at most {sku.ib_link_gbits} Gb/s: set 1 to {sku.ib_link_gbits}")
    return problems
