"""Row 7: Volcano, the gang scheduler of the fabric test job, from its pinned release manifest.

The manifest is `installer/volcano-development.yaml` of a release tag, pinned by its sha256 beside
its URL (pins.COMPONENTS "volcano", as offline/reference.lock.json pins files). It is fetched once
into a local cache, checked, and the checked copy's content is what the program applies
(`yaml.v2.ConfigGroup`), so the plan and a PR preview show every Volcano object and an upstream
change to the file cannot reach the cluster without a diff. Nothing fetches a URL at deploy time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.platform import volcano_dra, volcano_pools, volcano_topology
from core import pins

MANIFEST_URL = "https://raw.githubusercontent.com/volcano-sh/volcano/{tag}/installer/volcano-development.yaml"
# Namespace the manifest itself creates (with the scheduler, controllers and admission webhook).
NAMESPACE = "volcano-system"
# Where the checked copies are kept: $AKS_IB_VOLCANO_CACHE, else .cache/volcano in the project
# (ignored by git). The offline render points it at the reference material's examples/, which holds
# the same file under the same name.
CACHE_ENV = "AKS_IB_VOLCANO_CACHE"
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "volcano"
# Set with CACHE_ENV by the offline render: a copy missing from that folder is not fetched, and the
# error (ManifestMissing) ends with this variable's value, which says how to get the file.
NO_FETCH_ENV = "AKS_IB_VOLCANO_NO_FETCH"


class ManifestError(Exception):
    """The manifest cannot be had, or its content is not the pinned one: one line that says which."""


class ManifestMissing(ManifestError):
    """No copy is in the cache, and none is to be fetched (NO_FETCH_ENV: the offline render)."""


def manifest_url(version: str) -> str:
    """The install manifest of one release tag (a `@sha256:` suffix is not part of the URL)."""
    tag = VolcanoArgs(version, manifest="").version.partition("@")[0]
    return MANIFEST_URL.format(tag=tag)


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def cached_path(tag: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / f"volcano-development.{tag}.yaml"


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (a pinned https URL)
        return response.read()


def checked_manifest(version: str, cache: Path | None = None, fetch: Callable[[str], bytes] = _download) -> str:
    """The manifest of `version` (a `versions.volcano` value), from the cache, or fetched once into
    it (not where NO_FETCH_ENV is set and the cache is the environment's); its sha256 checked against
    the pin in either case. Raises ManifestError (ValueError for a value that is no release tag: no URL
    or file name is built from it)."""
    pins.VOLCANO_TAG.require("versions.volcano", version)
    tag, expected = pins.volcano_manifest(version)
    if expected is None:
        raise ManifestError(f"versions.volcano: no sha256 is pinned for {tag}; give it as {tag}@sha256:<64 hex>")
    path = cached_path(tag, cache)
    if path.is_file():
        data, where = path.read_bytes(), str(path)
    elif cache is None and os.environ.get(NO_FETCH_ENV):
        raise ManifestMissing(f"Volcano {tag}: {path} not found; {os.environ[NO_FETCH_ENV]}")
    else:
        url = manifest_url(version)
        try:
            data = fetch(url)
        except OSError as err:
            raise ManifestError(f"Volcano {tag}: {path} is not cached and {url} could not be fetched ({err}); fetch "
                                f"it there with network access, or set {CACHE_ENV} to a folder holding it") from None
        where = url
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ManifestError(f"Volcano {tag}: {where} has sha256 {actual}, but {expected} is pinned; refusing to "
                            f"apply it (delete the copy to fetch it again, or pin the new sha256: "
                            f"docs/upgrading-pins.md)")
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return data.decode("utf-8")


@dataclass(frozen=True)
class VolcanoArgs:
    # A volcano-sh/volcano release tag (pins.COMPONENTS "volcano"), e.g. v1.15.1, optionally @sha256:<hex>.
    version: str
    # The checked content of that tag's manifest (checked_manifest), read before any resource.
    manifest: str
    # The fabric test claims devices (GB sizes, rdmaMode dra: core/dra.py): the scheduler allocates them.
    dra: bool = False
    # The IB pools' names: with several, a queue per pool and the scheduler's nodegroup plugin keep each job in
    # its pool (components/platform/volcano_pools.py); with one, nothing of it.
    pools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        pins.VOLCANO_TAG.require("version", self.version)  # the config's check, so it cannot pass there and fail here


# A document marker line (YAML's `---` at the start of a line, with nothing after it but blanks; split
# keeps the markers, at odd indexes) and the top-level kind of a CRD: the manifest's 11 CRDs are 97 % of
# its 1 MB, and nothing here changes them.
DOCUMENT_MARKER = re.compile(r"^(---[ \t]*\n)", re.MULTILINE)
CRD_DOCUMENT = re.compile(r"^kind:[ \t]*CustomResourceDefinition[ \t]*$", re.MULTILINE)


ADMISSION_DEPLOYMENT, ADMISSION_CONTAINER, ADMISSION_PORT = "volcano-admission", "admission", 8443


def with_admission_readiness(objects: list[dict]) -> list[dict]:
    """The admission webhook's Deployment with a readiness probe on its TLS port. The release has none, so
    the pod is Ready as soon as it starts, while the webhook (`failurePolicy: Fail`) listens only after its
    informers have synced (cmd/webhook-manager/app/server.go: ListenAndServeTLS after WaitForCacheSync): a
    Volcano Job created then is refused. With the probe the Service routes to it, and the ConfigGroup's
    await of the Deployment holds everything that depends on Volcano, only once it answers."""
    out = []
    for obj in objects:
        if obj.get("kind") == "Deployment" and obj["metadata"]["name"] == ADMISSION_DEPLOYMENT:
            obj = json.loads(json.dumps(obj))
            for c in obj["spec"]["template"]["spec"]["containers"]:
                if c["name"] == ADMISSION_CONTAINER:
                    c["readinessProbe"] = {"tcpSocket": {"port": ADMISSION_PORT}, "periodSeconds": 2,
                                           "failureThreshold": 3, "timeoutSeconds": 2}
        out.append(obj)
    return out


def with_pinned_images(objects: list[dict]) -> list[dict]:
    """Each container whose image is one the pin table holds by digest (pins.volcano_images: the release's
    `docker.io/volcanosh/<name>:<tag>`) takes that digest, and `IfNotPresent`: the release pulls by tag with
    `Always`, so every pod start asks Docker Hub (its rate limit, a firewall's allow list) and a moved tag
    would run other code than was reviewed. An image of another tag is left as it is (the policy pack's
    images-pinned-by-digest names it)."""
    pinned = pins.volcano_images()
    out = []
    for obj in objects:
        spec = (obj.get("spec") or {}).get("template", {}).get("spec") or {}
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        if any(c.get("image") in pinned for c in containers):
            obj = json.loads(json.dumps(obj))
            spec = obj["spec"]["template"]["spec"]
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
                if c.get("image") in pinned:
                    c["image"], c["imagePullPolicy"] = pinned[c["image"]], "IfNotPresent"
        out.append(obj)
    return out


@functools.cache
def configured(manifest: str, dra: bool = False, node_groups: bool = False) -> str:
    """The checked manifest with the stack's scheduler and controller configuration in its two
    ConfigMaps (components/platform/volcano_topology.py: HyperNodes from the topology labels, the
    network-topology-aware plugin), with `dra`, DRA on in the scheduler (components/platform/volcano_dra.py), with
    `node_groups` (several pools) the nodegroup plugin (components/platform/volcano_pools.py), the
    webhook's readiness and the images by digest.
    Only the documents that configuration changes are written again; every other one keeps the
    release's own text, and the CRDs are not even parsed (reading and writing all of it took seconds)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    pieces = DOCUMENT_MARKER.split(manifest)  # documents at even indexes, the marker lines between them
    parsed = {i: yaml.load(pieces[i], Loader=loader)  # noqa: S506 (a safe loader)
              for i in range(0, len(pieces), 2) if not CRD_DOCUMENT.search(pieces[i])}
    parsed = {i: obj for i, obj in parsed.items() if obj}
    objects = volcano_topology.configure(list(parsed.values()))
    objects = volcano_dra.configure(objects) if dra else objects
    objects = volcano_pools.configure(objects) if node_groups else objects
    objects = with_pinned_images(with_admission_readiness(objects))
    for (i, before), after in zip(parsed.items(), objects, strict=True):
        if after != before:
            pieces[i] = yaml.dump(after, Dumper=dumper, sort_keys=False)
    return "".join(pieces)


class Volcano(pulumi.ComponentResource):
    """The checked `installer/volcano-development.yaml` of a pinned release tag, applied with
    `yaml.v2.ConfigGroup` from its content.

    The manifest brings its own `volcano-system` namespace, CRDs (Job, Queue, PodGroup, ...), the
    scheduler, the controllers and the admission webhook, all on the system pool. Depends only on
    the Kubernetes provider (passed in `opts`).
    """

    manifest: k8s.yaml.v2.ConfigGroup
    queues: dict[str, k8s.apiextensions.CustomResource]  # by pool name; several pools only

    def __init__(self, name: str, args: VolcanoArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:Volcano", name, None, opts)
        tag, sha256 = pins.volcano_manifest(args.version)
        queues = volcano_pools.queues(args.pools)
        self.manifest = k8s.yaml.v2.ConfigGroup(
            f"{name}-manifest",
            k8s.yaml.v2.ConfigGroupArgs(yaml=configured(args.manifest, args.dra, node_groups=bool(queues))),
            # Was a ConfigFile of the URL: the same child, now from the checked content.
            opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(type_="kubernetes:yaml/v2:ConfigFile")]),
        )
        # each pool's queue, once the manifest's Queue CRD and its webhook (which checks a Job's queue) are there
        self.queues = {pool: k8s.apiextensions.CustomResource(
            f"{name}-queue-{pool}", api_version=q["apiVersion"], kind=q["kind"], metadata=q["metadata"],
            spec=q["spec"], opts=pulumi.ResourceOptions(parent=self, depends_on=[self.manifest]))
            for pool, q in queues.items()}
        self.register_outputs({"manifest": manifest_url(args.version), "sha256": sha256})
