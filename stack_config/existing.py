"""The keys of a Kubernetes stack on a cluster that already exists, and of charts from local archives
(docs/existing-cluster.md): their schema entries, their checks across keys, their typed records.

A platform team often gets its AKS cluster from another team and owns only the layer on it: with
`stackPart: kubernetes`, `existingCluster` names that cluster instead of `azureStack` (the Azure half of
this project). `charts.directory` installs every Helm release from a local archive of its pinned version;
the archives themselves are checked by stack/charts.py, which knows which charts the stack installs.
`existingCluster.preinstalled` names the components another owner already runs there: the stack declares
none of their objects and checks at `up` what it relies on of them (stack/preinstalled.py)."""

from __future__ import annotations

import re
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core import catalog, dra, modes, pins
from stack_config.engine import Key, optional, shown

EXISTING_CLUSTER = "existingCluster"
CHARTS = "charts"
# What a cluster made elsewhere often runs already, under another owner: each by its versions.* key (one name for
# one component across the configuration). Listed in existingCluster.preinstalled, the stack leaves it alone.
PREINSTALLABLE = (NFD, NETWORK_OPERATOR, GPU_OPERATOR, VOLCANO) = (
    "nodeFeatureDiscovery", "networkOperator", "gpuOperator", "volcano")


def _is(kind: str, v: str) -> bool:
    """Whether `v` names an existing file (kind "file") or folder; a name the system refuses (too long,
    a NUL byte) names neither."""
    try:
        return Path(v).is_file() if kind == "file" else Path(v).is_dir()
    except (OSError, ValueError):
        return False


def kubeconfig(v: Any) -> str | None:
    """A path to a kubeconfig file, or the kubeconfig's own text (a secret: `pulumi config set --secret`)."""
    if isinstance(v, str) and v.strip():
        if is_inline(v) or _is("file", v):
            return None
        return ("a kubeconfig: the path of a file (relative paths are the project folder's; it is not a file) "
                "or the kubeconfig itself, set as a secret")
    return "a kubeconfig: the path of a file or the kubeconfig itself, set as a secret"


def is_inline(v: str) -> bool:
    """Whether a kubeconfig value is the kubeconfig's text rather than a path: YAML of several lines, or JSON."""
    return "\n" in v.strip() or v.lstrip().startswith("{")


def context_name(v: Any) -> str | None:
    if isinstance(v, str) and re.fullmatch(r"[^\s/]([^\s]{0,251}[^\s])?", v):
        return None
    return "the name of a context of the kubeconfig (no spaces)"


def preinstalled_list(v: Any) -> str | None:
    allowed = f"a list of the components another owner runs there, each once, of: {', '.join(PREINSTALLABLE)}"
    if not isinstance(v, list):
        return allowed
    unknown = [x for x in v if x not in PREINSTALLABLE]
    if unknown:
        return f"{allowed} ({shown(unknown[0])} is none of them)"
    twice = sorted({x for x in v if v.count(x) > 1})
    return f"{allowed} ({shown(twice[0])} is listed twice)" if twice else None


def charts_directory(v: Any) -> str | None:
    if isinstance(v, str) and v.strip() and _is("dir", v):
        return None
    return ("a folder of chart archives as `helm pull` names them (<chart>-<version>.tgz); relative paths are "
            "the project folder's; it is not a folder")


KEYS: tuple[Key, ...] = (
    Key(EXISTING_CLUSTER, "object", "With stackPart kubernetes, instead of azureStack: a cluster that already "
        "exists, whose IB pool is ibPool (docs/existing-cluster.md).",
        fields=(
            Key("enabled", "boolean", "Install on this existing cluster; without kubeconfig and context, the one "
                "the Kubernetes provider finds (KUBECONFIG).", default=False),
            Key("kubeconfig", "string", "The kubeconfig: a file's path, or its text set as a secret.",
                default_doc="KUBECONFIG, else ~/.kube/config", check=optional(kubeconfig)),
            Key("context", "string", "The kubeconfig's context to use.", default_doc="its current context",
                check=optional(context_name)),
            Key("preinstalled", "array", "Components another owner already runs there (nodeFeatureDiscovery, "
                "networkOperator, gpuOperator, volcano): the stack installs none of their objects and checks at `up` "
                "what it relies on of them.", default=[], check=preinstalled_list),
        )),
    Key(CHARTS, "object", "Where the Helm charts come from.",
        fields=(
            Key("directory", "string", "A folder holding every chart the stack installs as <chart>-<version>.tgz "
                "of the pinned version (air-gapped and private clusters): no chart repository is reached.",
                default_doc="unset: each chart's repository", check=optional(charts_directory)),
        )),
)


@dataclass(frozen=True)
class ExistingCluster:
    kubeconfig: str | None = None  # a path, or the text (secret); None: what the provider finds (KUBECONFIG)
    context: str | None = None  # None: the kubeconfig's current context
    # the components another owner runs there (PREINSTALLABLE), in that order: the stack leaves them alone
    preinstalled: tuple[str, ...] = ()

    @property
    def inline(self) -> bool:
        return self.kubeconfig is not None and is_inline(self.kubeconfig)


def problems(values: Mapping[str, Any], prefix: str) -> list[str]:
    """existingCluster only in a Kubernetes stack, and instead of azureStack, never beside it; its kubeconfig
    and context only with enabled. An inline kubeconfig is never shown (it is a secret)."""
    existing = values.get(EXISTING_CLUSTER) or {}
    key = f"{prefix}{EXISTING_CLUSTER}"
    if not existing.get("enabled"):
        out = []
        for field in ("kubeconfig", "context", "preinstalled"):
            value = existing.get(field)
            if value not in (None, []):
                what = "(the kubeconfig's text)" if field == "kubeconfig" and is_inline(value) else shown(value)
                out.append(f"{key}.{field}: got {what}; only with existingCluster.enabled: true (set it to install "
                           f"on that cluster, or remove {field})")
        return out
    if values.get("azureStack"):
        return [f"{key}.enabled: got true; expected either azureStack (the Azure part of this project) or "
                f"existingCluster (a cluster that already exists), not both"]
    if values.get("stackPart") != "kubernetes":
        return [f"{key}.enabled: got true; only with stackPart: kubernetes (this stack then installs the "
                f"Kubernetes layer on that cluster and creates no Azure resource)"]
    return []


def pools_problems(values: Mapping[str, Any], prefix: str, pools: Sequence[str]) -> list[str]:
    """existingCluster takes one IB pool: its check at `up` (stack/existing_cluster.py) reads one agent pool."""
    if not (values.get(EXISTING_CLUSTER) or {}).get("enabled") or len(pools) < 2:
        return []
    return [f"{prefix}{EXISTING_CLUSTER}.enabled: got true with {len(pools)} pools in ibPools ({', '.join(pools)}); "
            "expected one IB pool on a cluster that already exists (its pool check reads one agent pool)"]


def preinstalled_problems(values: Mapping[str, Any], prefix: str, skus: Sequence[catalog.Sku]) -> list[str]:
    """gpuOperator is preinstalled only where the stack would install it: on a size with GPUs."""
    existing = values.get(EXISTING_CLUSTER) or {}
    if not existing.get("enabled") or GPU_OPERATOR not in (existing.get("preinstalled") or []) or not skus \
            or any(sku.has_gpus for sku in skus):
        return []
    sizes = ", ".join(sorted({sku.vm_size for sku in skus}))
    return [f"{prefix}{EXISTING_CLUSTER}.preinstalled: got {GPU_OPERATOR} with {sizes}, which has no GPUs; the stack "
            f"installs no GPU Operator there, so there is nothing to leave alone (remove {GPU_OPERATOR})"]


def preinstalled(values: Mapping[str, Any]) -> frozenset[str]:
    """The components another owner runs on the existing cluster (none without existingCluster.enabled)."""
    existing = values.get(EXISTING_CLUSTER) or {}
    return frozenset(existing.get("preinstalled") or []) if existing.get("enabled") else frozenset()


def owned_elsewhere(cfg: Any) -> frozenset[str]:
    """The components another owner runs on a StackConfig's cluster (its existingCluster.preinstalled)."""
    return frozenset(cfg.existing_cluster.preinstalled) if cfg.existing_cluster else frozenset()


def needed_charts(sku: catalog.Sku, mode: modes.RdmaMode, versions: Mapping[str, str],
                  there: frozenset[str] = frozenset()) -> dict[str, str]:
    """Each Helm chart the Kubernetes half installs (stack/operators.py), by name -> its pinned version; none of
    the components in `there` (existingCluster.preinstalled: another owner's)."""
    keys = ["nodeFeatureDiscovery", "networkOperator"]
    keys += ["gpuOperator"] if sku.has_gpus else []
    keys += ["draDriver"] if dra.needs(sku, mode) is not None else []
    keys += ["dranet"] if mode.dra else []
    return {pins.chart_name(k): versions[k] for k in keys if k not in there}


def archive_version(path: Path) -> str | None:
    """The `version` of the chart packaged in `path` (its top folder's Chart.yaml), or None: not a chart archive."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            top = [m for m in tar.getmembers() if m.isfile() and m.name.count("/") == 1
                   and m.name.endswith("/Chart.yaml")]
            if len(top) != 1:
                return None
            meta = yaml.safe_load(tar.extractfile(top[0]).read())  # type: ignore[union-attr]
    except (OSError, tarfile.TarError, yaml.YAMLError, EOFError):
        return None
    version = meta.get("version") if isinstance(meta, dict) else None
    return str(version) if version is not None else None


def chart_problems(values: Mapping[str, Any], prefix: str, skus: Sequence[catalog.Sku],
                   mode: modes.RdmaMode | None) -> list[str]:
    """With charts.directory: the first chart the stack installs (for any of its pools' sizes) whose archive
    (<chart>-<version>.tgz, as `helm pull` names it) is missing there or packages another version; one line,
    before any resource."""
    folder = (values.get(CHARTS) or {}).get("directory")
    versions = values.get("versions") or {}
    if folder is None or not skus or mode is None or any(v is None for v in versions.values()):
        return []
    needed: dict[str, str] = {}
    for sku in skus:
        needed.update(needed_charts(sku, mode, versions, preinstalled(values)))
    for name, version in needed.items():
        archive = f"{name}-{version}.tgz"
        path = Path(folder) / archive
        if not _is("file", str(path)):
            return [f"{prefix}{CHARTS}.directory: got {folder!r}; expected {archive} there (the pinned {name} "
                    f"{version}, e.g. from `helm pull`): it is missing"]
        found = archive_version(path)
        if found != version:
            what = "not a chart archive" if found is None else f"a chart of version {found}"
            return [f"{prefix}{CHARTS}.directory: got {folder!r}; expected {archive} to be {name} {version}: "
                    f"it is {what}"]
    return []


def records(values: Mapping[str, Any]) -> dict[str, Any]:
    """StackConfig's fields of these keys."""
    existing = values.get(EXISTING_CLUSTER) or {}
    there = preinstalled(values)
    return {
        "existing_cluster": ExistingCluster(kubeconfig=existing.get("kubeconfig"), context=existing.get("context"),
                                            preinstalled=tuple(c for c in PREINSTALLABLE if c in there))
        if existing.get("enabled") else None,
        "charts_directory": (values.get(CHARTS) or {}).get("directory"),
    }
