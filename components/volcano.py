"""Row 7: Volcano, the gang scheduler of the fabric test job, from its pinned release manifest."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from core import pins

MANIFEST_URL = "https://raw.githubusercontent.com/volcano-sh/volcano/{tag}/installer/volcano-development.yaml"
# Namespace the manifest itself creates (with the scheduler, controllers and admission webhook).
NAMESPACE = "volcano-system"


@dataclass(frozen=True)
class VolcanoArgs:
    # A volcano-sh/volcano release tag (stack_config.DEFAULT_VERSIONS["volcano"]), e.g. v1.15.1.
    version: str

    def __post_init__(self) -> None:
        pins.VOLCANO_TAG.require("version", self.version)  # the config's check, so it cannot pass there and fail here


def manifest_url(version: str) -> str:
    """The install manifest of one release tag."""
    return MANIFEST_URL.format(tag=VolcanoArgs(version).version)


class Volcano(pulumi.ComponentResource):
    """`installer/volcano-development.yaml` of a pinned release tag, applied with `yaml.v2.ConfigFile`.

    The manifest brings its own `volcano-system` namespace, CRDs (Job, Queue, PodGroup), the
    scheduler, the controllers and the admission webhook, all on the system pool. Depends only on
    the Kubernetes provider (passed in `opts`).
    """

    manifest: k8s.yaml.v2.ConfigFile

    def __init__(self, name: str, args: VolcanoArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:Volcano", name, None, opts)
        self.manifest = k8s.yaml.v2.ConfigFile(
            f"{name}-manifest",
            k8s.yaml.v2.ConfigFileArgs(file=manifest_url(args.version)),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"manifest": manifest_url(args.version)})
