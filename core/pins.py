"""What a pinned version looks like: one predicate per kind of pin, used by every layer.

Pure Python (no Pulumi import). The configuration schema (`stack_config`), the component Args
(`VolcanoArgs`, `NetworkOperatorArgs`, ...) and the policy pack (`policy/rules.py`) all call these,
so a value that passes one check cannot fail another after resources exist.

Kinds:
- `VOLCANO_TAG`: a volcano-sh/volcano release tag, `vMAJOR.MINOR.PATCH` (the manifest URL names it),
  optionally `@sha256:<hex>` of that manifest (a tag the pin table below has no sha256 for);
- `CHART_VERSION`: an exact Helm chart version, `MAJOR.MINOR.PATCH[-pre][+build]` with or without a
  leading `v`. Helm looks a repository chart up by exact string first, then as a semver constraint
  (helm/helm pkg/repo/index.go `IndexFile.Get`, Helm 3; Masterminds/semver accepts a leading v on
  either side), so `26.7.0` finds the published `v26.7.0` and the other way round. `26.4` is not
  exact: as a constraint it means any 26.4.x;
- `IMAGE_TAG`: an OCI tag (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`, distribution/reference), not a
  moving one such as latest;
- `DOCA_TAG`: the DOCA driver container version of a NicClusterPolicy, e.g.
  `doca3.4.1-26.04-1.1.0.0-1` or `24.07-0.6.1.0-0`. The Network Operator appends
  `-<os><version>-<arch>` itself (Mellanox/network-operator@f5e1a76 pkg/state/state_ofed.go
  `mofedImageFormat`), so a tag pasted with `-ubuntu24.04-amd64` would name no image;
- `IMAGE_REF`: a full image reference with a pinned tag or a sha256 digest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Tags and branch names that move: never a pin.
UNPINNED = frozenset({"", "latest", "master", "main", "stable", "edge", "nightly", "head", "dev"})

# [0-9], never \d: Python's \d also matches non-ASCII digits, which no registry or Helm accepts.
_SEMVER = r"[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DOCA = r"(?:doca[0-9]+\.[0-9]+\.[0-9]+-)?[0-9]{2}\.[0-9]{2}-[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+-[0-9]+"
# distribution/reference's grammar: [domain[:port]/]path-component(/path-component)*
_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REF = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*)(?::(?P<tag>{_TAG}))?(?:@(?P<digest>sha256:[0-9a-f]{{64}}))?"
)


def _full(pattern: str) -> Callable[[str], bool]:
    rx = re.compile(pattern)
    return lambda v: rx.fullmatch(v) is not None


def _pinned_image(v: str) -> bool:
    m = _IMAGE_REF.fullmatch(v)
    if not m or len(m["name"]) > 255:
        return False
    return bool(m["digest"]) or (m["tag"] is not None and m["tag"].lower() not in UNPINNED)


@dataclass(frozen=True)
class Pin:
    """One kind of pin: `ok(value)` says whether `value` is one; `allowed` says what is, for messages."""

    kind: str
    allowed: str
    test: Callable[[str], bool]

    def ok(self, value: Any) -> bool:
        return isinstance(value, str) and value.lower() not in UNPINNED and self.test(value)

    def problem(self, value: Any) -> str | None:
        """None when `value` is a pin, else what is allowed (the config schema's check signature)."""
        return None if self.ok(value) else self.allowed

    def require(self, field: str, value: Any) -> None:
        """Raise ValueError naming `field` and the value unless `value` is a pin (component Args)."""
        if not self.ok(value):
            raise ValueError(f"{field}: got {value!r}; expected {self.allowed}")


VOLCANO_TAG = Pin(
    "Volcano release tag",
    "a pinned Volcano release tag such as v1.15.1 (with its leading v; a branch such as master or latest "
    "would change under the stack), optionally with its manifest's sha256 as v1.16.0@sha256:<64 hex>",
    _full(r"v[0-9]+\.[0-9]+\.[0-9]+(?:@sha256:[0-9a-f]{64})?"),
)
CHART_VERSION = Pin(
    "Helm chart version",
    "a pinned chart version MAJOR.MINOR.PATCH, with or without a leading v, e.g. 1.2.3 or v1.2.3 "
    "(not latest, master, a range or empty)",
    _full(rf"v?{_SEMVER}"),
)
IMAGE_TAG = Pin(
    "image tag",
    "a pinned image tag (letters, digits, . _ -, at most 128; not latest)",
    _full(_TAG),
)
DOCA_TAG = Pin(
    "DOCA driver version",
    "a pinned DOCA driver version such as doca3.4.1-26.04-1.1.0.0-1 or 24.07-0.6.1.0-0, without the "
    "-<os><version>-<arch> suffix that the Network Operator adds",
    _full(_DOCA),
)
IMAGE_REF = Pin(
    "image reference",
    "an image reference with a pinned tag or digest, e.g. registry/repo:1.2.3 or registry/repo@sha256:<64 hex> "
    "(not :latest, not untagged)",
    _pinned_image,
)


# --- the pinned-component record -----------------------------------------------------------------
# Every upstream release the stack installs, in one table: the value, what kind of pin it is, and
# where its release is stated. renovate.json's regex managers read the `# renovate:` comment above
# each entry (tests/unit/core/test_pins.py proves they match every entry), so each upstream release becomes a
# pull request; docs/upgrading-pins.md says what else a bump regenerates.
@dataclass(frozen=True)
class Component:
    """One pinned upstream component.

    `key`: its `versions.<key>` in the stack configuration (images: `ncclTestsImage` is
    `fabricTest.image`, the others have no configuration key). `version`: the pin; an image is `name:tag` or
    `name:tag@sha256:<digest>`. `source`: where the release and its notes are. `packaged`: the
    package the offline checks render and read when the final release's package could not be
    obtained here (None: the same version). `sha256`: a manifest applied from its release URL
    (Volcano), checked before it is applied.
    """

    key: str
    version: str
    pin: Pin
    source: str
    packaged: str | None = None
    sha256: str | None = None
    platforms: tuple[str, ...] = ("amd64",)  # images: the architectures its manifest list covers

    @property
    def reference_version(self) -> str:
        """The version whose upstream files (chart, values, CRDs) the offline checks read."""
        return self.packaged or self.version


COMPONENTS: tuple[Component, ...] = (
    # renovate: datasource=helm depName=node-feature-discovery registryUrl=https://kubernetes-sigs.github.io/node-feature-discovery/charts
    Component("nodeFeatureDiscovery", "0.19.0", CHART_VERSION,
              "kubernetes-sigs/node-feature-discovery v0.19.0 (reference/chart-values/node-feature-discovery.*)"),
    # Final v26.7.0: PR Mellanox/network-operator#3078 "release Network Operator v26.7.0", merged
    # 2026-08-25, after the newest obtainable snapshot; its chart is not obtainable here, so the
    # offline checks render the closest packaged one, 26.7.0-rc.2 (docs/upgrading-pins.md).
    # renovate: datasource=helm depName=network-operator registryUrl=https://helm.ngc.nvidia.com/nvidia
    Component("networkOperator", "26.7.0", CHART_VERSION,
              "Mellanox/network-operator v26.7.0 (#3078); rendered from 26.7.0-rc.2 (f928ef2)",
              packaged="26.7.0-rc.2"),
    # The v26.7.x branch's driver when the snapshot ends (Mellanox/network-operator@9224e56 #3042,
    # hack/release.yaml Mofed); a release PR only moves hack/release.yaml from nvstaging to
    # nvcr.io/nvidia/mellanox and the rc tags to the final (v26.4.1-rc.2..v26.4.1 kept Mofed's).
    # renovate: datasource=docker depName=nvcr.io/nvidia/mellanox/doca-driver
    Component("docaDriver", "doca3.5.0-26.07-0.7.3.0-0", DOCA_TAG,
              "Mellanox/network-operator v26.7.x hack/release.yaml Mofed (9224e56, 2026-08-18)"),
    # renovate: datasource=docker depName=nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin
    Component("rdmaSharedDevicePlugin", "network-operator-v26.7.0", IMAGE_TAG,
              "Mellanox/network-operator hack/release.yaml RdmaSharedDevicePlugin (network-operator-<release>)"),
    # renovate: datasource=docker depName=nvcr.io/nvidia/mellanox/sriov-network-device-plugin
    Component("sriovDevicePlugin", "network-operator-v26.7.0", IMAGE_TAG,
              "Mellanox/network-operator hack/release.yaml SriovDevicePlugin (network-operator-<release>)"),
    # Newest upstream tag and chart: v26.7.0 (release-26.7 ends there). Chainguard's OSV advisories
    # name rebuilt packages "gpu-operator-26.7" 26.7.1 (CGA-5g3h-74j2-5cwr, 2026-10-09) and 26.7.2
    # (CGA-wh6m-qw6p-wx3f, 2026-10-21): Go stdlib fixes of Chainguard's own images, no NVIDIA release
    # notes, chart or CRDs to check, so not pinned (docs/upgrading-pins.md).
    # renovate: datasource=helm depName=gpu-operator registryUrl=https://helm.ngc.nvidia.com/nvidia
    Component("gpuOperator", "v26.7.0", CHART_VERSION,
              "NVIDIA/gpu-operator v26.7.0 (10ee5b3; reference/chart-values/gpu-operator.*.v26.7.0)"),
    # installer/volcano-development.yaml of the tag, applied from a checked local copy
    # (components/platform/volcano.py); newest stable (v1.16.0-alpha.* are alphas).
    # renovate: datasource=github-releases depName=volcano-sh/volcano
    Component("volcano", "v1.15.1", VOLCANO_TAG,
              "volcano-sh/volcano v1.15.1 (0a56ed3) installer/volcano-development.yaml",
              sha256="b5fb45a57bcd1132be7055354999d244266873710609afd1f162005772d15c41"),
    # Volcano's own images, as the pinned manifest names them (docker.io/volcanosh/<name>:<its tag>): the
    # program applies them by these digests (components/platform/volcano.py). Volcano publishes no digest (its
    # release workflow pushes linux/amd64 + linux/arm64 with buildx, no signature or SBOM), so each is the
    # tag's registry digest as two unrelated public records of a pull of v1.15.1 by tag agree on it: a k3s
    # node's status.images (L1lahKay/QuantFM@672657a docs/assets/gpu-scheduler-evaluation/raw/volcano/
    # evaluation-node.json, 2026-07-31) and a kind cluster's image lock (csmVIc/kube-scheduling-perf@9833dcd
    # CLUSTER_DEPLOYMENT_RECORD.md section 11, 2026-08-05). A pull by tag records the digest the tag
    # names, the multi-arch index. A Volcano bump moves these with it (tests/stack/components/test_volcano.py).
    # renovate-image: datasource=docker
    Component("volcanoSchedulerImage",
              "docker.io/volcanosh/vc-scheduler:v1.15.1@sha256:e79dc85279b5fd2c5e431571b4683f819ff0dfeacdf230fca49e6ce1f4509ae1",
              IMAGE_REF, "volcano-sh/volcano v1.15.1 (the tag's index digest, as pulled)",
              platforms=("amd64", "arm64")),
    # renovate-image: datasource=docker
    Component("volcanoControllerImage",
              "docker.io/volcanosh/vc-controller-manager:v1.15.1@sha256:555245dd5c73524dee627ad0c2e308c9dd95af234df791d11e6bcdfa2f33a4ef",
              IMAGE_REF, "volcano-sh/volcano v1.15.1 (the tag's index digest, as pulled)",
              platforms=("amd64", "arm64")),
    # renovate-image: datasource=docker
    Component("volcanoWebhookImage",
              "docker.io/volcanosh/vc-webhook-manager:v1.15.1@sha256:569e3671b6d9619c175062e6d3e82bfe3bb4bc3628b36347406ccc07f10fe12c",
              IMAGE_REF, "volcano-sh/volcano v1.15.1 (the tag's index digest, as pulled)",
              platforms=("amd64", "arm64")),
    # The NVIDIA DRA driver's chart (GB sizes, rdmaMode dra: components/platform/dra_driver.py), SemVer without a
    # leading v since it moved to kubernetes-sigs at v0.4.0; an OCI chart, so Renovate reads its tags.
    # renovate: datasource=docker depName=registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu
    Component("draDriver", "0.4.1", CHART_VERSION,
              "kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 (764900e; reference/chart-values/dra-driver-nvidia-gpu.*)"),
    # DRANET's chart (rdmaMode dra: components/platform/dranet.py), an OCI chart as its README installs it.
    # renovate: datasource=docker depName=registry.k8s.io/networking/charts/dranet
    Component("dranet", "1.4.0", CHART_VERSION,
              "kubernetes-sigs/dranet v1.4.0 (ca195e2; reference/chart-values/dranet.*.v1.4.0)"),
    # CUDA 13.0 runs on every driver from R580 (CUDA minor-version compatibility), so the same image
    # keeps working if the GPU driver is pinned below the chart's 595.91.07; NCCL 2.30.4-1, HPC-X 2.26,
    # nccl-tests 2.18.3 (MPI=1), perftest with CUDA, sshd, amd64 + arm64; no numactl (the launcher
    # binds with taskset then). reference/nccl-tests/coreweave-images.md. Digest: the registry is not
    # reachable from here; Renovate's first PR (pinDigests) or docs/upgrading-pins.md's command adds it.
    # renovate-image: datasource=docker
    Component("ncclTestsImage", "ghcr.io/coreweave/nccl-tests:13.0.2-devel-ubuntu24.04-nccl2.30.4-1-2eedd7c",
              IMAGE_REF, "coreweave/nccl-tests@2eedd7c (README.md lines 72-79, build.yml)",
              platforms=("amd64", "arm64")),
    # The topology labeler's SHARP step (components/platform/topology_labeler.py): Azure's node-health image with the
    # SHARP tools and python3, as Azure's node_labeler and torset_labeler charts use it. amd64 only (Azure
    # builds it from an x86_64 OFED tarball): the step runs only on sizes of that architecture.
    # renovate-image: datasource=docker
    Component("topologyLabelerImage", "mcr.microsoft.com/aznhc/aznhc-nv:1.2.0", IMAGE_REF,
              "Azure/ai-infrastructure-on-azure@a01b073 utilities/aks/*/helm"),
    # The in-cluster Python of the certifier (components/fabric/certifier.py) and of the topology labeler's labelling
    # step (components/platform/topology_labeler.py, which runs on arm64 Grace Blackwell nodes too): python:3.12-slim by
    # its multi-arch index digest, as two unrelated public Dockerfiles pin it (the code needs 3.11+).
    # renovate-image: datasource=docker
    Component("pythonImage",
              "docker.io/library/python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea",
              IMAGE_REF, "docker-library/python 3.12/slim-bookworm (the index digest)", platforms=("amd64", "arm64")),
    # The pre-pull and labeler DaemonSets' hold container (components/fabric/image_prepull.py): pause 3.10 by its
    # multi-arch index digest (as Cilium's Dockerfiles pin it).
    # renovate-image: datasource=docker
    Component("pauseImage",
              "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
              IMAGE_REF, "kubernetes/kubernetes build/pause", platforms=("amd64", "arm64")),
)
BY_KEY: dict[str, Component] = {c.key: c for c in COMPONENTS}
# The keys of `versions.*` in the configuration, in table order (the images are full references).
VERSION_KEYS: tuple[str, ...] = tuple(c.key for c in COMPONENTS if c.pin is not IMAGE_REF)


def component(key: str) -> Component:
    return BY_KEY[key]


def reference_version(chart_or_key: str, version: str) -> str:
    """The packaged version the offline checks read for `version` of a chart (or a `versions` key):
    the record's `packaged` where `version` is the pinned final, else `version` itself."""
    for c in COMPONENTS:
        if chart_or_key in (c.key, _CHART_NAMES.get(c.key)) and c.version == version:
            return c.reference_version
    return version


_CHART_NAMES = {"nodeFeatureDiscovery": "node-feature-discovery", "networkOperator": "network-operator",
                "gpuOperator": "gpu-operator", "draDriver": "dra-driver-nvidia-gpu", "dranet": "dranet"}


def chart_name(key: str) -> str:
    """The Helm chart of a `versions.*` key that pins one (its release's name, and its archive's `<name>-`)."""
    return _CHART_NAMES[key]


def volcano_manifest(value: str) -> tuple[str, str | None]:
    """(tag, sha256 of its installer/volcano-development.yaml) of a `versions.volcano` value: the
    sha256 given after `@`, else the pin table's for that tag, else None (unknown: refused)."""
    tag, _, digest = value.partition("@sha256:")
    if digest:
        return tag, digest
    pinned = BY_KEY["volcano"]
    return tag, pinned.sha256 if tag == pinned.version else None


VOLCANO_IMAGE_KEYS = ("volcanoSchedulerImage", "volcanoControllerImage", "volcanoWebhookImage")


def volcano_images() -> dict[str, str]:
    """{`name:tag` as Volcano's manifest names it: the pinned `name:tag@sha256:<digest>`} of its images."""
    return {component(k).version.partition("@")[0]: component(k).version for k in VOLCANO_IMAGE_KEYS}


def is_digest_pinned(image: str) -> bool:
    """Whether an image reference names its content (`@sha256:`), not only a tag that can be re-pushed."""
    m = _IMAGE_REF.fullmatch(image)
    return bool(m and m["digest"])


# --- the compatibility matrix --------------------------------------------------------------------
# For each supported Kubernetes minor: the pinned components tested with it (the offline checks render
# and validate the pins above at that minor), each with where upstream states that support. A row names
# pins, never their versions: a bump is one edit of the table above, and the matrix then claims the new
# version. So a bump re-reads the statement below for its component (Renovate's PR says so; each says
# at which release it was read), and a minor is a row only when every component states it.
_RELEASED_WITH_NETWORK_OPERATOR = f"released with network-operator v{component('networkOperator').version.lstrip('v')}"
SUPPORT: dict[str, str] = {
    "nodeFeatureDiscovery": "no range stated upstream (chart has no kubeVersion); checked here at this minor",
    "networkOperator": "network-operator chart kubeVersion '>= 1.32.0-0' (Chart.yaml at v26.7.0-rc.2, f928ef2)",
    # its release set (hack/release.yaml): these move with the chart (renovate.json groups them)
    "docaDriver": _RELEASED_WITH_NETWORK_OPERATOR,
    "rdmaSharedDevicePlugin": _RELEASED_WITH_NETWORK_OPERATOR,
    "sriovDevicePlugin": _RELEASED_WITH_NETWORK_OPERATOR,
    "gpuOperator": ("NVIDIA/cloud-native-docs#488 (2026-09-04): GPU Operator 26.7.0 validated on "
                    "Kubernetes 1.33-1.37, 1.32-1.37 on Ubuntu 24.04 (platform-support.rst)"),
    "volcano": "volcano-sh/volcano README.md 'Kubernetes compatibility' at v1.15.1: v1.15 up to 1.35",
    # Both serve resource.k8s.io/v1, GA from 1.34; the stack's DRA floor is core/dra.py's (1.34.2: Azure's).
    "draDriver": ("dra-driver-nvidia-gpu chart kubeVersion '>=1.32.0-0' (Chart.yaml at v0.4.1); "
                  "resource.k8s.io/v1 from 1.34, Azure's deploy-aks.sh asks 1.34.2+"),
    "dranet": "no range stated upstream (chart has no kubeVersion); resource.k8s.io/v1 from 1.34, checked here",
}


@dataclass(frozen=True)
class MatrixRow:
    kubernetes: str  # MAJOR.MINOR
    aks: str  # why AKS offers it
    pins: tuple[str, ...] = VERSION_KEYS  # the versions keys tested with this minor: their pins

    @property
    def tested(self) -> dict[str, tuple[str, str]]:
        """versions key -> (the version tested: the pin's, where upstream states support)."""
        return {key: (component(key).version, SUPPORT[key]) for key in self.pins}


# 1.34 left the matrix at its end of life (upstream 2026-10-27; AKS's, November 2026).
MATRIX: tuple[MatrixRow, ...] = (
    MatrixRow("1.35", "AKS GA (the default: the newest minor every component states)"),
)
# Not in the matrix: 1.36, GA on AKS since 2026-06, because Volcano v1.15 is validated only up to 1.35
# (every other component states 1.36); it runs with allowUntestedVersions and the plan says so.
MATRIX_BY_MINOR: dict[str, MatrixRow] = {r.kubernetes: r for r in MATRIX}
SUPPORTED_KUBERNETES: tuple[str, ...] = tuple(MATRIX_BY_MINOR)
# The newest minor of the matrix: the newest AKS minor that every pinned component states support for.
DEFAULT_KUBERNETES = SUPPORTED_KUBERNETES[-1]
UNTESTED_KEY = "allowUntestedVersions"


def kubernetes_minor(version: str) -> str:
    """"1.35" of "1.35" or "1.35.2"."""
    return ".".join(version.split(".")[:2])


def untested(kubernetes_version: str, versions: dict[str, str]) -> list[tuple[str, str, str]]:
    """Each (key, value, what the matrix allows) outside the matrix: `kubernetesVersion` first, then
    each `versions.<key>` not tested with that minor (against the default minor's row when the
    minor itself is not supported). Empty when the combination is one the matrix lists."""
    found = []
    minor = kubernetes_minor(kubernetes_version)
    row = MATRIX_BY_MINOR.get(minor)
    if row is None:
        found.append(("kubernetesVersion", kubernetes_version,
                      f"a minor of the compatibility matrix: {', '.join(SUPPORTED_KUBERNETES)}"))
        row = MATRIX_BY_MINOR[DEFAULT_KUBERNETES]
    for key, value in versions.items():
        tested = row.tested.get(key)
        # a Volcano tag may carry its manifest's sha256 (versions.volcano: v1.15.1@sha256:...)
        if tested and (value.partition("@")[0] if key == "volcano" else value) != tested[0]:
            found.append((f"versions.{key}", value,
                          f"{tested[0]}, the version tested with Kubernetes {row.kubernetes}"))
    return found


def matrix_markdown() -> str:
    """The matrix as a Markdown table (docs/upgrading-pins.md shows it; a test keeps the two equal)."""
    keys = list(MATRIX[0].tested)
    lines = ["| Kubernetes | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for row in MATRIX:
        lines.append(f"| {row.kubernetes} | " + " | ".join(f"`{row.tested[k][0]}`" for k in keys) + " |")
    lines += ["", "Where upstream states it:", ""]
    sources = {(k, row.tested[k][1]) for row in MATRIX for k in keys}
    for key, source in sorted(sources):
        lines.append(f"- `{key}`: {source}")
    return "\n".join(lines)
