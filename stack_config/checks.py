"""The checks of this stack's keys that are more than a range or a pattern. Each returns None when
the value is fine, else what is allowed. Pins (versions, tags, images) are `core.pins`' predicates, the
same ones the component Args and the policy pack call."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from core import catalog, enterprise
from core.expectations import FLOOR_FRACTION_OF_BASELINE
from stack_config import cron
from stack_config.engine import Check, shown


def kubernetes_version(v: Any) -> str | None:
    if isinstance(v, str) and re.fullmatch(r"1\.[0-9]{2}(\.[0-9]+)?", v):
        return None
    return "a Kubernetes version that AKS offers, as MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 1.35"


def ib_size(v: Any) -> str | None:
    try:
        catalog.lookup(v)
        return None
    except KeyError:
        near = catalog.closest(v) if isinstance(v, str) and len(v) < 100 else []
        hint = f" (did you mean {' or '.join(near)}?)" if near else ""
        return f"an InfiniBand-capable size from the catalog{hint}: {', '.join(catalog.supported_sizes())}"


def tags(v: Any) -> str | None:
    if not isinstance(v, dict):
        return "a map of tag name to string value"
    if len(v) > enterprise.MAX_TAGS:
        return f"at most {enterprise.MAX_TAGS} tags (Azure's limit)"
    for k, val in v.items():
        if not isinstance(k, str) or not re.fullmatch(r"[^<>%&\\?/]{1,512}", k):
            return f"tag names of 1-512 characters without < > % & \\ ? / (got {shown(k)})"
        if not isinstance(val, str) or len(val) > 256:
            return f"string tag values of at most 256 characters (tag {shown(k)})"
    # Azure's tag names are case-insensitive: one of two such tags replaces the other
    # (learn.microsoft.com/azure/azure-resource-manager/management/tag-resources, "Limitations").
    seen: dict[str, str] = {}
    for k in v:
        if k.lower() in seen:
            return (f"tag names that differ in more than case ({shown(seen[k.lower()])} and {shown(k)}: Azure's tag "
                    f"names are case-insensitive)")
        seen[k.lower()] = k
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


# Azure's size names: Standard_<family><vCPUs>[-<constrained vCPUs>]<additive features>[_<accelerator>][_v<n>]
# (learn.microsoft.com/azure/virtual-machines/vm-naming-conventions).
VM_SIZE_NAME = re.compile(r"Standard_(?P<family>[A-Z]+)(?P<vcpus>[0-9]+)(?P<constrained>-[0-9]+)?(?P<features>[a-z]*)"
                          r"(?:_(?!v[1-9]$)(?P<accelerator>[A-Z][A-Za-z0-9]*))?(?:_v(?P<version>[1-9]))?")
# The CPU families a system pool can use: general purpose, compute, memory and storage optimised. Not B
# (burstable): AKS does not support B-series VMs for system node pools (learn.microsoft.com/azure/aks/
# quotas-skus-regions, "System node pools").
CPU_FAMILIES = ("A", "D", "DC", "DS", "E", "EC", "F", "FS", "FX", "G", "GS", "L", "M", "MS")
# GPU (N*) and HPC / InfiniBand (H*) families; an `r` among the features means RDMA (InfiniBand).
ACCELERATED_FAMILIES = ("NC", "ND", "NG", "NP", "NV", "HB", "HC", "HX", "H")
# AKS: a system pool's size needs at least 2 vCPUs and 4 GB (learn.microsoft.com/azure/aks/quotas-skus-regions,
# "System node pools"; use-system-pools says 4 vCPUs in one line and 2 elsewhere: the lower is what AKS refuses).
MIN_SYSTEM_POOL_VCPUS = 2


def canonical_size(v: str) -> str:
    """A size name written as Azure writes it (Standard_D4s_v5), from any case: ARM reads size names without
    case, and the program corrects the IB size's case from the catalog the same way. A name that is no
    size name is returned as it is."""
    m = VM_SIZE_NAME.fullmatch(v) or re.fullmatch(VM_SIZE_NAME.pattern, v, re.IGNORECASE)
    if not m:
        return v
    accelerator = f"_{m['accelerator'].upper()}" if m["accelerator"] else ""
    version = f"_v{m['version']}" if m["version"] else ""  # `_v5`, never an accelerator (the lookahead)
    return (f"Standard_{m['family'].upper()}{m['vcpus']}{m['constrained'] or ''}{m['features'].lower()}"
            f"{accelerator}{version}")


def system_pool_size(v: Any) -> str | None:
    """A real Azure size name (any case) of a CPU or accelerated family with at least 2 vCPUs; whether an
    accelerated one is allowed is `accelerated_size`'s (it needs systemPool.allowGpuOrIbSize)."""
    allowed = (f"an Azure VM size name such as Standard_D4s_v5 (Standard_<family><vCPUs><features>[_v<n>], "
               f"family one of {', '.join(CPU_FAMILIES)}, not B-series, which AKS does not support for system pools; "
               f"at least {MIN_SYSTEM_POOL_VCPUS} vCPUs, as AKS requires of a system pool)")
    m = VM_SIZE_NAME.fullmatch(canonical_size(v)) if isinstance(v, str) and len(v) < 100 else None
    if not m or m["family"] not in CPU_FAMILIES + ACCELERATED_FAMILIES:
        return allowed
    if int(m["vcpus"]) < MIN_SYSTEM_POOL_VCPUS:
        return allowed
    return None


def accelerated_size(v: str) -> str | None:
    """What makes `v` a GPU or InfiniBand size ("a GPU size", "an InfiniBand (RDMA) size"), or None."""
    m = VM_SIZE_NAME.fullmatch(canonical_size(v))
    if not m:
        return None
    if m["family"].startswith("N"):
        return "a GPU size"
    if m["family"].startswith("H") or "r" in m["features"]:
        return "an InfiniBand (RDMA) size"
    return None


def allreduce_threshold_range(sku: catalog.Sku, nodes: int) -> tuple[float, float] | None:
    """The all-reduce thresholds (GB/s busbw) that mean something on `nodes` x `sku`, or None for a CPU size.
    Low end: the floor (core.expectations: below FLOOR_FRACTION_OF_BASELINE x baseline a run is FAIL whatever
    the threshold), where the catalog has a baseline. High end: twice the node's InfiniBand rate. An
    all-reduce across nodes sends and receives at least the data it reduces over the fabric, and busbw
    counts it at most twice (busbw = algbw x 2(n-1)/n), so no run gets above it."""
    if not sku.has_gpus:
        return None
    expect = sku.allreduce_expectation(nodes)
    low = round(expect.baseline_gbps * FLOOR_FRACTION_OF_BASELINE, 1) if expect else 0.0
    return low, 2 * sku.ib_hcas_per_vm * sku.ib_line_rate_gbps


def http_url(v: Any) -> str | None:
    """An http(s) URL with a host (a Pushgateway's): `http://:9091` or `http:///x` reach nothing."""
    try:
        parsed = urllib.parse.urlsplit(v)
        parsed.port  # noqa: B018 (raises ValueError on a port that is not a number)
    except (TypeError, ValueError, AttributeError):
        parsed = None
    if parsed and parsed.scheme in ("http", "https") and parsed.hostname and not re.search(r"\s", v):
        return None
    return "an http(s) URL with a host, such as http://pushgateway.monitoring:9091"


def cron_or_off(v: Any) -> str | None:
    """A CronJob schedule as the API server parses it (stack_config/cron.py), or `off`."""
    if v == "off":
        return None
    why = cron.problem(v) if isinstance(v, str) else "not a string"
    if why is None:
        return None
    return f"a CronJob schedule as Kubernetes parses it ({why}), e.g. '17 */6 * * *' or @daily, or off"
