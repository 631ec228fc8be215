"""The checks of this stack's keys that are more than a range or a pattern. Each returns None when
the value is fine, else what is allowed. Pins (versions, tags, images) are `core.pins`' predicates, the
same ones the component Args and the policy pack call."""

from __future__ import annotations

import re
from typing import Any

from core import catalog
from stack_config.engine import Check


def kubernetes_version(v: Any) -> str | None:
    if isinstance(v, str) and re.fullmatch(r"1\.[0-9]{2}(\.[0-9]+)?", v):
        return None
    return "a Kubernetes version that AKS offers, as MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 1.35"


def ib_size(v: Any) -> str | None:
    try:
        catalog.lookup(v)
        return None
    except KeyError:
        near = catalog.closest(v)
        hint = f" (did you mean {' or '.join(near)}?)" if near else ""
        return f"an InfiniBand-capable size from the catalog{hint}: {', '.join(catalog.supported_sizes())}"


def tags(v: Any) -> str | None:
    if not isinstance(v, dict):
        return "a map of tag name to string value"
    if len(v) > 50:
        return "at most 50 tags (Azure's limit)"
    for k, val in v.items():
        if not isinstance(k, str) or not re.fullmatch(r"[^<>%&\\?/]{1,512}", k):
            return f"tag names of 1-512 characters without < > % & \\ ? / (got {k!r})"
        if not isinstance(val, str) or len(val) > 256:
            return f"string tag values of at most 256 characters (tag {k!r})"
    return None


def all_reduce_args(v: Any) -> str | None:
    # These are handed to all_reduce_perf through a shell: keep them to plain flags and numbers.
    if isinstance(v, str) and re.fullmatch(r"[-A-Za-z0-9 .=]+", v) and v.strip():
        return None
    return "all_reduce_perf flags such as '-b 8 -e 16G -f 2 -g 1' (letters, digits, spaces, - . = only)"


def pool_name(reserved: str) -> Check:
    """A Linux agent pool name, other than `reserved` (the system pool's, which it would overwrite)."""
    def check(v: Any) -> str | None:
        if isinstance(v, str) and re.fullmatch(r"[a-z][a-z0-9]{0,11}", v) and v != reserved:
            return None
        return f"1-12 lowercase letters and digits, starting with a letter, not {reserved!r} (the system pool)"
    return check
