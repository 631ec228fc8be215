"""What a pinned version looks like: one predicate per kind of pin, used by every layer.

Pure Python (no Pulumi import). The configuration schema (`stack_config`), the component Args
(`VolcanoArgs`, `NetworkOperatorArgs`, ...) and the policy pack (`policy/rules.py`) all call these,
so a value that passes one check cannot fail another after resources exist.

Kinds:
- `VOLCANO_TAG`: a volcano-sh/volcano release tag, `vMAJOR.MINOR.PATCH` (the manifest URL names it);
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
    "would change under the stack)",
    _full(r"v[0-9]+\.[0-9]+\.[0-9]+"),
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
