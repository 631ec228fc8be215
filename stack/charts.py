"""The Helm releases of the Kubernetes half and, with `charts.directory`, the local archive each installs.

Air-gapped and private clusters (and the engine tier, docs/real-control-plane.md) install every chart from a
folder of packaged archives, as `helm pull` names them: `<chart>-<version>.tgz`. Each archive is checked
before any resource is declared: present, a chart archive, and of the pinned version (its Chart.yaml's
`version`), so a missing or other-version archive stops the program with one line naming the key."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from components.platform import dra_driver, dranet, gpu_operator, network_operator, node_feature_discovery
from components.platform.operator_release import Chart
from core import dra
from stack_config import PROJECT, StackConfig

KEY = f"{PROJECT}:charts.directory"


class ChartsError(ValueError):
    """One line: the key, the value, what was found and what is allowed."""


@dataclass(frozen=True)
class Release:
    chart: Chart
    version: str  # the pinned chart version (versions.*)

    @property
    def archive_name(self) -> str:
        return f"{self.chart.name}-{self.version}.tgz"  # `helm pull`'s and `helm package`'s file name


def uses_dra(cfg: StackConfig) -> bool:
    """GPUs (and in rdmaMode dra the HCAs) as DRA claims: GB200/GB300 and rdmaMode dra (core/dra.py)."""
    return dra.needs(cfg.sku, cfg.rdma_mode) is not None


def releases(cfg: StackConfig) -> dict[str, Release]:
    """Each Helm release the Kubernetes half declares (stack/operators.py), by chart name."""
    v = cfg.versions
    out = [Release(node_feature_discovery.CHART, v.node_feature_discovery),
           Release(network_operator.CHART, v.network_operator)]
    if cfg.sku.has_gpus:
        out.append(Release(gpu_operator.CHART, v.gpu_operator))
    if uses_dra(cfg):
        out.append(Release(dra_driver.CHART, v.dra_driver))
    if cfg.rdma_mode.dra:
        out.append(Release(dranet.CHART, v.dranet))
    return {r.chart.name: r for r in out}


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


def archives(cfg: StackConfig) -> dict[str, str]:
    """With charts.directory: chart name -> the path of its checked archive (as the program reads it); without,
    {} (each release installs from its repository). A ChartsError names the first archive that is wrong."""
    if cfg.charts_directory is None:
        return {}
    folder = Path(cfg.charts_directory)
    if not folder.is_dir():
        raise ChartsError(f"{KEY}: got {cfg.charts_directory!r}; expected a folder of chart archives "
                          "(relative paths are the project folder's): it is not a folder")
    out = {}
    for name, release in releases(cfg).items():
        path = folder / release.archive_name
        if not path.is_file():
            raise ChartsError(f"{KEY}: got {cfg.charts_directory!r}; expected {release.archive_name} there (the "
                              f"pinned {name} {release.version}, e.g. from `helm pull`): it is missing")
        found = archive_version(path)
        if found != release.version:
            what = "not a chart archive" if found is None else f"a chart of version {found}"
            raise ChartsError(f"{KEY}: got {cfg.charts_directory!r}; expected {release.archive_name} to be "
                              f"{name} {release.version}: it is {what}")
        out[name] = str(path)
    return out
