"""What a firewall must allow when a private cluster's egress goes through it (`outboundType:
userDefinedRouting`): the hosts the nodes pull images from, registry by registry with the hosts each
redirects to; the other hosts the nodes reach; and the hosts the runner in the VNet reaches when it
applies the Kubernetes half. Beyond AKS's own required FQDNs, which are Azure's list, not repeated here.

Each host carries its source. `unconfirmed` says what could not be confirmed from that source (empty when
the source states it). docs/enterprise-deployment.md shows the table (`markdown_table`, `make golden`).
"""

from __future__ import annotations

from dataclasses import dataclass

AKS_OUTBOUND = "learn.microsoft.com/azure/aks/outbound-rules-control-egress"
DOCKER_ALLOW_LIST = "docs.docker.com/desktop/setup/allow-list"
K8S_REGISTRY = "github.com/kubernetes/registry.k8s.io README, \"Stability\""


@dataclass(frozen=True)
class Host:
    name: str  # an FQDN, or a wildcard where the source gives one
    what: str
    source: str
    unconfirmed: str = ""  # what the source does not settle; empty: it states this host
    port: int = 443


@dataclass(frozen=True)
class Registry:
    """A registry as image references name it, and the hosts a pull from it reaches."""
    name: str
    pulls: str  # what the stack pulls from it
    hosts: tuple[Host, ...]


REGISTRIES: dict[str, Registry] = {r.name: r for r in (
    Registry("mcr.microsoft.com", "AKS's own images, the topology labeler's SHARP step (`aznhc-nv`)", (
        Host("mcr.microsoft.com", "the registry", AKS_OUTBOUND),
        Host("*.data.mcr.microsoft.com", "its layers (CDN)", AKS_OUTBOUND),
        Host("mcr-0001.mcr-msedge.net", "its layers (CDN)", AKS_OUTBOUND),
    )),
    Registry("nvcr.io", "the Network Operator, its DOCA driver and device plugins, the GPU Operator and its operands", (
        Host("nvcr.io", "the registry, its tokens", "the images' references (NGC's registry)",
             "whether nvcr.io redirects layers to another host: no NVIDIA document found; a user's report names "
             "`ngc.download.nvidia.com` too (NVIDIA/cloud-native-docs#84)"),
        Host("ngc.download.nvidia.com", "NGC downloads", "NVIDIA/cloud-native-docs#84 (a user's report)",
             "named by a user installing the GPU Operator behind a firewall, not by NVIDIA's docs"),
    )),
    Registry("ghcr.io", "the fabric test image (`coreweave/nccl-tests`), the Network Operator's `ghcr.io/mellanox` "
                        "helpers", (
        Host("ghcr.io", "the registry, its tokens", "GitHub's meta API (`GET /meta`, `domains.packages`)"),
        Host("pkg-containers.githubusercontent.com", "its layers (a redirect)",
             "GitHub's meta API (`domains.packages`); Trivy's docs name both hosts for a pull behind a firewall"),
    )),
    Registry("registry.k8s.io", "Node Feature Discovery, pause, DRANET, the NVIDIA DRA driver", (
        Host("registry.k8s.io", "the registry", K8S_REGISTRY),
        Host("*.pkg.dev", "manifests and layers (a redirect to Artifact Registry, e.g. us-west2-docker.pkg.dev)",
             "kubernetes/registry.k8s.io#256 (the redirect seen)",
             "the project says its backends change at any time and recommends mirroring over an allow-list"),
        Host("*.s3.dualstack.*.amazonaws.com", "layers (a redirect to `prod-registry-k8s-io-<region>` buckets)",
             K8S_REGISTRY, "the bucket names are not published; the project recommends mirroring"),
    )),
    Registry("docker.io", "Volcano's scheduler, controllers and webhook; the certifier's and labeler's Python image", (
        Host("registry-1.docker.io", "the registry (`docker.io` is only its name in references)", DOCKER_ALLOW_LIST),
        Host("auth.docker.io", "its tokens, anonymous pulls included", DOCKER_ALLOW_LIST),
        Host("production.cloudfront.docker.com", "its layers (CDN)", f"{DOCKER_ALLOW_LIST} (docker/docs#25108, "
             "2026-05)"),
        Host("production.cloudflare.docker.com", "its layers (CDN), until 2026", DOCKER_ALLOW_LIST,
             "removed from Docker's list in 2026-06 (docker/docs#25304); whether pulls still reach it is not stated"),
        Host("docker-images-prod.6aa30f8b08e16409b46e0173d6de2f56.r2.cloudflarestorage.com",
             "layers for anonymous pulls, until 2026", DOCKER_ALLOW_LIST,
             "removed from Docker's list in 2026-06 (docker/docs#25304); whether pulls still reach it is not stated"),
    )),
)}

# What the nodes reach other than registries. Port 80: apt over HTTP, as AKS's table says.
OTHER_NODE_HOSTS: tuple[Host, ...] = (
    Host("azure.archive.ubuntu.com", "the DOCA driver container installs the running kernel's headers (and, unless "
         "it is precompiled, the GPU Operator's driver container)", AKS_OUTBOUND,
         "AKS lists it as optional for node updates; the containers' own apt sources were not read here", 80),
    Host("security.ubuntu.com", "the same, security updates of the headers' dependencies", AKS_OUTBOUND,
         "as above", 80),
    Host("ports.ubuntu.com", "the same on arm64 nodes (GB200, GB300): Ubuntu serves arm64 packages from it",
         "Ubuntu's archive layout (archive.ubuntu.com holds amd64 and i386 only)",
         "AKS's list names no arm64 host; which archive the DOCA container's apt sources name was not read here",
         80),
    Host("mvapich.cse.ohio-state.edu", "CPU-only sizes (HB, HX): the OSU tarball when the image has no OSU build",
         "components/fabric/p2p_job.py `OSU_URL`"),
)

# What the runner that applies the Kubernetes half reaches (`helm` pulls the charts there, and the
# program fetches Volcano's manifest once into its cache).
RUNNER: tuple[Host, ...] = (
    Host("management.azure.com", "Azure Resource Manager (the Azure stack's outputs, kubelogin)", AKS_OUTBOUND),
    Host("login.microsoftonline.com", "Entra ID sign-in (`az login`, kubelogin)", AKS_OUTBOUND),
    Host("helm.ngc.nvidia.com", "the Network Operator's and GPU Operator's charts",
         "components/platform/network_operator.py, gpu_operator.py `CHART`",
         "whether the chart archives are redirected to another host"),
    Host("kubernetes-sigs.github.io", "Node Feature Discovery's chart index",
         "components/platform/node_feature_discovery.py `CHART`"),
    Host("github.com", "Node Feature Discovery's chart archive (the index points at the GitHub release)",
         "the index's URLs as packagers record them (e.g. polyedre/guix-helm-charts)",
         "the host GitHub redirects release downloads to (`release-assets.githubusercontent.com`, earlier "
         "`objects.githubusercontent.com`) is not in a GitHub document found here"),
    Host("release-assets.githubusercontent.com", "the release download behind github.com",
         "seen in allow-lists of others (not a GitHub document)", "see github.com"),
    Host("registry.k8s.io", "the DRA driver's and DRANET's OCI charts (and its redirects above)",
         "components/platform/dra_driver.py, dranet.py `CHART`; " + K8S_REGISTRY,
         "its backends, as for the nodes"),
    Host("raw.githubusercontent.com", "Volcano's release manifest, once, unless it is in the cache",
         "components/platform/volcano.py `MANIFEST_URL` (the cache: `AKS_IB_VOLCANO_CACHE`)"),
)


def allowed(registry: str) -> set[str]:
    """The hosts a firewall must allow for pulls from `registry` (as image references name it)."""
    if registry not in REGISTRIES:
        raise KeyError(f"no egress entry for registry {registry!r}: known {', '.join(sorted(REGISTRIES))}")
    return {h.name for h in REGISTRIES[registry].hosts}


def runner_hosts() -> set[str]:
    return {h.name for h in RUNNER}


def _row(host: Host, who: str) -> str:
    doubt = f" Not confirmed: {host.unconfirmed}." if host.unconfirmed else ""
    return f"| `{host.name}` | {host.port} | {who} | {host.what} | {host.source}.{doubt} |"


def markdown_table() -> str:
    """Every host, for docs/enterprise-deployment.md: who needs it, what for, the source, any doubt."""
    rows = ["| host | port | needed by | for | source |", "|---|---|---|---|---|"]
    for reg in REGISTRIES.values():
        first, *rest = reg.hosts
        rows.append(_row(Host(first.name, f"{first.what}; pulled: {reg.pulls}", first.source, first.unconfirmed,
                              first.port), f"nodes (`{reg.name}`)"))
        rows += [_row(h, f"nodes (`{reg.name}`)") for h in rest]
    rows += [_row(h, "nodes") for h in OTHER_NODE_HOSTS]
    rows += [_row(h, "the runner") for h in RUNNER]
    return "\n".join(rows) + "\n"
