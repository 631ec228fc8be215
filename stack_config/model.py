"""The typed configuration (`StackConfig`) and how it is read: `parse()` validates a raw config
map against `schema.SCHEMA` plus the rules that span several keys; `load()` does it for the running
program and stops it with one message."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import catalog, choices, defaults, dra, enterprise, kinds, modes, nccl_sizing, pins, rdma_drivers
from core.enterprise import ApiServer, EntraId, Identity, Network
from stack_config import checks, engine, existing, pools, regions
from stack_config.engine import ConfigError, shown
from stack_config.schema import (
    LOCATION_KEY,
    PROJECT,
    SCHEMA,
    SCHEMA_BY_NAME,
)


@dataclass(frozen=True)
class SystemPool:
    vm_size: str
    node_count: int


@dataclass(frozen=True)
class Versions:
    node_feature_discovery: str
    network_operator: str
    doca_driver: str
    rdma_shared_device_plugin: str
    sriov_device_plugin: str
    gpu_operator: str
    volcano: str
    dra_driver: str
    dranet: str


@dataclass(frozen=True)
class FabricTest:
    # The test that proves the pool's size (kinds.kind_for: the all-reduce on GPU sizes, point to point
    # on HB / HX), resolved once, at parse: what differs by kind is read from it.
    kind: kinds.Kind
    enabled: bool
    image: str
    all_reduce_args: str
    timeout_minutes: int
    fail_on_low_bandwidth: bool
    threshold_gbps: float | None  # GPU sizes: all-reduce busbw, GB/s
    p2p_threshold_gbits: float | None = None  # CPU-only sizes: point-to-point link bandwidth, Gb/s
    doctor: str = "auto"  # core.choices.DOCTOR_MODES
    doctor_minutes: int = defaults.DOCTOR_MINUTES  # the doctor's budget, added to the job's deadline unless never
    sharp: bool = False  # GPU sizes: SHARP/CollNet instead of NCCL's own IB transport
    topology_file: bool = True  # GPU sizes: mount Azure's NCCL topology file where one exists
    fail_on: str = "fail"  # core.choices.GATE_LEVELS: the verdict that fails `pulumi up` with fail_on_low_bandwidth

    @property
    def gate(self) -> str | None:
        """The gate's level (core.choices.GATE_LEVELS) when a bad verdict fails `pulumi up`, else None."""
        return self.fail_on if self.fail_on_low_bandwidth else None

    @property
    def threshold(self) -> float | None:
        """The fail threshold set for the test's kind, in that kind's unit (None: the catalog's)."""
        return {"thresholdGbps": self.threshold_gbps, "p2pThresholdGbits": self.p2p_threshold_gbits}[
            self.kind.threshold_key]


@dataclass(frozen=True)
class IbPool:
    """One InfiniBand pool and its own fabric: its size, its counts, and its fabric test (the kind its size
    takes, with the thresholds and arguments of this pool). Every per-pool read goes through it."""

    sku: catalog.Sku  # vmSize's catalog entry, looked up once, at parse
    node_count: int
    name: str  # the AgentPool's name (ibPool.name, or the key in ibPools)
    os_disk_size_gb: int
    fabric_test: FabricTest
    min_node_count: int | None = None  # set: the autoscaler runs the pool between this and node_count
    # rdmaDriver's record (core/rdma_drivers.py), looked up once, at parse: the pool's own, read per pool
    rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA
    # Whether it is the stack's only pool: its resources keep the one-pool names (and URNs) then.
    alone: bool = True
    # The existing subnet its nodes join: ibPools.<name>.subnetId, else network.ibSubnetId; None: AKS's VNet.
    subnet_id: str | None = None
    # ibPools.<name>.movedFromIbPool: the stack's ibPool before it had several; see `former`.
    moved_from_ib_pool: bool = False

    @property
    def vm_size(self) -> str:
        return self.sku.vm_size

    def named(self, base: str) -> str:
        """A name of this pool's own (a resource's, a namespace's): `base` when the pool is the stack's only
        one, as it always was, else `base-<pool name>`."""
        return base if self.alone else f"{base}-{self.name}"

    def former(self, base: str) -> str | None:
        """The name its resource `named(base)` had while it was the stack's ibPool (movedFromIbPool), where that
        differs from its name now: the Pulumi alias by which the move renames it instead of replacing it."""
        return base if self.moved_from_ib_pool and self.named(base) != base else None


@dataclass(frozen=True)
class Certifier:
    mode: str  # core.choices.CERTIFIER_MODES
    schedule: str  # cron, or "off"
    max_quarantine_percent: int
    history_size: int
    image: str
    pushgateway_url: str | None = None
    peer_wait_minutes: int = choices.DEFAULT_PEER_WAIT_MINUTES  # certifier.peerWaitMinutes


@dataclass(frozen=True)
class Alerts:
    enabled: bool = False  # the certifier's PrometheusRule and PodMonitor (components/fabric/certifier_alerts.py)


@dataclass(frozen=True)
class StackConfig:
    stack: str
    location: str
    resource_group_name: str
    cluster_name: str
    kubernetes_version: str
    system_pool: SystemPool
    # The InfiniBand pools, by name (ibPools), or the one of ibPool: each its own fabric.
    ib_pools: tuple[IbPool, ...]
    rdma_mode: modes.RdmaMode  # rdmaMode's record, looked up once, at parse
    versions: Versions
    feature_wait_timeout_minutes: int
    certifier: Certifier
    tags: Mapping[str, str] = field(default_factory=dict)
    protect: bool = False
    # The platform-team options (core/enterprise.py); the defaults are today's dev cluster.
    api_server: ApiServer = ApiServer()
    entra_id: EntraId = EntraId()
    identity: Identity = Identity()
    network: Network = Network()
    stack_part: str = "all"  # enterprise.STACK_PARTS
    azure_stack: str | None = None  # with stack_part kubernetes: the Azure part's stack
    production: bool = False
    # A Kubernetes stack on a cluster that already exists; local chart archives (stack_config/existing.py)
    existing_cluster: existing.ExistingCluster | None = None
    charts_directory: str | None = None
    # Each (key, value) outside the compatibility matrix, accepted by allowUntestedVersions (pins.untested).
    untested: tuple[tuple[str, str], ...] = ()
    alerts: Alerts = Alerts()

    @property
    def ib_pool(self) -> IbPool:
        """The stack's one pool; with several, each is read through `ib_pools`."""
        if len(self.ib_pools) != 1:
            raise ValueError(f"{len(self.ib_pools)} InfiniBand pools: read each through ib_pools")
        return self.ib_pools[0]

    @property
    def sku(self) -> catalog.Sku:
        return self.ib_pool.sku

    @property
    def fabric_test(self) -> FabricTest:
        """The one pool's fabric test; with several, each pool's is `IbPool.fabric_test`."""
        return self.ib_pool.fabric_test

    @property
    def fabric_test_enabled(self) -> bool:
        """fabricTest.enabled: the same for every pool."""
        return self.ib_pools[0].fabric_test.enabled

    @property
    def rdma_driver(self) -> rdma_drivers.RdmaDriver:
        """The pools' RDMA driver: one for the cluster (the NicClusterPolicy and the GPU Operator's ClusterPolicy
        are cluster-wide; stack_config/pools.py refuses pools that differ)."""
        return self.ib_pools[0].rdma_driver

    @property
    def skus(self) -> tuple[catalog.Sku, ...]:
        """The pools' sizes, each once, in the pools' order."""
        return tuple(dict.fromkeys(p.sku for p in self.ib_pools))


def _cross_key_problems(values: dict[str, Any], prefix: str, entries: list[pools.Entry],
                        mode: modes.RdmaMode | None) -> list[str]:
    """The rules that span several keys (each key's own check has passed or been reported): the stack's, then
    each pool's (`pools.pool_problems`), then those of several pools in one cluster; `mode` is rdmaMode's record
    (None when its check failed)."""
    problems: list[str] = []
    ft = values["fabricTest"] or {}
    problems += _system_pool_problems(values["systemPool"], prefix)
    entra = values.get("entraId") or {}
    principal = enterprise.principal_problem(entra.get("kubeloginMode") or "azurecli",
                                             entra.get("deployerPrincipalType"))
    if principal:
        problems.append(f"{prefix}{principal}")
    if ft.get("failOn") == "warn" and ft.get("failOnLowBandwidth") is False:
        problems.append(f"{prefix}fabricTest.failOn: got 'warn', which acts only with fabricTest.failOnLowBandwidth: "
                        f"true; set that too, or remove failOn")
    for entry in entries:
        problems += pools.pool_problems(entry, entry.fabric(ft), prefix, mode)
    problems += pools.stack_wide_test_problems(entries, ft, prefix)
    problems += pools.cluster_problems(entries, prefix, mode) + pools.moved_problems(entries, prefix)
    return problems


def _system_pool_problems(sp: dict[str, Any] | None, prefix: str) -> list[str]:
    """A GPU or InfiniBand size in the system pool only when asked for: it would run system pods on the
    most expensive VMs, and an IB size there is usually the IB pool's size written in the wrong place."""
    if not (sp and sp["vmSize"]) or sp["allowGpuOrIbSize"]:
        return []
    what = checks.accelerated_size(sp["vmSize"])
    if what is None:
        return []
    return [f"{prefix}systemPool.vmSize: got {shown(sp['vmSize'])}, {what}; the system pool runs system pods: use a "
            f"CPU size such as Standard_D4s_v5, or set systemPool.allowGpuOrIbSize: true"]


def _location_problems(raw: Mapping[str, Any]) -> list[str]:
    """azure-native:location: set, and a region Azure has. `azure:location` is the classic provider's key,
    which this program does not read: the usual slip when the real key is missing."""
    location = raw.get(LOCATION_KEY)
    set_it = "set it with `pulumi config set azure-native:location eastus`"
    if location is None or location == "":
        if raw.get("azure:location") is not None:
            return [f"azure:location: got {shown(raw['azure:location'])}, a key of the classic azure provider, "
                    f"which this program does not use; did you mean {LOCATION_KEY}? ({set_it})"]
        return [f"{LOCATION_KEY}: is required but not set; the Azure region of every resource ({set_it})"]
    allowed = regions.problem(location)
    if allowed is not None:
        return [f"{LOCATION_KEY}: got {shown(location)}; expected {allowed}"]
    return []


def _matrix_problems(values: dict[str, Any], prefix: str, skus: list[catalog.Sku],
                     mode: modes.RdmaMode | None) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    """kubernetesVersion and versions.* against the compatibility matrix (pins.MATRIX): the problems,
    or, with allowUntestedVersions, none and the untested (key, value) pairs the plan names. Only
    values that passed their own check are compared; a Volcano tag needs a sha256 either way."""
    problems: list[str] = []
    versions = {k: v for k, v in (values["versions"] or {}).items() if v is not None}
    volcano = versions.get("volcano")
    if volcano and pins.volcano_manifest(volcano)[1] is None:
        del versions["volcano"]  # one line for the key: this one
        problems.append(f"{prefix}versions.volcano: got {shown(volcano)}; no sha256 of its installer/"
                        f"volcano-development.yaml is pinned: give it as {volcano}@sha256:<64 hex> "
                        f"(docs/upgrading-pins.md says how)")
    if not values["kubernetesVersion"]:
        return problems, ()
    # DRA's floor is the API itself (core/dra.py), not a tested combination: allowUntestedVersions keeps it
    # an rdmaMode of None was refused on its own line: the DRA rule cannot judge it (an unknown mode is not shared)
    why = mode is not None and next(
        (w for sku in skus if (w := dra.kubernetes_problem(values["kubernetesVersion"], sku, mode))), None)
    if why:
        problems.append(f"{prefix}kubernetesVersion: got {shown(values['kubernetesVersion'])}; {why}")
        return problems, ()  # one line for the key
    found = pins.untested(values["kubernetesVersion"], versions)
    if values[pins.UNTESTED_KEY]:
        return problems, tuple((key, value) for key, value, _ in found)
    for key, value, allowed in found:
        problems.append(f"{prefix}{key}: got {shown(value)}; expected {allowed} (or set {prefix}{pins.UNTESTED_KEY}: "
                        f"true to run a combination nobody has tested)")
    return problems, ()


@functools.lru_cache(maxsize=64)
def _near_project(namespace: str) -> bool:
    """Whether a namespace is a near miss of the project's (difflib's ratio >= 0.8), e.g. aks-infinibnd.
    A pure function of one string, kept per namespace: every parse asks it of azure-native."""
    return bool(difflib.get_close_matches(namespace, [PROJECT], n=1, cutoff=0.8))


# The providers whose keys a stack file of this program sets (Pulumi.yaml, stack/): a near miss of one of them
# (azure-natve:location) is a key nothing reads.
PROVIDERS = ("azure-native", "kubernetes", "command")


@functools.lru_cache(maxsize=64)
def _near_provider(namespace: str) -> str | None:
    """The provider a namespace is a near miss of (difflib's ratio >= 0.8, not the provider itself), or None."""
    if namespace in PROVIDERS or len(namespace) > 40:
        return None
    return next(iter(difflib.get_close_matches(namespace, PROVIDERS, n=1, cutoff=0.8)), None)


def parse(raw: Mapping[str, Any], stack: str) -> StackConfig:
    """Validate a stack's configuration. `raw` maps full keys ("aks-infiniband:ibPool",
    "azure-native:location", ...) to values as the CLI hands them (strings; objects as JSON) or as
    typed YAML values. Raises ConfigError listing every problem, one line per key."""
    problems: list[str] = []
    prefix = f"{PROJECT}:"
    ours = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}
    for unknown in sorted(set(ours) - set(SCHEMA_BY_NAME)):
        problems.append(engine.unknown_key(f"{prefix}{unknown}", unknown, [k.name for k in SCHEMA], "allowed keys"))
    # A misspelt namespace would make a key silently belong to nobody: catch the near misses.
    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if name and namespace not in (PROJECT, "azure") and _near_project(namespace):
            problems.append(f"{key}: unknown namespace {shown(namespace)}; did you mean {prefix}{name}?")
        elif name and (provider := _near_provider(namespace)):
            problems.append(f"{key}: unknown namespace {shown(namespace)}; did you mean {provider}:{name}? "
                            f"(a provider's keys are read only under its own name)")
    values = {k.name: engine.read(k, ours.get(k.name), f"{prefix}{k.name}", problems) for k in SCHEMA
              if k.name not in (pools.SINGLE, pools.MANY)}
    # The pools, in either form, each entry read and checked on its own; its size's catalog entry and its
    # fabric-test kind looked up once (None where the size's check failed).
    entries = pools.read(ours, prefix, problems)
    # Names derived from the stack name are checked like set ones (a stack "prod.eu" gives no valid DNS prefix).
    for name, derived in (("resourceGroupName", f"{PROJECT}-{stack}"), ("clusterName", f"aks-ib-{stack}")):
        if values[name] is None and ours.get(name) in (None, ""):  # unset, or Pulumi.yaml's ""
            allowed = SCHEMA_BY_NAME[name].check(derived)
            if allowed is not None:
                problems.append(f"{prefix}{name}: got {shown(derived)} (derived from the stack name); "
                                f"expected {allowed}; set {name} explicitly")
            values[name] = derived

    location = raw.get(LOCATION_KEY)
    if isinstance(location, str) and location.lower() in regions.REGIONS:
        location = location.lower()  # ARM reads region names without case (EastUS is eastus)
    sp = values["systemPool"]
    if sp and isinstance(sp.get("vmSize"), str):
        sp["vmSize"] = checks.canonical_size(sp["vmSize"])  # as the IB size's case is corrected from the catalog
    # The mode's record, looked up once (None where its check failed).
    mode = modes.rdma_mode(values["rdmaMode"]) if values["rdmaMode"] is not None else None
    problems += _location_problems(raw)
    problems += _cross_key_problems(values, prefix, entries, mode)
    problems += enterprise.problems(values, prefix, problems, pools.subnets(entries))
    pool_skus = [e.sku for e in entries if e.sku]
    problems += existing.problems(values, prefix) + existing.chart_problems(values, prefix, pool_skus, mode)
    problems += existing.pools_problems(values, prefix, sorted(e.name for e in entries)) + \
        existing.preinstalled_problems(values, prefix, pool_skus)
    matrix_problems, untested = _matrix_problems(values, prefix, pool_skus, mode)
    problems += matrix_problems
    if problems:
        raise ConfigError(problems)

    v, ft = values["versions"], values["fabricTest"]
    ce = values["certifier"]
    return StackConfig(
        stack=stack,
        location=location,
        resource_group_name=values["resourceGroupName"],
        cluster_name=values["clusterName"],
        kubernetes_version=values["kubernetesVersion"],
        system_pool=SystemPool(vm_size=sp["vmSize"], node_count=sp["nodeCount"]),
        ib_pools=tuple(_pool(e, e.fabric(ft), (values["network"] or {}).get("ibSubnetId"))
                       for e in sorted(entries, key=lambda e: e.name)),
        rdma_mode=mode,
        versions=Versions(**{engine.snake(k): val for k, val in v.items()}),
        feature_wait_timeout_minutes=values["featureWaitTimeoutMinutes"],
        certifier=Certifier(mode=ce["mode"], schedule=ce["schedule"], max_quarantine_percent=ce["maxQuarantinePercent"],
                            history_size=ce["historySize"], image=ce["image"], pushgateway_url=ce["pushgatewayUrl"],
                            peer_wait_minutes=ce["peerWaitMinutes"]),
        tags=dict(sorted((values["tags"] or {"project": PROJECT, "stack": stack}).items())),
        protect=values["protect"],
        **enterprise.records(values),
        **existing.records(values),
        untested=untested,
        alerts=Alerts(enabled=values["alerts"]["enabled"]),
    )


def _pool(e: pools.Entry, ft: dict[str, Any], ib_subnet_id: str | None) -> IbPool:
    """A pool's record, with its own fabric test: its size's kind, and the stack's fabricTest keys with the
    pool's own size-bound ones over them. A key of the other kind's unit is not this pool's (None)."""
    ib, sku, kind = e.values, e.sku, e.kind
    own = {k.threshold_key: ft[k.threshold_key] if k is kind else None for k in kinds.BY_NAME.values()}
    return IbPool(
        sku=sku, node_count=ib["nodeCount"], name=e.name, os_disk_size_gb=ib["osDiskSizeGb"],
        min_node_count=ib["minNodeCount"], alone=e.alone, rdma_driver=rdma_drivers.rdma_driver(ib["rdmaDriver"]),
        subnet_id=ib.get("subnetId") or ib_subnet_id, moved_from_ib_pool=bool(ib.get("movedFromIbPool")),
        fabric_test=FabricTest(
            kind=kind, enabled=ft["enabled"], image=ft["image"],
            all_reduce_args=ft["allReduceArgs"] or nccl_sizing.all_reduce_args_for(sku),
            timeout_minutes=ft["timeoutMinutes"], fail_on_low_bandwidth=ft["failOnLowBandwidth"],
            threshold_gbps=own["thresholdGbps"], p2p_threshold_gbits=own["p2pThresholdGbits"],
            doctor=ft["doctor"] if kind.has_doctor or e.alone else "never", doctor_minutes=ft["doctorMinutes"],
            sharp=ft["sharp"] and kind.runs_nccl, topology_file=ft["topologyFile"], fail_on=ft["failOn"],
        ),
    )


def load() -> StackConfig:
    """Read and validate the running stack's configuration, or stop the program with one message."""
    import pulumi

    # The CLI hands a program its whole configuration as one JSON map (PULUMI_CONFIG), which is how
    # unknown and misspelt keys can be seen at all; a declared key set another way (in-process, or
    # PULUMI_CONFIG_<KEY>) is read one by one. Both through the SDK's public runtime API.
    raw: dict[str, Any] = dict(pulumi.runtime.get_config_env())
    for key in [LOCATION_KEY, *(f"{PROJECT}:{k.name}" for k in SCHEMA)]:
        if key not in raw and (value := pulumi.runtime.get_config(key)) is not None:
            raw[key] = value
    try:
        return parse(raw, pulumi.get_stack())
    except ConfigError as err:
        lines = "\n  ".join(err.problems)
        raise pulumi.RunError(
            f"invalid configuration for stack {pulumi.get_stack()!r} (nothing was created):\n  {lines}"
        ) from None
