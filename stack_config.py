"""The stack's typed configuration: every key, its type, default, description and check, in one table.

`load()` reads `Pulumi.<stack>.yaml` (through Pulumi's config), validates everything, and either
returns a frozen `StackConfig` or stops the program with one `pulumi.RunError` that lists every bad
key with the value received and what is allowed - before any resource is declared.

`parse()` does the same from a plain dict and is what the tests and the policy pack call.
`Pulumi.yaml`'s `config:` block and the README's key table are generated from `SCHEMA`
(`make sync-config`, i.e. `python -m stack_config sync`), and a test keeps them in sync.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import catalog
import fabric
from verify.doctor import DOCTOR_MODES

PROJECT = "aks-infiniband"

# --- pinned versions: each in exactly one place -------------------------------------------------
# AKS supports the three newest GA minors; 1.35 is inside that window in late 2026 (1.34 reached
# upstream end of life on 2026-10-27) and gives Ubuntu 24.04 nodes. Check `az aks get-versions -l <region>`.
DEFAULT_KUBERNETES_VERSION = "1.35"
DEFAULT_VERSIONS: dict[str, str] = {
    # kubernetes-sigs/node-feature-discovery chart (reference/chart-values/node-feature-discovery.*.v0.19.0)
    "nodeFeatureDiscovery": "0.19.0",
    # Mellanox/network-operator chart (reference/chart-values/network-operator.*.v26.4.1)
    "networkOperator": "26.4.1",
    # DOCA-OFED driver container for that operator release (reference/examples/example-nicclusterpolicy_cr.v26.4.1.yaml)
    "docaDriver": "doca3.4.1-26.04-1.1.0.0-1",
    # RDMA shared / SR-IOV device plugin images released with the operator (same example CR)
    "rdmaSharedDevicePlugin": "network-operator-v26.4.1",
    "sriovDevicePlugin": "network-operator-v26.4.1",
    # NVIDIA/gpu-operator chart; published versions carry a leading v
    # (reference/chart-values/gpu-operator.Chart.v26.7.0.yaml)
    "gpuOperator": "v26.7.0",
    # volcano-sh/volcano release tag whose installer/volcano-development.yaml is applied
    "volcano": "v1.15.1",
}
VERSION_DESCRIPTIONS = {
    "nodeFeatureDiscovery": "node-feature-discovery Helm chart version.",
    "networkOperator": "NVIDIA Network Operator Helm chart version.",
    "docaDriver": "DOCA-OFED driver container tag (nvcr.io/nvidia/mellanox/doca-driver) in the NicClusterPolicy.",
    "rdmaSharedDevicePlugin": "k8s-rdma-shared-dev-plugin image tag (rdmaMode shared).",
    "sriovDevicePlugin": "sriov-network-device-plugin image tag (rdmaMode sriov).",
    "gpuOperator": "NVIDIA GPU Operator Helm chart version (with its leading v).",
    "volcano": "Volcano release tag whose installer/volcano-development.yaml is applied.",
}
# nccl-tests (/opt/nccl_tests/build/all_reduce_perf) + HPC-X OpenMPI + sshd, fully pinned; the image of
# reference/examples/mpi-operator_nccl-test-distributed-h100-64-mpijob.yaml
# (coreweave/nccl-tests@06e94b2 Dockerfile.ubuntu22).
DEFAULT_NCCL_TESTS_IMAGE = "ghcr.io/coreweave/nccl-tests:12.9.1-devel-ubuntu22.04-nccl2.28.3-1-8b67957"
# all_reduce_perf from 8 B doubling to -e: the largest rows judge the fabric. -e is derived per SKU
# (all_reduce_args_for): with its data check on (the default) nccl-tests allocates send, receive and
# expected buffers of -e bytes each (nccl-tests src/common.cu AllocateBuffs), so 16G needs 48 GiB
# per GPU and would not fit an A100 40GB.
MAX_ALL_REDUCE_GIB = 16
GPU_MEMORY_HEADROOM_GB = 4  # NCCL's own buffers and the CUDA context


def all_reduce_buffers_gib(max_gib: float, check: bool = True) -> float:
    """GPU memory all_reduce_perf needs per GPU for messages up to `max_gib` GiB."""
    return (3 if check else 2) * max_gib + GPU_MEMORY_HEADROOM_GB


def all_reduce_args_for(sku: catalog.Sku) -> str:
    """The default all_reduce_perf arguments: up to 16 GiB, or the largest power of two that fits."""
    top = MAX_ALL_REDUCE_GIB
    while top > 1 and all_reduce_buffers_gib(top) > sku.gpu_memory_gb:
        top //= 2
    return f"-b 8 -e {top}G -f 2 -g 1"


def _max_bytes_gib(args: str) -> tuple[float | None, bool]:
    """(-e in GiB, data check on) from all_reduce_perf arguments; -e defaults to 32M, -c to 1."""
    tokens, max_gib, check = args.split(), 32 / 1024, True
    for flag, value in zip(tokens, tokens[1:], strict=False):
        if flag in ("-e", "--maxbytes"):
            m = re.fullmatch(r"(\d+)([KMG]?)", value)
            if not m:
                return None, check
            max_gib = int(m.group(1)) / {"": 1 << 30, "K": 1 << 20, "M": 1 << 10, "G": 1}[m.group(2)]
        if flag in ("-c", "--check"):
            check = value != "0"
    return max_gib, check

MAX_NODES = 100  # an AKS agent pool holds at most 1000 nodes; a fabric test beyond 100 is a mistake here
SYSTEM_POOL_NAME = "system"  # the cluster's CPU pool; an IB pool of that name would overwrite it


class ConfigError(ValueError):
    """One or more configuration keys are invalid. `problems` holds one line per key."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


# --- checks: each returns None when fine, else what is allowed ----------------------------------
Check = Callable[[Any], "str | None"]

_VERSION_RE = re.compile(r"^v?\d+\.\d+(\.\d+)?([-+.][0-9A-Za-z.+-]+)?$")
_UNPINNED = {"latest", "master", "main", "stable", "edge", "nightly", "head"}


def _int_range(lo: int, hi: int) -> Check:
    return lambda v: None if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi else (
        f"an integer from {lo} to {hi}"
    )


def _pinned_version(v: Any) -> str | None:
    if isinstance(v, str) and v.strip().lower() not in _UNPINNED and _VERSION_RE.match(v):
        return None
    return "a pinned release version such as 1.2.3 or v1.2.3 (not latest, master or empty)"


def _pinned_tag(v: Any) -> str | None:
    # image tags of the NVIDIA releases are not semver ("doca3.4.1-26.04-...", "network-operator-v26.4.1")
    if isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", v) and v.lower() not in _UNPINNED:
        return None
    return "a pinned image tag (letters, digits, . _ -; not latest)"


def _pinned_image(v: Any) -> str | None:
    if not isinstance(v, str) or not v or v != v.strip():
        return "an image reference with a pinned tag or digest, e.g. registry/repo:1.2.3"
    if "@sha256:" in v:
        return None
    name, _, tag = v.rpartition(":")
    if not name or "/" in tag or _pinned_tag(tag) is not None:
        return "an image reference with a pinned tag or digest, e.g. registry/repo:1.2.3 (not :latest, not untagged)"
    return None


def _k8s_version(v: Any) -> str | None:
    if isinstance(v, str) and re.fullmatch(r"1\.\d{2}(\.\d+)?", v):
        return None
    return "a Kubernetes version that AKS offers, as MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 1.35"


def _regex(pattern: str, allowed: str) -> Check:
    rx = re.compile(pattern)
    return lambda v: None if isinstance(v, str) and rx.fullmatch(v) else allowed


def _one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"one of: {', '.join(choices)}"


def _ib_size(v: Any) -> str | None:
    try:
        catalog.lookup(v)
        return None
    except KeyError:
        return f"an InfiniBand-capable size from the catalog: {', '.join(catalog.supported_sizes())}"


def _tags(v: Any) -> str | None:
    if not isinstance(v, dict):
        return "a map of tag name to string value"
    if len(v) > 50:
        return "at most 50 tags (Azure's limit)"
    for k, val in v.items():
        if not isinstance(k, str) or not re.fullmatch(r"[^<>%&\\?/]{1,512}", k):
            return f"tag names of 1-512 characters without < > % & \\ ? / (got {k!r})"
        if not isinstance(val, str) or len(val) > 256:
            return f"string tag values of at most 256 characters (tag {k!r})"
    return None


def _args(v: Any) -> str | None:
    # These are handed to all_reduce_perf through a shell: keep them to plain flags and numbers.
    if isinstance(v, str) and re.fullmatch(r"[-A-Za-z0-9 .=]+", v) and v.strip():
        return None
    return "all_reduce_perf flags such as '-b 8 -e 16G -f 2 -g 1' (letters, digits, spaces, - . = only)"


def _pool_name(v: Any) -> str | None:
    if isinstance(v, str) and re.fullmatch(r"[a-z][a-z0-9]{0,11}", v) and v != SYSTEM_POOL_NAME:
        return None
    return f"1-12 lowercase letters and digits, starting with a letter, not {SYSTEM_POOL_NAME!r} (the system pool)"


def _optional(check: Check) -> Check:
    return lambda v: None if v is None else check(v)


# --- the schema ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Key:
    name: str
    type: str  # Pulumi config type: string | integer | boolean | object
    description: str
    default: Any = None  # None with required=False means "no default: derived or off"
    check: Check | None = None
    required: bool = False
    fields: tuple[Key, ...] = ()  # for objects with a fixed set of fields
    default_doc: str | None = None  # how the default is described when it is derived


SCHEMA: tuple[Key, ...] = (
    Key("resourceGroupName", "string", "Resource group that holds the cluster (created by the stack).",
        default_doc="aks-infiniband-<stack>",
        check=_regex(r"[-\w.()]{0,89}[-\w()]", "1-90 letters, digits, - _ . ( ), not ending in .")),
    Key("clusterName", "string", "AKS cluster name; also the DNS prefix.",
        default_doc="aks-ib-<stack>",
        # It doubles as the DNS prefix, which is stricter than the name: 1-54 characters, no underscore.
        check=_regex(r"[A-Za-z0-9](?:[-A-Za-z0-9]{0,52}[A-Za-z0-9])?",
                     "1-54 letters, digits and -, starting and ending with a letter or digit "
                     "(it is also the cluster's DNS prefix)")),
    Key("kubernetesVersion", "string",
        "Pinned Kubernetes version of the cluster (AKS picks the newest patch of a MAJOR.MINOR).",
        default=DEFAULT_KUBERNETES_VERSION, check=_k8s_version),
    Key("systemPool", "object", "The small CPU pool that runs system pods and the operators' controllers. "
        "Set it at creation: AKS does not change a cluster's inline pool in place.",
        fields=(
            Key("vmSize", "string", "VM size of the system pool.", default="Standard_D4s_v5",
                check=_regex(r"Standard_[A-Za-z0-9_]+", "an Azure VM size such as Standard_D4s_v5")),
            Key("nodeCount", "integer", "Nodes in the system pool.", default=2, check=_int_range(1, 10)),
        )),
    Key("ibPool", "object", "The InfiniBand node pool: size from the SKU catalog, node count, disk.", required=True,
        fields=(
            Key("vmSize", "string", "InfiniBand-capable VM size (see the SKU catalog).", required=True, check=_ib_size),
            Key("nodeCount", "integer", "Nodes in the pool; 2 or more to test the fabric.", required=True,
                check=_int_range(1, MAX_NODES)),
            Key("name", "string", "Agent pool name (Linux: 1-12 lowercase letters and digits).", default="ibpool",
                check=_pool_name),
            Key("osDiskSizeGb", "integer", "OS disk size in GB (driver containers and the test image land here).",
                default=256, check=_int_range(128, 2048)),
        )),
    Key("rdmaMode", "string",
        "RDMA device plugin: `shared` (rdma/shared_ib, one per pod) or `sriov` (rdma/ib, one per HCA).",
        default="shared", check=_one_of(*fabric.RDMA_MODES)),
    Key("versions", "object", "Pinned chart and image versions; override one key at a time.",
        fields=tuple(Key(k, "string", VERSION_DESCRIPTIONS[k], default=v,
                         check=_pinned_tag if k in ("docaDriver", "rdmaSharedDevicePlugin", "sriovDevicePlugin")
                         else _pinned_version)
                     for k, v in DEFAULT_VERSIONS.items())),
    Key("fabricTest", "object", "The fabric test job that proves RDMA across nodes, and how its result is judged.",
        fields=(
            Key("enabled", "boolean", "Run the test job and report its result as stack outputs.", default=True),
            Key("image", "string", "Image with nccl-tests, OpenMPI and sshd.", default=DEFAULT_NCCL_TESTS_IMAGE,
                check=_pinned_image),
            Key("allReduceArgs", "string", "Arguments of all_reduce_perf (its buffers must fit the GPU's memory).",
                default_doc="-b 8 -e 16G -f 2 -g 1; -e 8G on 40 GB GPUs", check=_args),
            Key("timeoutMinutes", "integer", "Deadline of the job and of the wait for its result.", default=60,
                check=_int_range(5, 720)),
            Key("failOnLowBandwidth", "boolean", "Fail `pulumi up` when the verdict is FAIL.", default=False),
            Key("thresholdGbps", "integer", "GPU sizes: override the catalog's all-reduce fail threshold (GB/s busbw).",
                default_doc="from the SKU catalog", check=_optional(_int_range(1, 3200))),
            Key("doctor", "string",
                "GPU sizes: the fabric doctor (per-node checks, pairwise all-reduces, per-HCA ib_write_bw) that "
                "names the node or HCA behind a slow fabric: `auto` runs it only when the all-nodes run is not "
                "PASS, `always`, or `never`.", default="auto", check=_one_of(*DOCTOR_MODES)),
            Key("doctorMinutes", "integer", "The most time the doctor may add to the job (its steps are skipped "
                "once it is spent); added to the job's deadline unless doctor is never.", default=15,
                check=_int_range(1, 120)),
            Key("p2pThresholdGbits", "integer",
                "CPU-only sizes (HB/HX): override the catalog's point-to-point fail threshold (Gb/s, bits, at the "
                "largest message).", default_doc="from the SKU catalog", check=_optional(_int_range(1, 1600))),
        )),
    Key("featureWaitTimeoutMinutes", "integer", "How long to wait for AKSInfinibandSupport to reach Registered.",
        default=30, check=_int_range(1, 120)),
    Key("tags", "object", "Azure tags on every resource that takes them.", default_doc="{project, stack}",
        check=_tags),
    Key("protect", "boolean", "Protect the resource group, cluster and node pool from deletion (production stacks).",
        default=False),
)
SCHEMA_BY_NAME = {k.name: k for k in SCHEMA}
LOCATION_KEY = "azure-native:location"


# --- the typed result ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SystemPool:
    vm_size: str
    node_count: int


@dataclass(frozen=True)
class IbPool:
    vm_size: str
    node_count: int
    name: str
    os_disk_size_gb: int

    @property
    def sku(self) -> catalog.Sku:
        return catalog.lookup(self.vm_size)


@dataclass(frozen=True)
class Versions:
    node_feature_discovery: str
    network_operator: str
    doca_driver: str
    rdma_shared_device_plugin: str
    sriov_device_plugin: str
    gpu_operator: str
    volcano: str


@dataclass(frozen=True)
class FabricTest:
    enabled: bool
    image: str
    all_reduce_args: str
    timeout_minutes: int
    fail_on_low_bandwidth: bool
    threshold_gbps: float | None  # GPU sizes: all-reduce busbw, GB/s
    p2p_threshold_gbits: float | None = None  # CPU-only sizes: point-to-point link bandwidth, Gb/s
    doctor: str = "auto"  # DOCTOR_MODES
    doctor_minutes: int = 15  # the doctor's time budget, added to the job's deadline unless never


@dataclass(frozen=True)
class StackConfig:
    stack: str
    location: str
    resource_group_name: str
    cluster_name: str
    kubernetes_version: str
    system_pool: SystemPool
    ib_pool: IbPool
    rdma_mode: str
    versions: Versions
    fabric_test: FabricTest
    feature_wait_timeout_minutes: int
    tags: Mapping[str, str] = field(default_factory=dict)
    protect: bool = False

    @property
    def sku(self) -> catalog.Sku:
        return self.ib_pool.sku

    @property
    def register_ib_feature(self) -> bool:
        return self.sku.ib_feature_flag


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _coerce(key: Key, raw: Any, path: str, problems: list[str]) -> Any:
    """Turn a raw config value (strings from the CLI, or typed values from YAML) into the key's type."""
    shown = json.dumps(raw) if not isinstance(raw, str) else repr(raw)
    if key.type == "integer":
        if isinstance(raw, bool):
            problems.append(f"{path}: got {shown}; expected an integer")
            return None
        if isinstance(raw, int):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
            return int(raw)
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        problems.append(f"{path}: got {shown}; expected an integer")
        return None
    if key.type == "boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        problems.append(f"{path}: got {shown}; expected true or false")
        return None
    if key.type == "string":
        if isinstance(raw, str):
            return raw
        problems.append(f"{path}: got {shown}; expected a string")
        return None
    # object
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            problems.append(f"{path}: got {shown}; expected an object (a YAML mapping)")
            return None
    if not isinstance(value, dict):
        problems.append(f"{path}: got {json.dumps(value)}; expected an object (a YAML mapping)")
        return None
    return value


def _read(key: Key, raw: Any, path: str, problems: list[str]) -> Any:
    """Coerce, fill defaults, recurse into objects, and check. Returns the value (None on error)."""
    if raw == "" and key.default is None and not key.required and key.type == "string":
        raw = None  # Pulumi.yaml's default "" for a derived value (see pulumi_yaml_config)
    if raw is None:
        if key.required:
            allowed = key.check(None) if key.check else None
            hint = f"; {allowed}" if allowed else ""
            problems.append(f"{path}: is required but not set{hint}")
            return None
        raw = key.default
        if raw is None and not key.fields:
            return None
    value = _coerce(key, raw, path, problems) if raw is not None else {}
    if value is None:
        return None
    if key.fields:
        known = {f.name for f in key.fields}
        for unknown in sorted(set(value) - known):
            problems.append(f"{path}.{unknown}: unknown key; {key.name} takes: {', '.join(sorted(known))}")
        value = {f.name: _read(f, value.get(f.name), f"{path}.{f.name}", problems) for f in key.fields}
        return value
    if key.check is not None:
        allowed = key.check(value)
        if allowed is not None:
            shown = repr(value) if isinstance(value, str) else json.dumps(value)
            problems.append(f"{path}: got {shown}; expected {allowed}")
            return None
    return value


def parse(raw: Mapping[str, Any], stack: str) -> StackConfig:
    """Validate a stack's configuration. `raw` maps full keys ("aks-infiniband:ibPool",
    "azure-native:location", ...) to values as the CLI hands them (strings; objects as JSON) or as
    typed YAML values. Raises ConfigError listing every problem."""
    problems: list[str] = []
    prefix = f"{PROJECT}:"
    ours = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}
    for unknown in sorted(set(ours) - set(SCHEMA_BY_NAME)):
        problems.append(
            f"{prefix}{unknown}: unknown key; allowed keys: {', '.join(k.name for k in SCHEMA)}"
        )
    # A misspelt namespace would make a key silently belong to nobody: catch the near misses.
    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if name and namespace != PROJECT and difflib.get_close_matches(namespace, [PROJECT], n=1, cutoff=0.8):
            problems.append(f"{key}: unknown namespace {namespace!r}; did you mean {prefix}{name}?")
    values = {k.name: _read(k, ours.get(k.name), f"{prefix}{k.name}", problems) for k in SCHEMA}
    # Names derived from the stack name are checked like set ones (a stack "prod.eu" gives no valid DNS prefix).
    for name, derived in (("resourceGroupName", f"{PROJECT}-{stack}"), ("clusterName", f"aks-ib-{stack}")):
        if values[name] is None and ours.get(name) in (None, ""):  # unset, or Pulumi.yaml's ""
            allowed = SCHEMA_BY_NAME[name].check(derived)
            if allowed is not None:
                problems.append(f"{prefix}{name}: got {derived!r} (derived from the stack name); expected {allowed}; "
                                f"set {name} explicitly")
            values[name] = derived

    location = raw.get(LOCATION_KEY)
    if not isinstance(location, str) or not re.fullmatch(r"[a-z][a-z0-9]{2,39}", location or ""):
        problems.append(
            f"{LOCATION_KEY}: got {location!r}; expected an Azure region name such as eastus "
            f"(set it with `pulumi config set azure-native:location eastus`)"
        )
    if values["ibPool"] and values["ibPool"]["nodeCount"] == 1 and (values["fabricTest"] or {}).get("enabled"):
        problems.append(
            f"{prefix}ibPool.nodeCount: got 1; the fabric test needs 2 or more nodes to cross InfiniBand "
            f"(or set fabricTest.enabled: false)"
        )
    if values["ibPool"] and values["ibPool"]["vmSize"] and values["kubernetesVersion"]:
        sku = catalog.lookup(values["ibPool"]["vmSize"])
        minor = int(values["kubernetesVersion"].split(".")[1])
        if sku.min_kubernetes_minor and minor < sku.min_kubernetes_minor:
            problems.append(
                f"{prefix}kubernetesVersion: got {values['kubernetesVersion']!r}; {sku.vm_size} needs 1."
                f"{sku.min_kubernetes_minor} or newer (its nodes need the Ubuntu 24.04 image)"
            )
    ft_cfg = values["fabricTest"] or {}
    if values["ibPool"] and values["ibPool"]["vmSize"] and ft_cfg.get("allReduceArgs"):
        sku = catalog.lookup(values["ibPool"]["vmSize"])
        max_gib, check = _max_bytes_gib(ft_cfg["allReduceArgs"])
        need = all_reduce_buffers_gib(max_gib, check) if max_gib is not None else None
        if sku.has_gpus and (need is None or need > sku.gpu_memory_gb):
            problems.append(
                f"{prefix}fabricTest.allReduceArgs: got {ft_cfg['allReduceArgs']!r}; "
                + ("-e must be a size such as 8G or 512M" if need is None else
                   f"its buffers need {need:g} GB per GPU ({3 if check else 2} x -e + {GPU_MEMORY_HEADROOM_GB} GB), "
                   f"{sku.vm_size} has {sku.gpu_memory_gb} GB: lower -e (e.g. {all_reduce_args_for(sku)!r})")
            )
    if values["ibPool"] and values["ibPool"]["vmSize"] and ft_cfg.get("enabled") and (
        ft_cfg.get("image") == DEFAULT_NCCL_TESTS_IMAGE
    ):
        sku = catalog.lookup(values["ibPool"]["vmSize"])
        if sku.cpu_arch != "amd64":
            problems.append(
                f"{prefix}fabricTest.image: got the default {DEFAULT_NCCL_TESTS_IMAGE!r}, which is amd64-only; "
                f"{sku.vm_size} is {sku.cpu_arch}: set an {sku.cpu_arch} image with nccl-tests, MPI and sshd"
            )
    if values["ibPool"] and values["ibPool"]["vmSize"]:
        # Each fabric test has its own threshold, in its own unit: the other one would be silently ignored.
        sku = catalog.lookup(values["ibPool"]["vmSize"])
        wrong, right, test = (("p2pThresholdGbits", "thresholdGbps", "the NCCL all-reduce, judged in GB/s busbw")
                              if sku.has_gpus else
                              ("thresholdGbps", "p2pThresholdGbits", "MPI point to point, judged in Gb/s (bits)"))
        if not sku.has_gpus and ft_cfg.get("doctor") == "always":
            problems.append(f"{prefix}fabricTest.doctor: got 'always'; on {sku.vm_size} the fabric test is MPI point "
                            f"to point between two nodes, which has no doctor: leave it unset (auto) or never")
        if ft_cfg.get(wrong) is not None:
            problems.append(f"{prefix}fabricTest.{wrong}: got {ft_cfg[wrong]}; on {sku.vm_size} the fabric test is "
                            f"{test}: set fabricTest.{right} instead")
    if problems:
        raise ConfigError(problems)

    v, ib, sp, ft = values["versions"], values["ibPool"], values["systemPool"], values["fabricTest"]
    sku = catalog.lookup(ib["vmSize"])
    return StackConfig(
        stack=stack,
        location=location,
        resource_group_name=values["resourceGroupName"],
        cluster_name=values["clusterName"],
        kubernetes_version=values["kubernetesVersion"],
        system_pool=SystemPool(vm_size=sp["vmSize"], node_count=sp["nodeCount"]),
        ib_pool=IbPool(vm_size=sku.vm_size, node_count=ib["nodeCount"], name=ib["name"],
                       os_disk_size_gb=ib["osDiskSizeGb"]),
        rdma_mode=values["rdmaMode"],
        versions=Versions(**{_snake(k): val for k, val in v.items()}),
        fabric_test=FabricTest(
            enabled=ft["enabled"], image=ft["image"], all_reduce_args=ft["allReduceArgs"] or all_reduce_args_for(sku),
            timeout_minutes=ft["timeoutMinutes"], fail_on_low_bandwidth=ft["failOnLowBandwidth"],
            threshold_gbps=ft["thresholdGbps"], p2p_threshold_gbits=ft["p2pThresholdGbits"],
            doctor=ft["doctor"], doctor_minutes=ft["doctorMinutes"],
        ),
        feature_wait_timeout_minutes=values["featureWaitTimeoutMinutes"],
        tags=dict(sorted((values["tags"] or {"project": PROJECT, "stack": stack}).items())),
        protect=values["protect"],
    )


def load() -> StackConfig:
    """Read and validate the running stack's configuration, or stop the program with one message."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    raw: dict[str, Any] = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    try:
        return parse(raw, pulumi.get_stack())
    except ConfigError as err:
        lines = "\n  ".join(err.problems)
        raise pulumi.RunError(
            f"invalid configuration for stack {pulumi.get_stack()!r} (nothing was created):\n  {lines}"
        ) from None


# --- generated documents ------------------------------------------------------------------------
def _default_text(key: Key) -> str:
    if key.default_doc:
        return key.default_doc
    if key.fields:
        return "see fields"
    if key.required:
        return "required"
    return json.dumps(key.default) if key.default is not None else "-"


PULUMI_YAML_HEAD = """\
# The project. Every key of the `aks-infiniband:` namespace is declared below with its type and a
# description; defaults and checks live in stack_config.py (one place), which generates this file:
#   make sync-config      (python -m stack_config sync; a test keeps the two in sync)
# `type: object` needs Pulumi CLI >= 3.187. `azure-native:location` belongs to the provider's
# namespace, so it is set in each stack file and not declared here.
name: aks-infiniband
description: >-
  AKS with InfiniBand RDMA from inside pods (Network Operator, GPU Operator, NFD, Volcano),
  proven by an NCCL all-reduce.
runtime:
  name: python
  options:
    toolchain: pip
    virtualenv: .venv
"""


def pulumi_yaml() -> str:
    import yaml

    return PULUMI_YAML_HEAD + yaml.safe_dump({"config": pulumi_yaml_config()}, sort_keys=False, width=100)


def _pulumi_default(key: Key) -> Any:
    """What Pulumi.yaml declares as a key's default. The CLI refuses a stack that leaves a project
    key without a default unset, so every optional key has one: the value itself for scalars, `{}`
    for objects (their fields fall back one by one here), and "" for names derived from the stack."""
    if key.type == "object":
        return {}
    return "" if key.default is None else key.default


def pulumi_yaml_config() -> dict[str, Any]:
    """The `config:` block of Pulumi.yaml: every key of the project namespace, type, description and
    (for every key but the required ones) a default."""
    block: dict[str, Any] = {}
    for key in SCHEMA:
        desc = key.description
        if key.fields:
            desc += " Fields: " + "; ".join(f"{f.name} ({f.type}, {_default_text(f)})" for f in key.fields) + "."
        block[key.name] = {"type": key.type, "description": desc}
        if not key.required:
            block[key.name]["default"] = _pulumi_default(key)
    return block


def markdown_table() -> str:
    rows = ["| key | type | default | what it does |", "|---|---|---|---|",
            f"| `{LOCATION_KEY}` | string | required | Azure region of every resource. |"]
    for key in SCHEMA:
        rows.append(f"| `{key.name}` | {key.type} | {_default_text(key)} | {key.description} |")
        for f in key.fields:
            rows.append(f"| `{key.name}.{f.name}` | {f.type} | `{_default_text(f)}` | {f.description} |")
    return "\n".join(rows) + "\n"


TABLE_START, TABLE_END = "<!-- config-table:start -->\n", "<!-- config-table:end -->\n"


def sync_files(root: str = ".") -> None:
    """Rewrite Pulumi.yaml and the README's key table from SCHEMA (`make sync-config`)."""
    from pathlib import Path

    Path(root, "Pulumi.yaml").write_text(pulumi_yaml())
    readme = Path(root, "README.md")
    text = readme.read_text()
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    readme.write_text(head + TABLE_START + markdown_table() + TABLE_END + tail)


if __name__ == "__main__":
    import sys

    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "pulumi-yaml":
        sys.stdout.write(pulumi_yaml())
    elif what == "markdown":
        sys.stdout.write(markdown_table())
    elif what == "sync":
        sync_files()
    else:
        sys.exit("usage: python -m stack_config pulumi-yaml|markdown|sync")
