"""The typed configuration (`StackConfig`) and how it is read: `parse()` validates a raw config
map against `schema.SCHEMA` plus the rules that span several keys; `load()` does it for the running
program and stops it with one message."""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import catalog, choices, defaults, dra, enterprise, kinds, modes, nccl_sizing, pins, rdma_drivers
from core.enterprise import ApiServer, EntraId, Identity, Network
from stack_config import checks, engine, existing, regions
from stack_config.engine import ConfigError, shown
from stack_config.schema import (
    DEFAULT_NCCL_TESTS_IMAGE,
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
class IbPool:
    sku: catalog.Sku  # vmSize's catalog entry, looked up once, at parse
    node_count: int
    name: str
    os_disk_size_gb: int
    min_node_count: int | None = None  # set: the autoscaler runs the pool between this and node_count
    # rdmaDriver's record (core/rdma_drivers.py), looked up once, at parse: the pool's own, read per pool
    rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA

    @property
    def vm_size(self) -> str:
        return self.sku.vm_size


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
class Certifier:
    mode: str  # core.choices.CERTIFIER_MODES
    schedule: str  # cron, or "off"
    max_quarantine_percent: int
    history_size: int
    image: str
    pushgateway_url: str | None = None


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
    ib_pool: IbPool
    rdma_mode: modes.RdmaMode  # rdmaMode's record, looked up once, at parse
    versions: Versions
    fabric_test: FabricTest
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
    def sku(self) -> catalog.Sku:
        return self.ib_pool.sku


def _cross_key_problems(values: dict[str, Any], prefix: str, sku: catalog.Sku | None, kind: kinds.Kind | None,
                        mode: modes.RdmaMode | None) -> list[str]:
    """The rules that span several keys (each key's own check has passed or been reported); `sku` is
    ibPool.vmSize's catalog entry and `kind` its fabric test, `mode` rdmaMode's record (each None when
    unset or its check failed)."""
    problems: list[str] = []
    ib, ft = values["ibPool"], values["fabricTest"] or {}
    if ib and ib["nodeCount"] == 1 and ft.get("enabled"):
        problems.append(
            f"{prefix}ibPool.nodeCount: got 1; the fabric test needs 2 or more nodes to cross InfiniBand "
            f"(or set fabricTest.enabled: false)"
        )
    problems += _system_pool_problems(values["systemPool"], prefix)
    entra = values.get("entraId") or {}
    principal = enterprise.principal_problem(entra.get("kubeloginMode") or "azurecli",
                                             entra.get("deployerPrincipalType"))
    if principal:
        problems.append(f"{prefix}{principal}")
    if ft.get("failOn") == "warn" and ft.get("failOnLowBandwidth") is False:
        problems.append(f"{prefix}fabricTest.failOn: got 'warn', which acts only with fabricTest.failOnLowBandwidth: "
                        f"true; set that too, or remove failOn")
    if sku is None or kind is None:
        return problems
    if ib["nodeCount"]:
        problems += _threshold_problems(sku, ib["nodeCount"], ft, prefix)
    if ft.get("allReduceArgs"):
        why = nccl_sizing.fit_problem(ft["allReduceArgs"], sku)
        if why:
            problems.append(f"{prefix}fabricTest.allReduceArgs: got {shown(ft['allReduceArgs'])}; {why}")
    default_platforms = pins.component("ncclTestsImage").platforms
    if ft.get("enabled") and ft.get("image") == DEFAULT_NCCL_TESTS_IMAGE and sku.cpu_arch not in default_platforms:
        problems.append(
            f"{prefix}fabricTest.image: got the default {DEFAULT_NCCL_TESTS_IMAGE!r}, which is "
            f"{'/'.join(default_platforms)} only; "
            f"{sku.vm_size} is {sku.cpu_arch}: set an {sku.cpu_arch} image with nccl-tests, MPI and sshd"
        )
    # Each fabric test has its own threshold, in its own unit: the other one would be silently ignored.
    thresholds = {k.threshold_key: ft.get(k.threshold_key) for k in kinds.BY_NAME.values()}
    for key, why in kinds.threshold_problems(kind, thresholds).items():
        problems.append(f"{prefix}fabricTest.{key}: got {ft[key]}; {sku.vm_size}: {why}")
    if not kind.has_doctor and ft.get("doctor") == "always":
        problems.append(f"{prefix}fabricTest.doctor: got 'always'; on {sku.vm_size} the fabric test is "
                        f"{kind.test}, which has no doctor: leave it unset (auto) or set never")
    if ft.get("sharp") and not kind.runs_nccl:
        problems.append(f"{prefix}fabricTest.sharp: got true; on {sku.vm_size} the fabric test is "
                        f"{kind.test}, which has no NCCL and no SHARP setting: remove the key "
                        f"or set it to false")
    if ft.get("sharp") and sku.has_mnnvl:
        problems.append(f"{prefix}fabricTest.sharp: got true; {sku.vm_size} runs Azure's Grace Blackwell NCCL "
                        f"settings, which have no SHARP/CollNet (its GB300 values null every SHARP variable): remove "
                        f"the key or set it to false")
    certifier_mode = (values.get("certifier") or {}).get("mode") or choices.DEFAULT_CERTIFIER_MODE
    if ib.get("minNodeCount") == 0 and certifier_mode == "taint" and ft.get("enabled") and kind.retests:
        problems.append(f"{prefix}ibPool.minNodeCount: got 0 with certifier.mode: taint; a new node is admitted only "
                        f"after a test against a peer, and a pool scaled to zero brings its first node up alone, "
                        f"held with no peer: set minNodeCount to 1 or more (that node is the peer), or "
                        f"certifier.mode: label")
    problems += _rdma_driver_problems(ib, prefix, sku)
    if mode and mode.dra and not sku.has_gpus:
        problems.append(f"{prefix}rdmaMode: got {mode.name!r}; {sku.vm_size} has no GPUs, and the DRA claims pair each "
                        f"GPU with its HCA: use shared or sriov")
    elif mode and mode.dra and not dra.can_pair(sku):
        problems.append(f"{prefix}rdmaMode: got {mode.name!r}; no published source says which HCA sits beside which "
                        f"GPU on {sku.vm_size}, so its claims cannot be paired: use shared or sriov")
    return problems


def _rdma_driver_problems(ib: dict[str, Any], prefix: str, sku: catalog.Sku) -> list[str]:
    """ibPool.rdmaDriver against the size's catalog evidence (core/rdma_drivers.py `problem`)."""
    name = ib.get("rdmaDriver")
    why = name and rdma_drivers.problem(sku, rdma_drivers.rdma_driver(name))
    return [f"{prefix}ibPool.rdmaDriver: got {name!r}; {why}"] if why else []


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


def _threshold_problems(sku: catalog.Sku, nodes: int, ft: dict[str, Any], prefix: str) -> list[str]:
    """A threshold the size cannot reach (every run would FAIL) or below the floor (it would not act)."""
    problems: list[str] = []
    gbps, gbits = ft.get("thresholdGbps"), ft.get("p2pThresholdGbits")
    span = checks.allreduce_threshold_range(sku, nodes)
    if gbps is not None and span is not None:
        low, high = span
        if gbps > high:
            problems.append(f"{prefix}fabricTest.thresholdGbps: got {gbps}; {nodes} x {sku.vm_size} cannot reach it: "
                            f"busbw stays below twice the node's InfiniBand rate ({sku.ib_hcas_per_vm} x "
                            f"{sku.ib_link_gbits} Gb/s: {high:g} GB/s); set {math.ceil(low) or 1} to {high:g}")
        elif gbps < low:
            problems.append(f"{prefix}fabricTest.thresholdGbps: got {gbps}; on {sku.vm_size} a run below {low:g} GB/s "
                            f"(35 % of the baseline) is FAIL whatever the threshold, so this one would not act; set "
                            f"{math.ceil(low)} to {high:g}")
    if gbits is not None and not sku.has_gpus and gbits > sku.ib_link_gbits:
        problems.append(f"{prefix}fabricTest.p2pThresholdGbits: got {gbits}; one {sku.ib_generation} link of "
                        f"{sku.vm_size} carries at most {sku.ib_link_gbits} Gb/s: set 1 to {sku.ib_link_gbits}")
    return problems


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


def _matrix_problems(values: dict[str, Any], prefix: str, sku: catalog.Sku | None,
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
    why = sku is not None and mode is not None and dra.kubernetes_problem(values["kubernetesVersion"], sku, mode)
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
    values = {k.name: engine.read(k, ours.get(k.name), f"{prefix}{k.name}", problems) for k in SCHEMA}
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
    ib = values["ibPool"]
    # The axes, each looked up once: the size's catalog entry and the mode's record (their own checks found
    # them; None where a check failed or the key is unset), and the size's fabric-test kind.
    sku = catalog.lookup(ib["vmSize"]) if ib and ib["vmSize"] else None
    kind = kinds.kind_for(sku) if sku else None
    mode = modes.rdma_mode(values["rdmaMode"]) if values["rdmaMode"] is not None else None
    problems += _location_problems(raw)
    problems += _cross_key_problems(values, prefix, sku, kind, mode)
    problems += enterprise.problems(values, prefix, problems)
    problems += existing.problems(values, prefix)
    problems += existing.chart_problems(values, prefix, sku, mode)
    matrix_problems, untested = _matrix_problems(values, prefix, sku, mode)
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
        ib_pool=IbPool(sku=sku, node_count=ib["nodeCount"], name=ib["name"],
                       os_disk_size_gb=ib["osDiskSizeGb"], min_node_count=ib["minNodeCount"],
                       rdma_driver=rdma_drivers.rdma_driver(ib["rdmaDriver"])),
        rdma_mode=mode,
        versions=Versions(**{engine.snake(k): val for k, val in v.items()}),
        fabric_test=FabricTest(
            kind=kind, enabled=ft["enabled"], image=ft["image"],
            all_reduce_args=ft["allReduceArgs"] or nccl_sizing.all_reduce_args_for(sku),
            timeout_minutes=ft["timeoutMinutes"], fail_on_low_bandwidth=ft["failOnLowBandwidth"],
            threshold_gbps=ft["thresholdGbps"], p2p_threshold_gbits=ft["p2pThresholdGbits"],
            doctor=ft["doctor"], doctor_minutes=ft["doctorMinutes"],
            sharp=ft["sharp"], topology_file=ft["topologyFile"], fail_on=ft["failOn"],
        ),
        feature_wait_timeout_minutes=values["featureWaitTimeoutMinutes"],
        certifier=Certifier(mode=ce["mode"], schedule=ce["schedule"], max_quarantine_percent=ce["maxQuarantinePercent"],
                            history_size=ce["historySize"], image=ce["image"], pushgateway_url=ce["pushgatewayUrl"]),
        tags=dict(sorted((values["tags"] or {"project": PROJECT, "stack": stack}).items())),
        protect=values["protect"],
        **enterprise.records(values),
        **existing.records(values),
        untested=untested,
        alerts=Alerts(enabled=values["alerts"]["enabled"]),
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
