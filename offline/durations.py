"""How long each step of `pulumi up` takes, per resource type: the duration model behind the offline
render's time-to-first-all-reduce estimate.

Nothing here was measured by this project. Each figure is (typical, low, high) in minutes with its
basis: `SOURCED` figures carry a number from a named source; `ESTIMATE` figures are this project's
judgement, stated as such, with the source that bounds them where one exists. Change a figure here
and the render (and its golden files) show the new timeline.

Besides the Pulumi resources, the model has *on-node steps*: work the cluster does after Pulumi has
created a resource and moved on. Pulumi does not wait for a custom resource to be acted upon, so the
DOCA/OFED driver build (after the NicClusterPolicy) and the GPU driver container (after the GPU
Operator release) run in the background, the GPU driver after the DOCA driver where it loads nvidia-peermem
against it (offline/schedule.py `_waits_for_doca`); the fabric test job's pods start only when both are
ready on the InfiniBand nodes. The test image's pull is a step of its own: by the job's pods once they are
scheduled (after the drivers), or, with the pre-pull DaemonSet (components/fabric/image_prepull.py), as
soon as the nodes join, in parallel with the drivers. The render adds these steps to the dependency
graph explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SOURCED = "sourced"
ESTIMATE = "estimate"


@dataclass(frozen=True)
class Duration:
    typical_min: float
    low_min: float
    high_min: float
    basis: str  # SOURCED or ESTIMATE
    source: str  # where the figure comes from, or why it is what it is

    def __post_init__(self) -> None:
        if not 0 <= self.low_min <= self.typical_min <= self.high_min:
            raise ValueError(f"need 0 <= low <= typical <= high minutes, got {self}")
        if self.basis not in (SOURCED, ESTIMATE):
            raise ValueError(f"basis must be {SOURCED!r} or {ESTIMATE!r}, got {self.basis!r}")


# --- sources, cited once --------------------------------------------------------------------------
DESIGN_POOL = "DESIGN.md (the GPU pool is 'the slowest step, 10-20 minutes'); ND-series capacity retries take longer"
KUBEDEX_AKS = (
    "kubedex.com/is-azure-kubernetes-aks-any-less-terrible (2019): AKS create measured min 12m08s, avg 17m52s; "
    "AKS then claimed 5-6 minutes. Typical is this project's estimate for a 2-node system pool today"
)
AZURE_FEATURE = (
    "Microsoft Learn, AKS preview features: 'It takes a few minutes for the status to show Registered'; "
    "seconds when the subscription already has it; the wait's deadline is featureWaitTimeoutMinutes"
)
GPU_OPERATOR_707 = (
    "NVIDIA/gpu-operator#707, maintainer: 'it takes around 3-5 minutes for the GPU stack to be ready "
    "(driver installation, container-toolkit setup etc)'; red-hat-data-services/ods-ci#3001 raised its "
    "driver readiness timeout to 30 min 'to accommodate driver compilation time on first deployment'"
)
DOCA_BUILD = (
    "estimate: the DOCA/OFED driver container compiles the NIC drivers for the node's kernel on first start "
    "(NVIDIA Network Operator docs offer precompiled images 'to save startup time'; Mellanox/network-operator#775 "
    "keeps build artifacts 'to avoid recompilation'); no published figure found"
)
HELM_AWAIT = (
    "estimate: a helm.v3.Release waits until its Deployments/DaemonSets are ready (controller image pulls "
    "on the system pool); operator charts typically settle within a few minutes"
)
API_CALL = "estimate: one API call; Pulumi does not wait for a controller to act on it"
NCCL_RUN = (
    "estimate: gang scheduling, sshd start-up, then all_reduce_perf over 8 B..16 GiB (a couple of minutes "
    "at 100s of GB/s); the image pull is its own step (IMAGE_PULL)"
)
IMAGE_PULL_SOURCE = (
    "estimate: the nccl-tests image (CUDA devel, cuDNN, HPC-X, nccl-tests) is several GB, not measured here; "
    "'For a 12GB ML image, that's 2-8 minutes of cold-start time ... depending on your bandwidth to the "
    "registry' (blog.zmalik.dev, 'Lazy-Pulling Container Images: A Deep Dive Into OCI Seekability', "
    "2026-02-08); each node pulls in parallel"
)

DOCTOR_AUTO = (
    "fabricTest.doctor auto: it runs only when the all-nodes run is not PASS, so a healthy fabric pays nothing "
    "(typical and low 0); its budget fabricTest.doctorMinutes bounds it (high)"
)
DOCTOR_ALWAYS = (
    "estimate: per-node checks (~1 min: mpirun start, NCCL init, one all-reduce at Azure's gate size), 3-4 "
    "rounds of 2-node all-reduces (~1 min each), ib_write_bw over each HCA of up to 2 slow pairs (~2 min); "
    "its budget fabricTest.doctorMinutes bounds it (high)"
)

INSTANT = Duration(0.05, 0.02, 0.2, ESTIMATE, API_CALL)
ZERO = Duration(0.0, 0.0, 0.0, ESTIMATE, "estimate: no cloud-side work (a provider, a component, a lookup)")

# --- on-node steps (not Pulumi resources) ---------------------------------------------------------
DOCA_DRIVER_READY = Duration(10.0, 5.0, 20.0, ESTIMATE, DOCA_BUILD)
GPU_DRIVER_READY = Duration(5.0, 3.0, 15.0, SOURCED, GPU_OPERATOR_707)
# Before the pull was its own step the run was 6 (3-15) minutes, pull included: the two add up to it.
IMAGE_PULL = Duration(4.0, 2.0, 10.0, ESTIMATE, IMAGE_PULL_SOURCE)
FABRIC_TEST_RUN = Duration(2.0, 1.0, 5.0, ESTIMATE, NCCL_RUN)


def skips_await(resource: Any) -> bool:
    """Pulumi creates the object and moves on (the `pulumi.com/skipAwait` annotation)."""
    annotations = ((resource.inputs or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get("pulumi.com/skipAwait", "")).lower() == "true"


def fabric_doctor(mode: str | None, budget_minutes: float) -> Duration | None:
    """The time the fabric doctor adds after the all-nodes run (the launcher's DOCTOR and
    DOCTOR_SECONDS); None when it never runs."""
    if mode == "auto":
        return Duration(0.0, 0.0, budget_minutes, ESTIMATE, DOCTOR_AUTO)
    if mode == "always":
        return Duration(min(6.0, budget_minutes), min(3.0, budget_minutes), budget_minutes, ESTIMATE, DOCTOR_ALWAYS)
    return None


def _is_ib_pool(resource: Any) -> bool:
    size = str((resource.inputs or {}).get("vmSize", ""))
    return size.startswith(("Standard_ND", "Standard_HB", "Standard_HX", "Standard_NC"))


def _is_feature_wait(resource: Any) -> bool:
    env = (resource.inputs or {}).get("environment") or {}
    return resource.type == "command:local:Command" and env.get("FEATURE_MODE") == "register"


# (predicate, duration), first match wins. Predicates see an offline.engine.Resource.
RULES: tuple[tuple[str, Callable[[Any], bool], Duration], ...] = (
    ("AKS InfiniBand/GPU node pool (AgentPool of an IB size)",
     lambda r: r.type == "azure-native:containerservice:AgentPool" and _is_ib_pool(r),
     Duration(15.0, 10.0, 20.0, SOURCED, DESIGN_POOL)),
    ("other AKS node pool",
     lambda r: r.type == "azure-native:containerservice:AgentPool",
     Duration(4.0, 3.0, 8.0, ESTIMATE, "estimate: a CPU VM scale set joining the cluster")),
    ("AKS managed cluster with its system pool",
     lambda r: r.type == "azure-native:containerservice:ManagedCluster",
     Duration(8.0, 5.0, 18.0, SOURCED, KUBEDEX_AKS)),
    ("register the feature, wait until it is Registered",
     _is_feature_wait,
     Duration(3.0, 0.2, 30.0, SOURCED, AZURE_FEATURE)),
    ("local command (waits, checks)",
     lambda r: r.type == "command:local:Command",
     Duration(0.5, 0.1, 2.0, ESTIMATE, "estimate: a short local script; time spent waiting on others is "
              "modelled by the steps it depends on")),
    ("resource group",
     lambda r: r.type == "azure-native:resources:ResourceGroup",
     INSTANT),
    ("Helm release (waits for its workloads)",
     lambda r: r.type in ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"),
     Duration(2.0, 1.0, 5.0, ESTIMATE, HELM_AWAIT)),
    ("upstream manifest (CRDs, controllers)",
     lambda r: r.type.startswith("kubernetes:yaml"),
     Duration(1.5, 0.5, 4.0, ESTIMATE, "estimate: CRDs plus a few Deployments that Pulumi awaits")),
    ("Kubernetes object that Pulumi does not await (skipAwait)",
     lambda r: r.type.startswith("kubernetes:") and skips_await(r),
     INSTANT),
    ("Kubernetes workload that Pulumi awaits",
     lambda r: r.type.startswith(("kubernetes:apps/v1:", "kubernetes:batch/v1:Job")),
     Duration(1.0, 0.3, 5.0, ESTIMATE, "estimate: image pull and readiness")),
    ("Kubernetes object",
     lambda r: r.type.startswith("kubernetes:"),
     INSTANT),
    ("provider or component",
     lambda r: r.type.startswith("pulumi:providers:") or not r.custom,
     ZERO),
    ("stack reference (reads another stack's outputs)",
     lambda r: r.type == "pulumi:pulumi:StackReference",
     ZERO),
    ("other Azure resource",
     lambda r: r.type.startswith("azure-native:"),
     Duration(0.5, 0.1, 3.0, ESTIMATE, "estimate: a typical ARM create")),
)


def duration_of(resource: Any) -> tuple[str, Duration]:
    """The rule label and duration for one rendered resource."""
    for label, matches, duration in RULES:
        if matches(resource):
            return label, duration
    return "unmodelled resource", Duration(0.5, 0.1, 3.0, ESTIMATE, "estimate: no rule for this type")
