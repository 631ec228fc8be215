"""The fabric doctor's logic, as pure functions: which node pairs to test, and who is to blame.

When the all-nodes all-reduce is slow, the launcher (scripts/nccl-launcher.sh) runs checks that
narrow it down; this module plans the pairwise rounds and turns every check's figures into named
suspects. No I/O here: `verify.sections` reads the log, the launcher runs the plan. The records (what
the checks measured, the size's expectations, the suspects) are verify/doctor_checks.py's.

**Pairing.** The all-nodes run says the fabric is slow, not where. Two-node all-reduces do: a pair is
slow when either of its nodes is. Rounds of disjoint pairs run at the same time (N/2 pairs per
round), and the rounds are the first rounds of a round-robin tournament (the circle method), so
every node meets a different partner in each round. With `PAIR_PARTNERS` partners per node, up to
PAIR_PARTNERS - 1 bad nodes are always told apart from good ones: a good node has at least one good
partner, so at least one fast pair clears it; a bad node's pairs are all slow and some of its
partners are cleared, which confirms it. That takes PAIR_PARTNERS rounds (one more for odd N, where
each round leaves one node out), whatever N is: never all N^2 pairs. N = 2 has no pairs to compare:
the all-nodes run is the one pair, and the per-node checks and the per-HCA ib_write_bw decide.

**Topology.** Given each node's torset (`verify.torsets`; Azure's `ib/torset` label), the rounds are
planned within every torset first (the circle method in all torsets at once), then across: every
two torsets meet once, their nodes zipped. A pair is compared with the pairs of its own tier; a slow
pair across two torsets whose nodes are both fast elsewhere is a path between those torsets, not a
node; the diagnosis carries figures per tier and per path. Without torsets nothing changes.

**Relative to the peers.** A pair is slow below the 2-node line or far below the median pair of its
tier. When every pair is below the line, the pairs far below the others are still judged against
each other (a fabric-wide shortfall must not hide one bad node), and a note says the whole fabric is
below its line.

**Suspects.** Each finding names a host (and an HCA where the evidence points at one), says why,
and carries the figures behind it:
- an HCA port missing, down, or at a lower rate than the catalog's (NDR 400, HDR 200 Gb/s);
- fewer GPUs than the catalog's;
- a single-node all-reduce (NVLink, no fabric) below Azure's published per-size gate (WARN; FAIL
  below `NODE_ALLREDUCE_FAIL_FRACTION` of it), or failed (FAIL);
- the node common to the slow pairs (confirmed: a partner of it was fast with someone else);
- an HCA whose ib_write_bw between the two nodes of a slow pair is below the link's gate while the
  node's other HCAs are not (FAIL; WARN when measured from other memory than the gate was: a GPU
  size's gate is GPUDirect RDMA's, and Azure publishes no host-memory gate for it);
- a node whose ranks used TCP sockets, or (on sizes built for it) an RDMA connection without
  GPUDirect RDMA, in its pair runs, as NCCL's INFO lines in those runs say (verify.transport; the
  same rules as the all-nodes verdict's). When every node checked shows it, it is a note instead:
  fabric-wide, not one node.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from verify import torsets as torsets_
from verify.doctor_checks import Diagnosis, Expectations, HcaBandwidth, NodeCheck, PairRun, Suspect
from verify.hca import ACTIVE, LINK_UP, infiniband_ports
from verify.torsets import ACROSS, tier_of
from verify.verdict import Verdict

# Partners per node in the pairwise rounds: 3 tells up to two bad nodes apart from good ones
# (module docstring). Each round is one 2-node all-reduce per pair, all pairs at once.
PAIR_PARTNERS = 3
# A pair is also slow when it is this far below the median pair: catches an outlier where the catalog
# has no 2-node figure, or where every pair clears a (derived) threshold but one is far behind.
# A healthy fabric's pairs sit within a few percent of each other; 80 % is well outside that.
RELATIVE_SLOW_FRACTION = 0.8
# The single-node all-reduce (NVLink, no fabric) is run as Azure's health check runs it, but in a pod,
# with the job's NCCL and settings, not in Azure's health-check image: below Azure's gate the node is
# a WARN suspect, and a FAIL one only below this fraction of the gate (or when the run failed). Half
# the gate is a judgement, not a measurement: Azure's own check read spuriously low on healthy H100/H200
# nodes until it cleared NCCL_TOPO_FILE (azurehpc-health-checks#142, no figures published), so a
# shortfall of a setting's size is not proof; a GPU that lost NVLink and falls back to PCIe (64 GB/s
# per direction on Gen5 x16, against gates of 228-460 GB/s busbw) is far below half.
NODE_ALLREDUCE_FAIL_FRACTION = 0.5
# An HCA's ib_write_bw is singled out only when it is also this far below the median of the HCAs
# measured between the same two nodes (with at least `MIN_HCAS_TO_COMPARE` of them): a host-memory
# test that is slow on every HCA points at the host, not at one HCA.
MIN_HCAS_TO_COMPARE = 3


# --- planning ---------------------------------------------------------------------------------
def _round_robin(nodes: int, partners: int) -> list[tuple[tuple[int, int], ...]]:
    """The first rounds of the circle method over indices 0..nodes-1 (nodes >= 2): node 0 stays, the
    others rotate; odd N gets a bye slot (the node drawn against it sits the round out) and one extra
    round, so that every node still meets `partners` partners."""
    slots = nodes + (nodes % 2)  # index `nodes` is the bye
    rounds_wanted = min(partners + (nodes % 2), slots - 1)
    ring = list(range(slots))
    rounds = []
    for _ in range(rounds_wanted):
        pairs = []
        for i in range(slots // 2):
            a, b = ring[i], ring[slots - 1 - i]
            if nodes not in (a, b):
                pairs.append((min(a, b), max(a, b)))
        rounds.append(tuple(sorted(pairs)))
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def plan_pairs(nodes: int, partners: int = PAIR_PARTNERS,
               torsets: Mapping[int, str] | None = None) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Rounds of disjoint node-index pairs, each node meeting up to `partners` distinct partners.

    Without `torsets` (node index -> torset), or with one torset: the first rounds of the circle
    method over all nodes. With several: within-torset rounds first (the circle method in every
    torset at once, so a node is judged by partners under its own leaf switches), then across-torset
    rounds (module docstring, "Topology"). N < 3: no rounds (N = 2: the all-nodes run is the only pair)."""
    if nodes < 3:
        return ()
    groups = torsets_.groups(nodes, torsets) if torsets is not None else [list(range(nodes))]
    if len(groups) == 1:
        return tuple(_round_robin(nodes, partners))
    within: list[list[tuple[int, int]]] = []
    for g in (g for g in groups if len(g) >= 2):
        for r, pairs in enumerate(_round_robin(len(g), partners)):
            if r == len(within):
                within.append([])
            within[r] += [(g[a], g[b]) for a, b in pairs]
    return tuple(tuple(sorted(r)) for r in within) + torsets_.across_rounds(groups, _round_robin)


def rounds_env(rounds: Sequence[Sequence[tuple[int, int]]]) -> str:
    """The plan as the launcher reads it (DOCTOR_PAIR_ROUNDS): rounds split by ';', pairs by ' ',
    node indices (the hostfile's order) by '-', e.g. "0-3 1-2;0-2 1-3"."""
    return ";".join(" ".join(f"{a}-{b}" for a, b in r) for r in rounds)


# --- judging --------------------------------------------------------------------------------------
_MEMORY = {"cuda": "GPU memory (GPUDirect RDMA)", "host": "host memory"}


def _round2(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _node_suspects(node: NodeCheck, exp: Expectations) -> list[Suspect]:
    found: list[Suspect] = []
    if node.ports is not None:
        ib = infiniband_ports(node.ports)
        listed = [p.name for p in ib]
        if exp.hcas_per_node is not None and len(ib) < exp.hcas_per_node:
            found.append(Suspect(
                node.host, None,
                f"{len(ib)} of {exp.hcas_per_node} InfiniBand HCA ports visible ({exp.vm_size} has "
                f"{exp.hcas_per_node}): a missing HCA, or the RDMA device plugin does not expose them all",
                {"infiniband_ports": listed, "expected_hcas": exp.hcas_per_node}))
        for p in ib:
            evidence = {"state": p.state, "phys_state": p.phys_state, "rate": p.rate_text,
                        "rate_gbits": p.rate_gbits, "expected_rate_gbits": exp.link_gbits}
            if p.state is not None and p.state.upper() != ACTIVE:
                found.append(Suspect(node.host, p.device, f"port {p.name} is {p.state}"
                                     + (f" ({p.phys_state})" if p.phys_state else "") + ", not ACTIVE", evidence))
            elif p.phys_state is not None and p.phys_state != LINK_UP:
                found.append(Suspect(node.host, p.device, f"port {p.name} physical state is {p.phys_state}, "
                                     f"not LinkUp", evidence))
            elif p.rate_gbits is not None and exp.link_gbits is not None and p.rate_gbits < exp.link_gbits:
                found.append(Suspect(
                    node.host, p.device,
                    f"port {p.name} runs at {p.rate_gbits:g} Gb/s, expected {exp.link_gbits:g} "
                    f"({exp.ib_generation}): a degraded link (cable, transceiver or switch port)", evidence))
    if node.gpus is not None and exp.gpus_per_node is not None and node.gpus < exp.gpus_per_node:
        found.append(Suspect(node.host, None,
                             f"{node.gpus} of {exp.gpus_per_node} GPUs listed by nvidia-smi -L",
                             {"gpus": node.gpus, "expected_gpus": exp.gpus_per_node}))
    if node.allreduce_failure:
        found.append(Suspect(node.host, None,
                             f"single-node all-reduce (NVLink, no fabric) failed: {node.allreduce_failure}",
                             {"failure": node.allreduce_failure}))
    elif (node.allreduce_busbw_gbps is not None and exp.node_allreduce_gbps is not None
          and node.allreduce_busbw_gbps < exp.node_allreduce_gbps):
        fail_below = exp.node_allreduce_gbps * NODE_ALLREDUCE_FAIL_FRACTION
        far = node.allreduce_busbw_gbps < fail_below
        why = (f"below half of it ({fail_below:g}): a GPU or NVLink problem on this node, not the fabric" if far else
               "Azure's gate for its health check's own run; a GPU or NVLink problem on this node, or a setting "
               f"(FAIL below {fail_below:g})")
        found.append(Suspect(
            node.host, None,
            f"single-node all-reduce {node.allreduce_busbw_gbps:.2f} GB/s is below {exp.node_allreduce_gbps:g} GB/s, "
            f"{why}",
            {"busbw_gbps": _round2(node.allreduce_busbw_gbps), "threshold_gbps": exp.node_allreduce_gbps,
             "fail_below_gbps": fail_below, "source": exp.node_allreduce_source},
            Verdict.FAIL if far else Verdict.WARN))
    return found


def _relatively_slow(pairs: Sequence[PairRun], torsets: Mapping[str, str] | None) -> tuple[set[int], dict]:
    """Indices of the pairs that failed or sit below RELATIVE_SLOW_FRACTION of the median pair of
    their tier (with at least 3 measured there), and each tier's median (key None: no torsets)."""
    by_tier: dict[str | None, list[float]] = {}
    for p in pairs:
        if p.busbw_gbps is not None and not p.failure:
            by_tier.setdefault(tier_of(p.hosts, torsets), []).append(p.busbw_gbps)
    medians = {t: statistics.median(v) for t, v in by_tier.items()}
    slow = set()
    for i, p in enumerate(pairs):
        values = by_tier.get(tier_of(p.hosts, torsets), [])
        if p.failure is not None or p.busbw_gbps is None or (
                len(values) >= 3 and p.busbw_gbps < RELATIVE_SLOW_FRACTION * medians[tier_of(p.hosts, torsets)]):
            slow.add(i)
    return slow, medians


def classify_pairs(pairs: Sequence[PairRun], exp: Expectations, torsets: Mapping[str, str] | None = None,
                   ) -> tuple[list[PairRun], list[PairRun], float | None]:
    """(slow, fast, median busbw). Slow: failed, below where a 2-node verdict would PASS
    (`Expectations.pair_slow_below_gbps`), or below RELATIVE_SLOW_FRACTION of the median pair of its
    tier (within a torset, across torsets; all pairs when no torsets are known)."""
    measured = [p.busbw_gbps for p in pairs if p.busbw_gbps is not None and not p.failure]
    median = statistics.median(measured) if measured else None
    relative, _ = _relatively_slow(pairs, torsets)
    line = exp.pair_slow_below_gbps
    slow, fast = [], []
    for i, p in enumerate(pairs):
        bad = i in relative or (line is not None and p.busbw_gbps is not None and p.busbw_gbps < line)
        (slow if bad else fast).append(p)
    return slow, fast, median


def _pair_dict(p: PairRun) -> dict[str, Any]:
    out: dict[str, Any] = {"round": p.round, "hosts": list(p.hosts), "busbw_gbps": _round2(p.busbw_gbps)}
    if p.failure:
        out["failure"] = p.failure
    if p.transport:
        out["transport"] = p.transport
    return out


def _figures(pairs: Sequence[PairRun]) -> str:
    return ", ".join(f"{'+'.join(p.hosts)} {p.busbw_gbps:.2f}" if p.busbw_gbps is not None and not p.failure
                     else f"{'+'.join(p.hosts)} failed" for p in pairs)


def _pair_suspects(pairs: Sequence[PairRun], exp: Expectations, torsets: Mapping[str, str] | None = None,
                   ) -> tuple[list[Suspect], list[str], list[PairRun]]:
    slow, fast, median = classify_pairs(pairs, exp, torsets)
    if not slow:
        return [], [], []
    notes: list[str] = []
    relative = False
    if not fast:
        hosts = sorted({h for p in pairs for h in p.hosts})
        far, _ = _relatively_slow(pairs, torsets)
        if len(hosts) > 2 and far and len(far) < len(pairs):
            # Every pair is below the line, but some far below the others: a fabric-wide shortfall and a
            # bad node at once (with the size's own lines a bad node hid among slow pairs). Say both.
            notes.append(f"all {len(pairs)} pairs are below the 2-node line ({exp.pair_slow_below_gbps:g} GB/s): "
                         f"the whole fabric is below its line (the transport NCCL used, a setting, the switches, "
                         f"or the expectation); the pairs far below the others are judged against each other")
            slow = [p for i, p in enumerate(pairs) if i in far]
            fast = [p for i, p in enumerate(pairs) if i not in far]
            relative = True
        elif len(hosts) == 2:
            notes.append(f"the only pair ({', '.join(hosts)}) is slow: two nodes cannot be told apart by "
                         f"pairwise runs; see the per-node checks and the per-HCA ib_write_bw")
            return [], notes, slow
        else:
            notes.append(f"all {len(pairs)} pairs are slow: the cause is not one node (fabric-wide: the "
                         f"transport NCCL used, a setting, the switches, or the expectation)")
            return [], notes, slow
    cleared = {h for p in fast for h in p.hosts}
    below_published = exp.pair_threshold_gbps is not None and not exp.pair_threshold_derived
    suspects: list[Suspect] = []
    for host in sorted({h for p in slow for h in p.hosts} - cleared):
        mine = [p for p in pairs if host in p.hosts]
        partners = sorted({h for p in mine for h in p.hosts if h != host})
        vouched = [h for h in partners if h in cleared]
        evidence = {
            "slow_pairs": [_pair_dict(p) for p in mine],
            "partners_fast_elsewhere": [_pair_dict(p) for p in fast if set(p.hosts) & set(vouched)],
            "pair_threshold_gbps": exp.pair_threshold_gbps,
            "pair_threshold_source": exp.pair_threshold_source,
            "pair_slow_below_gbps": _round2(exp.pair_slow_below_gbps),
            "median_pair_busbw_gbps": _round2(median),
            "every_pair_below_line": relative,
        }
        all_below_threshold = all(p.failure or p.busbw_gbps is None or (
            exp.pair_threshold_gbps is not None and p.busbw_gbps < exp.pair_threshold_gbps) for p in mine)
        verdict = Verdict.FAIL if below_published and all_below_threshold else Verdict.WARN
        how = (f"far below the other pairs (below {RELATIVE_SLOW_FRACTION:.0%} of the median pair, "
               f"{median:.2f} GB/s; every pair is also below the line)" if relative else "slow")
        if vouched:
            reason = (f"every pair with this node is {how} ({_figures(mine)} GB/s) while its partner(s) "
                      f"{', '.join(vouched)} are faster with other nodes: the node common to the slow pairs")
        else:
            reason = (f"every pair with this node is {how} ({_figures(mine)} GB/s) and none of its partners was "
                      f"cleared: this node or its partners ({', '.join(partners)})")
            verdict = Verdict.WARN
        suspects.append(Suspect(host, None, reason, evidence, verdict))
    paths: dict[str, list[PairRun]] = {}
    for p in slow:
        if not set(p.hosts) <= cleared:
            continue
        if tier_of(p.hosts, torsets) == ACROSS:
            paths.setdefault(torsets_.path_of(p.hosts, torsets), []).append(p)
        else:
            notes.append(f"pair {'+'.join(p.hosts)} (round {p.round}) is slow although both nodes are fast with "
                         f"others: the path between them (switch, cable) rather than either node")
    for path, runs in sorted(paths.items()):
        a, b = path.split("|")
        across = [p for p in pairs
                  if tier_of(p.hosts, torsets) == ACROSS and torsets_.path_of(p.hosts, torsets) == path]
        notes.append(f"the path between torset {a} and torset {b}: {len(runs)} of its {len(across)} pairs are slow "
                     f"({_figures(runs)} GB/s) although each of their nodes is fast with others: the switches or "
                     f"links between those torsets, not a node")
    return suspects, notes, slow


def _hca_suspects(bws: Sequence[HcaBandwidth], exp: Expectations, blamed: set[str],
                  cleared: set[str], degraded: dict[str, set[str]]) -> tuple[list[Suspect], list[str]]:
    """Per-HCA ib_write_bw between two nodes: a slow HCA is on one of the two ends. The end is the
    one whose sysfs shows that HCA degraded, else the end other evidence blames (or does not clear)."""
    suspects: list[Suspect] = []
    notes: list[str] = []
    by_pair: dict[tuple[str, str], list[HcaBandwidth]] = {}
    for b in bws:
        by_pair.setdefault(b.hosts, []).append(b)
    for hosts, runs in sorted(by_pair.items()):
        values = [r.bw_gbits for r in runs if r.bw_gbits is not None and not r.failure]
        median = statistics.median(values) if values else None
        for r in runs:
            slow = r.failure is not None or r.bw_gbits is None or (
                exp.hca_gbits is not None and r.bw_gbits < exp.hca_gbits
                and (len(values) < MIN_HCAS_TO_COMPARE or (
                    median is not None and r.bw_gbits < RELATIVE_SLOW_FRACTION * median)))
            if not slow:
                continue
            ends = [h for h in hosts if r.device in degraded.get(h, set())]
            if not ends:
                ends = [h for h in hosts if h in blamed] or [h for h in hosts if h not in cleared] or list(hosts)
            # a figure from other memory than the gate's has no published gate (Azure's ND confs have
            # check_ib_bw_gdr only): below it is a suspect, not proof
            other_memory = (r.memory is not None and exp.hca_gate_memory is not None
                            and r.memory != exp.hca_gate_memory)
            verdict = Verdict.FAIL
            if r.failure or r.bw_gbits is None:
                figure = f"failed ({r.failure or 'no result'})"
            else:
                figure = f"{r.bw_gbits:.1f} Gb/s, below {exp.hca_gbits:g}" + (
                    f" while the other HCAs reach {median:.1f}" if len(values) >= MIN_HCAS_TO_COMPARE else "")
                if other_memory:
                    verdict = Verdict.WARN
                    figure += (f" (from {_MEMORY[r.memory]}; that gate was measured from "
                               f"{_MEMORY[exp.hca_gate_memory]}, and none is published from {_MEMORY[r.memory]})")
            evidence = {"hosts": list(hosts), "device": r.device, "bw_gbits": _round2(r.bw_gbits),
                        "threshold_gbits": exp.hca_gbits, "source": exp.hca_source,
                        "median_of_hcas_gbits": _round2(median), "memory": r.memory,
                        "gate_memory": exp.hca_gate_memory}
            if r.failure:
                evidence["failure"] = r.failure
            which = "" if len(ends) == 1 else f" (one of {', '.join(ends)}: both ends are equally suspect)"
            for host in ends:
                suspects.append(Suspect(host, r.device, f"ib_write_bw over {r.device} between {hosts[0]} and "
                                                        f"{hosts[1]}: {figure}{which}", evidence, verdict))
        all_slow = exp.hca_gbits is not None and len(values) >= MIN_HCAS_TO_COMPARE and all(
            v < exp.hca_gbits for v in values)
        if all_slow and median is not None and min(values) >= RELATIVE_SLOW_FRACTION * median:
            notes.append(f"every HCA between {hosts[0]} and {hosts[1]} is below {exp.hca_gbits:g} Gb/s "
                         f"(median {median:.1f}): a host-side limit, not one HCA")
    return suspects, notes


def _transport_suspects(pairs: Sequence[PairRun], exp: Expectations) -> tuple[list[Suspect], list[str]]:
    """Hosts whose ranks used sockets (or RDMA without GPUDirect where the size expects it) in their
    pair runs; a note instead when every host whose runs logged a transport shows it."""
    rules = [("socket_hosts", "NCCL used TCP sockets, not RDMA, in its pair runs",
              "check its worker pod's RDMA resource and the HCAs NCCL found (NET/IB : No device found)")]
    if exp.expects_gdr:
        rules.append(("no_gdr_hosts", "an inter-node connection ran without GPUDirect RDMA in its pair runs",
                      "check nvidia-peermem / dma-buf on this node (the GPU Operator's driver.rdma)"))
    if exp.gdr_via_dmabuf:  # no peer memory on the pool: DMA-BUF on every HCA, or the node is not admitted
        rules.append(("no_dmabuf_hosts", "NCCL's lines do not show GPUDirect over DMA-BUF on every HCA in its pair "
                      "runs", "check the node's kernel (>= 5.12), the GPU driver's open kernel modules and the "
                      "image's rdma-core (verify/dmabuf.py)"))
    checked = {h for p in pairs if p.transport for h in p.hosts}
    suspects: list[Suspect] = []
    notes: list[str] = []
    for attr, what, check in rules:
        hit = {h for p in pairs for h in getattr(p, attr)}
        if not hit:
            continue
        if hit >= checked:
            notes.append(f"every node checked ({len(checked)}): {what.replace('its pair runs', 'the pair runs')}; "
                         f"fabric-wide (a setting, the network operator's policy), not one node")
            continue
        for host in sorted(hit):
            mine = [p for p in pairs if host in getattr(p, attr)]
            suspects.append(Suspect(host, None, f"{what} ({', '.join('+'.join(p.hosts) for p in mine)}): {check}",
                                    {"pairs": [_pair_dict(p) for p in mine]}))
    return suspects, notes


def diagnose(nodes: Sequence[NodeCheck], pairs: Sequence[PairRun], hca_bws: Sequence[HcaBandwidth],
             exp: Expectations, torsets: Mapping[str, str] | None = None) -> Diagnosis:
    """Every suspect the checks support, with the figures behind it. `torsets`: host -> torset (the
    pairs' host names), when known: pairs are then judged within their tier, and a slow path between
    two torsets is a note, not a node."""
    suspects: list[Suspect] = []
    for node in nodes:
        suspects += _node_suspects(node, exp)
    pair_suspects, notes, slow = _pair_suspects(pairs, exp, torsets)
    suspects += pair_suspects
    transport_suspects, transport_notes = _transport_suspects(pairs, exp)
    suspects += transport_suspects
    notes += transport_notes
    line_slow, fast, _ = classify_pairs(pairs, exp, torsets)
    cleared = {h for p in fast for h in p.hosts}
    degraded = {}
    for s in suspects:
        if s.hca:
            degraded.setdefault(s.host, set()).add(s.hca)
    blamed = {s.host for s in suspects}
    hca_suspects, hca_notes = _hca_suspects(hca_bws, exp, blamed, cleared, degraded)
    # an HCA already named from its sysfs state keeps that finding; the bandwidth adds evidence
    for s in hca_suspects:
        same = next((i for i, t in enumerate(suspects) if (t.host, t.hca) == (s.host, s.hca)), None)
        if same is None:
            suspects.append(s)
        else:
            t = suspects[same]
            suspects[same] = Suspect(t.host, t.hca, t.reason, {**t.evidence, "ib_write_bw": s.evidence}, t.verdict)
    order = {h: i for i, h in enumerate(n.host for n in nodes)}
    suspects.sort(key=lambda s: (order.get(s.host, len(order)), s.host, s.hca or ""))
    tiers = torsets_.figures(pairs, {id(p) for p in line_slow}, torsets)
    return Diagnosis(tuple(suspects), tuple(notes + torsets_.notes(tiers, RELATIVE_SLOW_FRACTION) + hca_notes),
                     tuple(slow), tiers)
