"""The guardrails of the policy pack, as pure functions: `(args, report_violation) -> None`.

`args` is what CrossGuard hands a resource validation (`pulumi_policy.ResourceValidationArgs`):
`resource_type`, `name`, `urn` and `props`, the resource's inputs in the engine's (camelCase) form.
The analyzer gives `props` as read-only Mapping/Sequence proxies and numbers as floats, so nothing
here tests for `dict`/`list` or `int`. No `pulumi_policy` import: the tests call these functions
with inputs taken from the offline render, and `__main__.py` wraps them in a `PolicyPack`.

The facts come from the project's own modules (`core.catalog` for SKUs, `core.fabric` for resource
names, `core.pins` for what a pinned version, tag or image looks like); the project root must be on `sys.path`,
which `policy/__main__.py` arranges. The pins are the same predicates the configuration schema and
the component Args call: three copies of that rule drifted apart once, and a value passed one check
and failed another after resources existed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core import catalog, fabric, modes, pins

ReportViolation = Callable[..., None]  # report_violation(message, urn=None)
Validate = Callable[[Any, ReportViolation], None]

AGENT_POOL = "azure-native:containerservice:AgentPool"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
HELM_RELEASES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
MANIFEST_FILES = ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml:ConfigFile")
# Manifests applied from their content (Volcano's checked release manifest, components/platform/volcano.py).
CONFIG_GROUPS = ("kubernetes:yaml/v2:ConfigGroup", "kubernetes:yaml:ConfigGroup")
NIC_CLUSTER_POLICY = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
VOLCANO_JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"

# Capabilities that amount to a privileged container.
PRIVILEGED_CAPABILITIES = frozenset({"ALL", "SYS_ADMIN"})


# --- helpers ------------------------------------------------------------------------------------
def _is_map(v: Any) -> bool:
    return isinstance(v, Mapping)


def _is_seq(v: Any) -> bool:
    return isinstance(v, Sequence) and not isinstance(v, (str, bytes))


def _get(v: Any, *path: str) -> Any:
    for key in path:
        if not _is_map(v):
            return None
        v = v.get(key)
    return v


def _seq(v: Any) -> Sequence[Any]:
    return v if _is_seq(v) else ()


@dataclass(frozen=True)
class Container:
    where: str  # e.g. "task mpiworker, container mpiworker"
    spec: Mapping[str, Any]
    pod: Mapping[str, Any]


def job_containers(props: Mapping[str, Any]) -> Iterator[Container]:
    """Every container and init container of every task of a Volcano Job."""
    for task in _seq(_get(props, "spec", "tasks")):
        pod = _get(task, "template", "spec") or {}
        for kind in ("initContainers", "containers"):
            for c in _seq(_get(pod, kind)):
                yield Container(f"task {_get(task, 'name')!r}, {kind[:-1]} {_get(c, 'name')!r}", c, pod)


def _rdma_resources(resources: Any) -> list[str]:
    """The limits that are some RDMA mode's resource for the HCAs (core/modes.py)."""
    return [k for k in (_get(resources, "limits") or {}) if str(k) in modes.extended_resources()]


def _rdma_names() -> str:
    return " or ".join(modes.extended_resources())


# --- 1. the IB size is in the catalog -----------------------------------------------------------
def ib_size_in_catalog(args: Any, report_violation: ReportViolation) -> None:
    """Every standalone AgentPool of this stack is the InfiniBand pool: its size must be in the SKU
    catalog (the system pool lives inside the ManagedCluster and is not an AgentPool)."""
    if args.resource_type != AGENT_POOL:
        return
    size = _get(args.props, "vmSize")
    try:
        catalog.lookup(size)
    except KeyError:
        report_violation(
            f"AgentPool {args.name!r}: vmSize {size!r} is not an InfiniBand-capable size of the SKU catalog; "
            f"use one of {', '.join(catalog.supported_sizes())}"
        )


# --- 2. chart and image versions are pinned -----------------------------------------------------
def _walk_version_keys(v: Any, path: str) -> Iterator[tuple[str, Any]]:
    if _is_map(v):
        for k, x in v.items():
            p = f"{path}.{k}" if path else str(k)
            if k in ("tag", "version") and not _is_map(x):
                yield p, x
            elif k == "image" and isinstance(x, str) and ":" in x.rsplit("/", 1)[-1]:
                yield p, x
            else:
                yield from _walk_version_keys(x, p)
    elif _is_seq(v):
        for i, x in enumerate(v):
            yield from _walk_version_keys(x, f"{path}[{i}]")


def versions_pinned(args: Any, report_violation: ReportViolation) -> None:
    """Helm charts carry a pinned `version`; image tags set in Helm values, in the NicClusterPolicy and
    in the Volcano job are pinned; a manifest fetched from a URL names a release tag, not a branch."""
    props, t = args.props, args.resource_type
    if t in HELM_RELEASES:
        version = _get(props, "version")
        if not pins.CHART_VERSION.ok(version):
            report_violation(f"Helm chart {_get(props, 'chart')!r} ({args.name}): version {version!r} is not a "
                             f"pinned release (set an exact chart version, not latest or empty)")
        for path, value in _walk_version_keys(_get(props, "values"), "values"):
            ok = (pins.IMAGE_REF if path.endswith(".image") else pins.IMAGE_TAG).ok(value)
            if not ok:
                report_violation(f"Helm chart {_get(props, 'chart')!r} ({args.name}): {path} = {value!r} is not pinned")
    elif t == NIC_CLUSTER_POLICY:
        for path, comp in _image_components(_get(props, "spec"), "spec"):
            image, version = _get(comp, "image"), _get(comp, "version")
            if isinstance(image, str) and ("@" in image or ":" in image.rsplit("/", 1)[-1]):
                ok = pins.IMAGE_REF.ok(image)
            else:  # the operator builds the image from repository, image and version
                ok = (pins.DOCA_TAG if path == "spec.ofedDriver" else pins.IMAGE_TAG).ok(version)
            if not ok:
                report_violation(f"NicClusterPolicy {path}: image {image!r} version {version!r} is not pinned "
                                 f"(set the release tag of the image)")
    elif t == VOLCANO_JOB:
        for c in job_containers(props):
            image = _get(c.spec, "image")
            if not pins.IMAGE_REF.ok(image):
                report_violation(f"Volcano Job {args.name!r} {c.where}: image {image!r} is not pinned "
                                 f"(use a tag other than latest, or a digest)")
    elif t in MANIFEST_FILES or t in CONFIG_GROUPS:
        files = _get(props, "files") if t in CONFIG_GROUPS else [_get(props, "file")]
        for file in files if _is_seq(files) else []:
            if isinstance(file, str) and re.match(r"https?://", file):
                report_violation(f"manifest {args.name!r}: {file} is fetched at deploy time, so the plan cannot "
                                 f"show its objects and a changed upstream file changes the cluster with no diff "
                                 f"(apply a sha256-checked local copy's content, as components/platform/volcano.py)")
        file = files[0] if _is_seq(files) and files else None
        if isinstance(file, str) and re.match(r"https?://", file):
            segments = file.split("/")
            # a release tag among the path's segments (the Volcano manifest's: v1.15.1), no branch name
            moving = any(s.lower() in pins.UNPINNED - {""} for s in segments)
            if moving or not any(pins.VOLCANO_TAG.ok(s) or pins.CHART_VERSION.ok(s) for s in segments):
                report_violation(f"manifest {args.name!r}: {file} does not name a release tag (a branch such as "
                                 f"master changes under you)")


def _images(v: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every full image reference (an `image` string with a tag or digest) anywhere in `v`."""
    if _is_map(v):
        for k, x in v.items():
            p = f"{path}.{k}" if path else str(k)
            if k == "image" and isinstance(x, str) and ("@" in x or ":" in x.rsplit("/", 1)[-1]):
                yield p, x
            else:
                yield from _images(x, p)
    elif _is_seq(v):
        for i, x in enumerate(v):
            yield from _images(x, f"{path}[{i}]")


def images_by_digest(args: Any, report_violation: ReportViolation) -> None:
    """Advisory: an image the stack names by tag only (a tag can be re-pushed; `name:tag@sha256:...`
    cannot change). Images an operator builds from repository + version and the charts' own images
    are the operators' release sets, pinned by the chart version (docs/upgrading-pins.md)."""
    if args.resource_type.startswith(("kubernetes:helm.sh/", "kubernetes:mellanox.com/")):
        return
    for path, image in _images(args.props, ""):
        if pins.IMAGE_REF.ok(image) and not pins.is_digest_pinned(image):
            report_violation(f"{args.resource_type.rsplit(':', 1)[-1]} {args.name!r} {path}: image {image!r} is "
                             f"pinned by tag only; pin it as name:tag@sha256:<digest> (docs/upgrading-pins.md)")


def _image_components(v: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every mapping with an `image` key inside a NicClusterPolicy spec (ofedDriver, device plugins, ...)."""
    if _is_map(v):
        if "image" in v:
            yield path, v
        for k, x in v.items():
            if k != "image":
                yield from _image_components(x, f"{path}.{k}")
    elif _is_seq(v):
        for i, x in enumerate(v):
            yield from _image_components(x, f"{path}[{i}]")


# --- 3. no public node IPs ----------------------------------------------------------------------
def no_public_node_ips(args: Any, report_violation: ReportViolation) -> None:
    """Nodes are reached through the cluster, never from the internet."""
    if args.resource_type == AGENT_POOL:
        if _get(args.props, "enableNodePublicIP") is True:
            report_violation(f"AgentPool {args.name!r}: enableNodePublicIP is true; nodes must not have public IPs")
    elif args.resource_type == MANAGED_CLUSTER:
        for i, profile in enumerate(_seq(_get(args.props, "agentPoolProfiles"))):
            if _get(profile, "enableNodePublicIP") is True:
                report_violation(f"ManagedCluster {args.name!r}: agentPoolProfiles[{i}] ({_get(profile, 'name')!r}) "
                                 f"has enableNodePublicIP true; nodes must not have public IPs")


# --- 4. job pods are not privileged and request the RDMA resource -------------------------------
def job_pods_unprivileged_with_rdma(args: Any, report_violation: ReportViolation) -> None:
    """The fabric test runs unprivileged (IPC_LOCK is all RDMA memory registration needs); every
    container that uses GPUs also asks for the RDMA resource, so it gets the HCAs and is scheduled
    only where the device plugin runs; and the job asks for RDMA somewhere at all. In a DRA mode
    (core/modes.py) the HCAs come as a DRA claim instead: a container that claims one counts (this
    per-resource rule cannot read the claim's template; tests check its HCA requests)."""
    if args.resource_type != VOLCANO_JOB:
        return
    any_rdma = False
    for c in job_containers(args.props):
        sc = _get(c.spec, "securityContext") or {}
        if _get(sc, "privileged") is True:
            report_violation(f"Volcano Job {args.name!r} {c.where}: privileged is true; the job needs only IPC_LOCK")
        added = {str(x).upper() for x in _seq(_get(sc, "capabilities", "add"))}
        if added & PRIVILEGED_CAPABILITIES:
            report_violation(f"Volcano Job {args.name!r} {c.where}: adds {sorted(added & PRIVILEGED_CAPABILITIES)}, "
                             f"as good as privileged; the job needs only IPC_LOCK")
        resources = _get(c.spec, "resources")
        rdma = _rdma_resources(resources)
        claimed = bool(_seq(_get(resources, "claims")))
        any_rdma = any_rdma or bool(rdma) or claimed
        if fabric.GPU_RESOURCE in (_get(resources, "limits") or {}) and not rdma:
            report_violation(f"Volcano Job {args.name!r} {c.where}: requests {fabric.GPU_RESOURCE} but no "
                             f"RDMA resource ({_rdma_names()}) in limits; NCCL would fall back to TCP")
    if not any_rdma:
        report_violation(f"Volcano Job {args.name!r}: no container requests an RDMA resource ({_rdma_names()}) "
                         f"in limits or a DRA claim; the test would not cross InfiniBand")


# --- 5. GPU pools leave the driver to the GPU Operator ------------------------------------------
def gpu_pool_driver_none(args: Any, report_violation: ReportViolation) -> None:
    """On a GPU size the pool sets gpuProfile.driver = None: the GPU Operator installs the driver with
    GPUDirect RDMA, and the setting cannot be changed once the pool exists."""
    if args.resource_type != AGENT_POOL:
        return
    try:
        sku = catalog.lookup(_get(args.props, "vmSize"))
    except KeyError:
        return  # ib_size_in_catalog reports it
    driver = _get(args.props, "gpuProfile", "driver")
    if sku.has_gpus and driver != "None":
        report_violation(f"AgentPool {args.name!r} ({sku.vm_size}, {sku.gpus_per_vm} GPUs): gpuProfile.driver is "
                         f"{driver!r}; set it to None so that the GPU Operator owns the driver (fixed at creation)")
    # AKS's managed GPU experience (preview; default Unmanaged) would install its own driver, device
    # plugin and DCGM exporter next to the GPU Operator's.
    management = _get(args.props, "gpuProfile", "nvidia", "managementMode")
    if management not in (None, "Unmanaged"):
        report_violation(f"AgentPool {args.name!r}: gpuProfile.nvidia.managementMode is {management!r}; leave it "
                         f"unset (Unmanaged) so that AKS installs no second GPU stack next to the GPU Operator's")


# --- 6, 7. the API server is not open to everyone; no static local accounts ----------------------
def is_production(props: Any) -> bool:
    """A cluster that says it is production (config `production`: the tag fabric.PRODUCTION_TAG)."""
    return _get(props, "tags", fabric.PRODUCTION_TAG) == "true"


def api_server_restricted(args: Any, report_violation: ReportViolation) -> None:
    """The API server is private, or public behind authorized IP ranges: a public endpoint open to the
    internet is one leaked credential away from the cluster (AKS baseline, Azure Verified Modules)."""
    if args.resource_type != MANAGED_CLUSTER:
        return
    access = _get(args.props, "apiServerAccessProfile") or {}
    if _get(access, "enablePrivateCluster") is True or _seq(_get(access, "authorizedIPRanges")):
        return
    report_violation(f"ManagedCluster {args.name!r}: the API server is public with no authorized IP ranges; set "
                     f"apiServer.authorizedIpRanges to your egress ranges, or apiServer.private: true")


def local_accounts_disabled(args: Any, report_violation: ReportViolation) -> None:
    """Entra ID with local accounts disabled: every API call is made by a named identity that Azure RBAC
    authorizes and Entra ID can revoke, never by the cluster's static clusterUser/clusterAdmin certificate."""
    if args.resource_type != MANAGED_CLUSTER:
        return
    if _get(args.props, "aadProfile", "managed") is not True:
        report_violation(f"ManagedCluster {args.name!r}: local accounts are enabled and there is no Entra ID; set "
                         f"entraId.enabled: true (local accounts are then disabled)")
    elif _get(args.props, "disableLocalAccounts") is not True:
        report_violation(f"ManagedCluster {args.name!r}: Entra ID is on but local accounts are enabled; remove "
                         f"entraId.localAccounts: true")


MANDATORY, ADVISORY = "mandatory", "advisory"  # pulumi_policy.EnforcementLevel values
ALL_STACKS, PRODUCTION, NOT_PRODUCTION = "all", "production", "not production"


@dataclass(frozen=True)
class Rule:
    name: str  # the policy's name in the pack (kebab-case, public: users may configure it)
    description: str
    validate: Validate
    enforcement: str = MANDATORY
    # Which clusters the rule judges (is_production): a guardrail that is advisory on dev stacks and
    # mandatory on production ones is two rules of one validate function.
    stacks: str = ALL_STACKS

    def check(self, args: Any, report_violation: ReportViolation) -> None:
        """What the pack runs: `validate`, on the resources of the stacks the rule is for."""
        if self.stacks == ALL_STACKS or is_production(args.props) == (self.stacks == PRODUCTION):
            self.validate(args, report_violation)


POLICIES: tuple[Rule, ...] = (
    Rule("ib-size-in-catalog", "The InfiniBand node pool uses a VM size from the SKU catalog.", ib_size_in_catalog),
    Rule("versions-pinned", "Helm chart versions, image tags and release manifests are pinned.", versions_pinned),
    Rule("no-public-node-ips", "No node pool gives its nodes public IPs.", no_public_node_ips),
    Rule("job-pods-unprivileged-with-rdma",
         "Fabric test pods are not privileged, and every GPU container requests the RDMA resource.",
         job_pods_unprivileged_with_rdma),
    Rule("gpu-pool-driver-none",
         "GPU node pools leave the driver to the GPU Operator (gpuProfile.driver None, no managed GPU stack).",
         gpu_pool_driver_none),
    Rule("api-server-restricted", "Production clusters: the API server is private or behind authorized IP ranges.",
         api_server_restricted, MANDATORY, PRODUCTION),
    Rule("api-server-restricted-advisory", "Other clusters: advice to make the API server private or restrict it "
         "to authorized IP ranges.", api_server_restricted, ADVISORY, NOT_PRODUCTION),
    Rule("local-accounts-disabled", "Production clusters: Entra ID with local accounts disabled.",
         local_accounts_disabled, MANDATORY, PRODUCTION),
    Rule("local-accounts-disabled-advisory", "Other clusters: advice to use Entra ID with local accounts disabled.",
         local_accounts_disabled, ADVISORY, NOT_PRODUCTION),
    # Advisory until Renovate's first digest PR (or docs/upgrading-pins.md's command) fills the digests.
    Rule("images-pinned-by-digest", "Images the stack names carry a sha256 digest, not only a tag.",
         images_by_digest, ADVISORY),
)
