"""How big an all-reduce the GPUs of a size can run: all_reduce_perf's -e, and whether given
arguments fit. Pure Python (no Pulumi import): the configuration checks `fabricTest.allReduceArgs`
with it before any resource exists, and `NcclJobArgs` with the same rule.

With its data check on (the default), nccl-tests allocates send, receive and expected buffers of
-e bytes each (nccl-tests src/common.cu AllocateBuffs), so -e 16G needs 48 GiB per GPU and would
not fit an A100 40GB; without it (-c 0) two buffers.
"""

from __future__ import annotations

import re

from core.catalog import Sku

# all_reduce_perf from 8 B doubling to -e: the largest rows judge the fabric.
MAX_ALL_REDUCE_GIB = 16
GPU_MEMORY_HEADROOM_GB = 4  # NCCL's own buffers and the CUDA context


def all_reduce_buffers_gib(max_gib: float, check: bool = True) -> float:
    """GPU memory all_reduce_perf needs per GPU for messages up to `max_gib` GiB."""
    return (3 if check else 2) * max_gib + GPU_MEMORY_HEADROOM_GB


def all_reduce_args_for(sku: Sku) -> str:
    """The default all_reduce_perf arguments: up to 16 GiB, or the largest power of two that fits."""
    top = MAX_ALL_REDUCE_GIB
    while top > 1 and all_reduce_buffers_gib(top) > sku.gpu_memory_gb:
        top //= 2
    return f"-b 8 -e {top}G -f 2 -g 1"


def max_bytes_gib(args: str) -> tuple[float | None, bool]:
    """(-e in GiB, data check on) from all_reduce_perf arguments; -e defaults to 32M, -c to 1.
    -e is None when it is not a size such as 8G or 512M."""
    tokens, max_gib, check = args.split(), 32 / 1024, True
    for flag, value in zip(tokens, tokens[1:], strict=False):
        if flag in ("-e", "--maxbytes"):
            m = re.fullmatch(r"([0-9]+)([KMG]?)", value)
            if not m:
                return None, check
            max_gib = int(m.group(1)) / {"": 1 << 30, "K": 1 << 20, "M": 1 << 10, "G": 1}[m.group(2)]
        if flag in ("-c", "--check"):
            check = value != "0"
    return max_gib, check


def max_size_arg(args: str) -> str:
    """all_reduce_perf's -e of `args` as -b/-e take it ("16G", "512M"): the fabric doctor runs its
    pairs at that one size."""
    max_gib, _ = max_bytes_gib(args)
    if max_gib is None:
        raise ValueError(f"all_reduce_args: got {args!r}; -e must be a size such as 8G or 512M")
    return f"{max_gib:g}G" if float(max_gib).is_integer() else f"{round(max_gib * 1024)}M"


def fit_problem(args: str, sku: Sku) -> str | None:
    """None when `args` fit the GPUs of `sku` (or `sku` has none), else why not and what would."""
    if not sku.has_gpus:
        return None
    max_gib, check = max_bytes_gib(args)
    if max_gib is None:
        return "-e must be a size such as 8G or 512M"
    need = all_reduce_buffers_gib(max_gib, check)
    if need > sku.gpu_memory_gb:
        return (f"its buffers need {need:g} GB per GPU ({3 if check else 2} x -e + {GPU_MEMORY_HEADROOM_GB} GB), "
                f"{sku.vm_size} has {sku.gpu_memory_gb} GB: lower -e (e.g. {all_reduce_args_for(sku)!r})")
    return None
