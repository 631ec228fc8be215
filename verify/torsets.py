"""The fabric's shape in the doctor: torsets, the tier of a pair, the rounds across torsets and the
figures per tier. Pure functions; `verify.doctor` plans and judges with them.

A torset is the set of nodes under the same leaf switches (Azure finds it by SHARP topology
discovery); nodes within one get more bandwidth than across (Azure's NCCL chart prefers `ib/torset`
affinity). So the doctor compares a pair with the pairs of its own tier, and a pair across two
torsets that is slow while both its nodes are fast elsewhere points at the path between the torsets.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# The node label of a node's torset, as Azure's own labeler and NCCL chart name it
# (Azure/ai-infrastructure-on-azure utilities/aks/torset_labeler).
TORSET_LABEL = "ib/torset"
# The tiers of a pair: both nodes in one torset, or in two.
WITHIN, ACROSS = "within-torset", "across-torsets"

Rounds = tuple[tuple[tuple[int, int], ...], ...]


def groups(nodes: int, torsets: Mapping[int, str]) -> list[list[int]]:
    """Node indices by torset, torsets in the order of their first node. Every node needs one."""
    missing = [i for i in range(nodes) if not torsets.get(i)]
    if missing:
        raise ValueError(f"torsets: node index(es) {', '.join(map(str, missing))} have no torset; "
                         f"give every node's torset (label {TORSET_LABEL}) or none")
    out: dict[str, list[int]] = {}
    for i in range(nodes):
        out.setdefault(torsets[i], []).append(i)
    return list(out.values())


def by_index(hosts: Sequence[str], torset_of: Mapping[str, str]) -> dict[int, str]:
    """`verify.doctor.plan_pairs`' torsets (node index, the hostfile's order -> torset) from a host ->
    torset mapping (the nodes' `ib/torset` labels); a host without one is left out (plan_pairs then
    names its index)."""
    return {i: torset_of[h] for i, h in enumerate(hosts) if torset_of.get(h)}


def across_rounds(torset_nodes: Sequence[Sequence[int]],
                  round_robin: Callable[[int, int], list[tuple[tuple[int, int], ...]]]) -> Rounds:
    """Every two torsets meet once (`round_robin` over the torsets, every partner): the nodes of the
    two are zipped, the larger one's taking turns from round to round, so every path between two
    torsets A and B is measured by min(|A|, |B|) pairs at once."""
    rounds: list[tuple[tuple[int, int], ...]] = []
    for torset_pairs in round_robin(len(torset_nodes), len(torset_nodes)):
        pairs: list[tuple[int, int]] = []
        for i, j in torset_pairs:
            small, big = sorted((torset_nodes[i], torset_nodes[j]), key=len)
            shift = len(rounds) * len(small)
            pairs += [(min(a, big[(k + shift) % len(big)]), max(a, big[(k + shift) % len(big)]))
                      for k, a in enumerate(small)]
        rounds.append(tuple(sorted(pairs)))
    return tuple(rounds)


def tier_of(hosts: Sequence[str], torsets: Mapping[str, str] | None) -> str | None:
    """WITHIN when both hosts share a torset, ACROSS when they do not, None when either is unknown."""
    a, b = ((torsets or {}).get(h) for h in hosts)
    return None if a is None or b is None else WITHIN if a == b else ACROSS


def path_of(hosts: Sequence[str], torsets: Mapping[str, str]) -> str:
    """The path between two torsets, "A|B" (sorted)."""
    return "|".join(sorted(torsets[h] for h in hosts))


def figures(pairs: Sequence[Any], slow: set[int], torsets: Mapping[str, str] | None) -> dict[str, dict[str, Any]]:
    """Per tier (WITHIN, ACROSS) and per path between two torsets ("A|B"): pairs, slow pairs (`slow`:
    the ids of the slow PairRuns), median and lowest busbw. Empty without torsets."""
    if not torsets:
        return {}
    runs_by: dict[str, list[Any]] = {}
    for p in pairs:
        tier = tier_of(p.hosts, torsets)
        if tier is not None:
            runs_by.setdefault(tier, []).append(p)
        if tier == ACROSS:
            runs_by.setdefault(path_of(p.hosts, torsets), []).append(p)
    out = {}
    for key, runs in sorted(runs_by.items(), key=lambda kv: (kv[0] not in (WITHIN, ACROSS), kv[0])):
        values = [p.busbw_gbps for p in runs if p.busbw_gbps is not None and not p.failure]
        out[key] = {"pairs": len(runs), "slow": sum(id(p) in slow for p in runs),
                    "median_busbw_gbps": round(statistics.median(values), 2) if values else None,
                    "min_busbw_gbps": round(min(values), 2) if values else None}
    return out


def notes(tiers: Mapping[str, Mapping[str, Any]], far_below: float) -> list[str]:
    """A note when the pairs across torsets are, as a tier, below `far_below` of those within one."""
    within, across = (tiers.get(t, {}).get("median_busbw_gbps") for t in (WITHIN, ACROSS))
    if within and across and across < far_below * within:
        return [f"pairs across torsets reach {across / within:.0%} of pairs within one (median {across:g} against "
                f"{within:g} GB/s): the links between torsets, not a node; keep jobs within a torset "
                f"({TORSET_LABEL} affinity), or check the spine"]
    return []
