"""The fabric doctor's pure logic (verify/doctor.py): the pairing plan and the suspects it names,
on synthetic pair matrices: a pair is as slow as its slowest node."""

from __future__ import annotations

import itertools

import pytest

from core import catalog
from verify import doctor
from verify.doctor_checks import Expectations, HcaBandwidth, NodeCheck, PairRun
from verify.hca import HcaPort
from verify.verdict import Verdict

H100, A100 = catalog.lookup("Standard_ND96isr_H100_v5"), catalog.lookup("Standard_ND96asr_v4")
HEALTHY_PAIR_GBPS = H100.allreduce_expectation(2).baseline_gbps  # a healthy H100 pair
SLOW_PAIR_GBPS = HEALTHY_PAIR_GBPS / 2  # one rail at half rate drags the ring down


def hosts(n: int) -> list[str]:
    return [f"nccl-allreduce-mpiworker-{i}.nccl-allreduce" for i in range(n)]


def run_plan(n: int, bad: set[int], healthy: float = HEALTHY_PAIR_GBPS, slow: float = SLOW_PAIR_GBPS,
             jitter: float = 0.0) -> list[PairRun]:
    """What the planned rounds would measure with `bad` nodes (indices)."""
    names = hosts(n)
    out = []
    for r, pairs in enumerate(doctor.plan_pairs(n), start=1):
        for k, (a, b) in enumerate(pairs):
            value = slow if {a, b} & bad else healthy - jitter * (k % 3)
            out.append(PairRun(round=r, hosts=(names[a], names[b]), busbw_gbps=value))
    return out


# --- the plan -----------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8, 15, 16, 17, 64])
def test_rounds_are_disjoint_pairs_of_distinct_partners(n):
    rounds = doctor.plan_pairs(n)
    assert len(rounds) <= doctor.PAIR_PARTNERS + 1  # constant, whatever N is
    seen: set[frozenset[int]] = set()
    for pairs in rounds:
        nodes = [i for p in pairs for i in p]
        assert len(nodes) == len(set(nodes)), f"a node is in two pairs of one round: {pairs}"
        assert len(pairs) == n // 2  # N/2 pairs per round, at the same time
        assert all(0 <= i < n for i in nodes)
        for p in pairs:
            assert frozenset(p) not in seen, f"pair {p} repeated"
            seen.add(frozenset(p))
    partners = {i: {j for p in seen if i in p for j in p if j != i} for i in range(n)}
    want = min(doctor.PAIR_PARTNERS, n - 1)
    assert all(len(v) >= want for v in partners.values()), partners
    assert len(seen) < n * (n - 1) // 2 or n <= 4  # never all pairs, beyond the smallest pools


def test_two_nodes_have_no_pair_rounds_the_all_nodes_run_is_the_pair():
    assert doctor.plan_pairs(2) == ()
    assert doctor.plan_pairs(1) == ()


def test_rounds_env_is_what_the_launcher_reads():
    assert doctor.rounds_env(doctor.plan_pairs(4)) == "0-3 1-2;0-2 1-3;0-1 2-3"
    assert doctor.rounds_env(()) == ""


# --- one bad node -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [3, 4, 5, 16])
def test_one_bad_node_is_named_and_no_one_else(n):
    exp = Expectations.for_sku(H100)
    for bad in {0, n // 2, n - 1}:
        found = doctor.diagnose([], run_plan(n, {bad}, jitter=1.5), [], exp)
        assert [s.host for s in found.suspects] == [hosts(n)[bad]], (bad, found)
        s = found.suspects[0]
        assert s.hca is None
        assert "node common to the slow pairs" in s.reason
        # the figures behind it: every pair it was in, and a partner's fast pair
        assert all(p["busbw_gbps"] == SLOW_PAIR_GBPS for p in s.evidence["slow_pairs"])
        assert s.evidence["partners_fast_elsewhere"]
        # below a derived threshold (H100: no published 2-node figure) a suspect is WARN, as in the verdict
        assert s.verdict is Verdict.WARN


def test_below_a_published_pair_threshold_the_suspect_fails():
    found = doctor.diagnose([], run_plan(8, {5}, healthy=186.0, slow=120.0), [], Expectations.for_sku(A100))
    (s,) = found.suspects
    assert s.host == hosts(8)[5] and s.verdict is Verdict.FAIL
    assert s.evidence["pair_threshold_gbps"] == 180.0


def test_a_pair_is_slow_where_a_two_node_verdict_would_not_pass():
    """The slow-pair line follows verify.verdict's pass line: on ND A100 v4 (published) a pair in the
    WARN band is slow and its node a WARN suspect; on ND H100 v5 (derived: no WARN band) a pair just
    above the threshold is not slow."""
    a100 = A100.allreduce_expectation(2)
    in_band = (a100.threshold_gbps + a100.baseline_gbps * 0.97) / 2
    found = doctor.diagnose([], run_plan(8, {5}, healthy=a100.baseline_gbps, slow=in_band), [],
                            Expectations.for_sku(A100))
    (s,) = found.suspects
    assert s.host == hosts(8)[5] and s.verdict is Verdict.WARN
    h100 = H100.allreduce_expectation(2)
    just_above = h100.threshold_gbps + 0.5
    assert just_above < h100.baseline_gbps * 0.97  # where the WARN band would have been
    slow, fast, _ = doctor.classify_pairs(run_plan(4, set(), healthy=just_above), Expectations.for_sku(H100))
    assert slow == [] and len(fast) == 6
    # the user's threshold replaces the catalog's, WARN band and all
    over = Expectations.for_sku(A100, pair_threshold_gbps=a100.threshold_gbps - 5)
    assert over.pair_slow_below_gbps == a100.threshold_gbps - 5


def test_one_bad_node_among_two_is_named_by_its_own_checks():
    """Two nodes: the one pair is slow, pairwise runs cannot choose; the HCA listing can."""
    a, b = hosts(2)
    pair = [PairRun(round=0, hosts=(a, b), busbw_gbps=SLOW_PAIR_GBPS)]
    ports = lambda slow: tuple(  # noqa: E731
        HcaPort(f"mlx5_ib{i}", 1, "ACTIVE", "LinkUp", 200.0 if i == slow else 400.0, "InfiniBand") for i in range(8))
    nodes = [NodeCheck(a, ports(None), 8, 470.0), NodeCheck(b, ports(3), 8, 468.0)]
    found = doctor.diagnose(nodes, pair, [], Expectations.for_sku(H100))
    assert [(s.host, s.hca) for s in found.suspects] == [(b, "mlx5_ib3")]
    assert "200 Gb/s, expected 400 (NDR)" in found.suspects[0].reason
    assert any("cannot be told apart" in n for n in found.notes)


def test_healthy_pairs_name_no_one():
    found = doctor.diagnose([], run_plan(16, set(), jitter=2.0), [], Expectations.for_sku(H100))
    assert found.suspects == () and found.notes == () and found.verdict is Verdict.PASS


# --- two bad nodes ------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [4, 5, 8, 16])
def test_any_two_bad_nodes_are_both_named_and_no_one_else(n):
    exp = Expectations.for_sku(H100)
    for bad in itertools.combinations(range(n), 2):
        found = doctor.diagnose([], run_plan(n, set(bad)), [], exp)
        assert sorted(s.host for s in found.suspects) == sorted(hosts(n)[i] for i in bad), bad


def test_every_pair_slow_names_no_node():
    found = doctor.diagnose([], run_plan(6, set(range(6))), [], Expectations.for_sku(H100))
    assert found.suspects == ()
    assert any("all" in n and "fabric-wide" in n for n in found.notes)


def test_a_slow_pair_of_two_cleared_nodes_blames_the_path():
    names = hosts(4)
    runs = run_plan(4, set())
    runs = [PairRun(p.round, p.hosts, 150.0) if p.hosts == (names[1], names[2]) else p for p in runs]
    found = doctor.diagnose([], runs, [], Expectations.for_sku(H100))
    assert found.suspects == ()
    assert any("the path between them" in n for n in found.notes)


def test_a_failed_pair_counts_as_slow():
    runs = run_plan(4, set())
    names = hosts(4)
    runs = [PairRun(p.round, p.hosts, None, "NCCL failure") if names[2] in p.hosts else p for p in runs]
    (s,) = doctor.diagnose([], runs, [], Expectations.for_sku(H100)).suspects
    assert s.host == names[2] and "failed" in s.reason


def test_an_outlier_is_slow_where_the_catalog_has_no_pair_figure():
    gb200 = catalog.lookup("Standard_ND128isr_NDR_GB200_v6")
    exp = Expectations.for_sku(gb200)
    assert exp.pair_threshold_gbps is None
    (s,) = doctor.diagnose([], run_plan(8, {3}, healthy=600.0, slow=300.0), [], exp).suspects
    assert s.host == hosts(8)[3] and s.verdict is Verdict.WARN


# --- the per-node checks ------------------------------------------------------------------------
def ndv5_ports(**changes: dict) -> tuple[HcaPort, ...]:
    base = {f"mlx5_ib{i}": dict(state="ACTIVE", phys_state="LinkUp", rate_gbits=400.0, link_layer="InfiniBand")
            for i in range(8)}
    base["mlx5_an0"] = dict(state="ACTIVE", phys_state="LinkUp", rate_gbits=100.0, link_layer="Ethernet")
    for dev, change in changes.items():
        if change is None:
            base.pop(dev)
        else:
            base[dev] = {**base[dev], **change}
    return tuple(HcaPort(dev, 1, **v) for dev, v in base.items())


def test_a_healthy_node_with_an_ethernet_an0_is_not_suspect():
    node = NodeCheck("w0", ndv5_ports(), 8, 470.0)
    assert doctor.diagnose([node], [], [], Expectations.for_sku(H100)).suspects == ()


def test_an_hca_at_200_instead_of_400_is_named_with_the_hca():
    node = NodeCheck("w1", ndv5_ports(mlx5_ib5={"rate_gbits": 200.0}), 8, 470.0)
    (s,) = doctor.diagnose([node], [], [], Expectations.for_sku(H100)).suspects
    assert (s.host, s.hca, s.verdict) == ("w1", "mlx5_ib5", Verdict.FAIL)
    assert s.evidence["rate_gbits"] == 200.0 and s.evidence["expected_rate_gbits"] == 400.0


def test_a_down_port_and_a_missing_hca_are_named():
    node = NodeCheck("w2", ndv5_ports(mlx5_ib1={"state": "DOWN", "phys_state": "Polling"}, mlx5_ib7=None), 8, None)
    found = doctor.diagnose([node], [], [], Expectations.for_sku(H100)).suspects
    assert [(s.host, s.hca) for s in found] == [("w2", None), ("w2", "mlx5_ib1")]
    assert "7 of 8 InfiniBand HCA ports" in found[0].reason
    assert "DOWN (Polling)" in found[1].reason


def test_missing_gpus_and_a_slow_nvlink_run_are_named():
    exp = Expectations.for_sku(H100)
    assert exp.node_allreduce_gbps == 460.0 and "check_nccl_allreduce" in exp.node_allreduce_source
    found = doctor.diagnose([NodeCheck("w3", ndv5_ports(), 7, 300.0)], [], [], exp).suspects
    assert [s.reason.split(" ")[0] for s in found] == ["7", "single-node"]
    assert found[1].evidence == {"busbw_gbps": 300.0, "threshold_gbps": 460.0, "fail_below_gbps": 230.0,
                                 "source": exp.node_allreduce_source}


@pytest.mark.parametrize("busbw, failure, verdict", [
    (430.0, None, Verdict.WARN),  # below Azure's gate (460): a suspect, not proof (a setting can do it)
    (231.0, None, Verdict.WARN),
    (229.0, None, Verdict.FAIL),  # below half the gate: NVLink is not working
    (30.0, None, Verdict.FAIL),  # a GPU over PCIe
    (None, "no result rows", Verdict.FAIL),
    (470.0, None, None),
])
def test_the_single_node_all_reduce_is_a_warn_suspect_below_the_gate_and_fails_far_below(busbw, failure, verdict):
    exp = Expectations.for_sku(H100)
    assert exp.node_allreduce_gbps * doctor.NODE_ALLREDUCE_FAIL_FRACTION == 230.0
    found = doctor.diagnose([NodeCheck("w3", ndv5_ports(), 8, busbw, failure)], [], [], exp).suspects
    assert [s.verdict for s in found] == ([verdict] if verdict else [])


# --- per-HCA ib_write_bw ------------------------------------------------------------------------
def write_bw(hosts_: tuple[str, str], slow: dict[str, float]) -> list[HcaBandwidth]:
    return [HcaBandwidth(hosts_, f"mlx5_ib{i}", slow.get(f"mlx5_ib{i}", 392.0)) for i in range(8)]


@pytest.mark.parametrize("memory, verdict", [("cuda", Verdict.FAIL), (None, Verdict.FAIL), ("host", Verdict.WARN)])
def test_an_hca_below_the_gdr_gate_fails_only_when_measured_from_gpu_memory(memory, verdict):
    """ND H100 v5's gate is check_ib_bw_gdr (GPU memory); Azure publishes no host-memory gate for it."""
    names = hosts(4)
    bws = [HcaBandwidth((names[0], names[1]), f"mlx5_ib{i}", 196.0 if i == 6 else 392.0, memory=memory)
           for i in range(8)]
    found = [s for s in doctor.diagnose([], run_plan(4, {1}), bws, Expectations.for_sku(H100)).suspects if s.hca]
    assert [(s.host, s.hca, s.verdict) for s in found] == [(names[1], "mlx5_ib6", verdict)]
    assert Expectations.for_sku(H100).hca_gate_memory == "cuda"


def test_a_slow_hca_on_a_slow_pair_is_put_on_the_node_the_pairs_blame():
    names = hosts(4)
    runs = run_plan(4, {1})
    bws = write_bw((names[0], names[1]), {"mlx5_ib6": 196.0})
    found = doctor.diagnose([], runs, bws, Expectations.for_sku(H100)).suspects
    assert [(s.host, s.hca) for s in found] == [(names[1], None), (names[1], "mlx5_ib6")]
    assert found[1].evidence["bw_gbits"] == 196.0 and found[1].evidence["threshold_gbits"] == H100.p2p.threshold_gbits


def test_a_slow_hca_with_no_other_evidence_names_both_ends():
    a, b = hosts(2)
    found = doctor.diagnose([], [], write_bw((a, b), {"mlx5_ib2": 100.0}), Expectations.for_sku(H100)).suspects
    assert [(s.host, s.hca) for s in found] == [(a, "mlx5_ib2"), (b, "mlx5_ib2")]
    assert all("both ends are equally suspect" in s.reason for s in found)


def test_the_hca_listing_decides_which_end_and_bandwidth_joins_its_evidence():
    a, b = hosts(2)
    nodes = [NodeCheck(a, ndv5_ports(), 8, None), NodeCheck(b, ndv5_ports(mlx5_ib2={"rate_gbits": 200.0}), 8, None)]
    found = doctor.diagnose(nodes, [], write_bw((a, b), {"mlx5_ib2": 195.0}), Expectations.for_sku(H100)).suspects
    assert [(s.host, s.hca) for s in found] == [(b, "mlx5_ib2")]
    assert found[0].evidence["ib_write_bw"]["bw_gbits"] == 195.0


def test_every_hca_slow_is_a_host_limit_not_one_hca():
    a, b = hosts(2)
    bws = [HcaBandwidth((a, b), f"mlx5_ib{i}", 300.0 + i) for i in range(8)]
    found = doctor.diagnose([], [], bws, Expectations.for_sku(H100))
    assert found.suspects == ()
    assert any("host-side limit" in n for n in found.notes)


# --- the transport NCCL used in the pairs (PairRun.socket_hosts / no_gdr_hosts, from verify.transport) ---
def test_the_node_on_sockets_is_named_even_in_a_two_node_pool():
    """N = 2: bandwidth cannot tell the two nodes apart, the transport can (only one fell back)."""
    a, b = hosts(2)
    pair = PairRun(0, (a, b), SLOW_PAIR_GBPS, transport="TCP sockets, not RDMA (...)", socket_hosts=(b,))
    d = doctor.diagnose([], [pair], [], Expectations.for_sku(H100))
    (s,) = [s for s in d.suspects if "sockets" in s.reason]
    assert (s.host, s.hca, s.verdict) == (b, None, Verdict.FAIL)
    assert s.evidence["pairs"][0]["transport"].startswith("TCP sockets")


def test_no_gdr_is_a_suspect_only_where_the_size_expects_it():
    a, b, c, d_ = hosts(4)
    pairs = [PairRun(1, (a, b), HEALTHY_PAIR_GBPS, transport="x", no_gdr_hosts=(b,)),
             PairRun(1, (c, d_), HEALTHY_PAIR_GBPS, transport="x")]
    assert [s.host for s in doctor.diagnose([], pairs, [], Expectations.for_sku(H100)).suspects] == [b]
    assert doctor.diagnose([], pairs, [], Expectations(expects_gdr=False)).suspects == ()


def test_every_node_on_sockets_is_a_note_not_a_list_of_suspects():
    names = hosts(4)
    pairs = [PairRun(1, (names[0], names[1]), 10.0, transport="x", socket_hosts=(names[0], names[1])),
             PairRun(1, (names[2], names[3]), 10.0, transport="x", socket_hosts=(names[2], names[3]))]
    d = doctor.diagnose([], pairs, [], Expectations.for_sku(H100))
    assert not [s for s in d.suspects if "sockets" in s.reason]
    assert any("every node checked (4)" in n and "fabric-wide" in n for n in d.notes)


# --- topology: torsets (issue 23) ---------------------------------------------------------------
def torsets_of(n: int, size: int) -> dict[int, str]:
    """Node index -> torset: consecutive blocks of `size` nodes."""
    return {i: f"torset-{i // size:02d}" for i in range(n)}


@pytest.mark.parametrize("n, size", [(8, 4), (16, 4), (12, 5), (64, 16), (100, 16), (9, 3), (6, 1)])
def test_rounds_within_every_torset_first_then_every_path_across(n, size):
    torsets = torsets_of(n, size)
    rounds = doctor.plan_pairs(n, torsets=torsets)
    tiers = [{torsets[a] == torsets[b] for a, b in r} for r in rounds]
    assert all(len(t) == 1 for t in tiers), "a round mixes tiers"
    kinds = [t.pop() for t in tiers]
    assert kinds == sorted(kinds, reverse=True), "every within-torset round comes before the across rounds"
    seen: set[frozenset[int]] = set()
    for pairs in rounds:
        nodes = [i for p in pairs for i in p]
        assert len(nodes) == len(set(nodes)), f"a node is in two pairs of one round: {pairs}"
        assert not {frozenset(p) for p in pairs} & seen
        seen |= {frozenset(p) for p in pairs}
    groups = {t: [i for i in range(n) if torsets[i] == t] for t in set(torsets.values())}
    for i in range(n):  # within: as many partners as the flat plan gives, where the torset has them
        mine = {j for p in seen if i in p for j in p if j != i and torsets[j] == torsets[i]}
        assert len(mine) >= min(doctor.PAIR_PARTNERS, len(groups[torsets[i]]) - 1)
    paths = {frozenset((torsets[a], torsets[b])) for p in seen for a, b in [tuple(p)] if torsets[a] != torsets[b]}
    assert len(paths) == len(groups) * (len(groups) - 1) // 2  # every path between two torsets is measured
    within_rounds, across_rounds = kinds.count(True), kinds.count(False)
    assert within_rounds <= doctor.PAIR_PARTNERS + 1
    assert across_rounds == len(groups) - 1 + len(groups) % 2  # the circle method over torsets


def test_no_torsets_or_one_torset_plans_as_before():
    for n in (4, 7, 64):
        assert doctor.plan_pairs(n, torsets={i: "t0" for i in range(n)}) == doctor.plan_pairs(n)
    assert doctor.plan_pairs(2, torsets={0: "a", 1: "b"}) == ()


def test_a_node_without_a_torset_is_refused_by_index():
    with pytest.raises(ValueError, match=r"torsets: node index\(es\) 3 have no torset"):
        doctor.plan_pairs(4, torsets={0: "a", 1: "a", 2: "b"})


def run_torset_plan(n: int, size: int, *, bad_nodes: frozenset[int] = frozenset(),
                    bad_paths: frozenset[frozenset[str]] = frozenset(), healthy: float = HEALTHY_PAIR_GBPS,
                    slow: float = SLOW_PAIR_GBPS) -> tuple[list[PairRun], dict]:
    """The planned rounds with torsets; a pair is slow when it has a bad node or crosses a bad path."""
    names, torsets = hosts(n), torsets_of(n, size)
    out = []
    for r, pairs in enumerate(doctor.plan_pairs(n, torsets=torsets), start=1):
        for a, b in pairs:
            bad = {a, b} & bad_nodes or frozenset((torsets[a], torsets[b])) in bad_paths
            out.append(PairRun(round=r, hosts=(names[a], names[b]), busbw_gbps=slow if bad else healthy))
    return out, {names[i]: t for i, t in torsets.items()}


SLOW_PATH = frozenset({frozenset(("torset-00", "torset-01"))})


def test_only_cross_torset_pairs_slow_names_no_node_and_reports_the_path():
    pairs, torsets = run_torset_plan(12, 4, bad_paths=SLOW_PATH)  # three torsets of four; one path slow
    found = doctor.diagnose([], pairs, [], Expectations.for_sku(H100), torsets)
    assert found.suspects == ()
    (path,) = [n for n in found.notes if "path between torset" in n]
    assert path.startswith("the path between torset torset-00 and torset torset-01: 4 of its 4 pairs are slow")
    assert "not a node" in path
    assert found.tiers["within-torset"] == {"pairs": 18, "slow": 0, "median_busbw_gbps": HEALTHY_PAIR_GBPS,
                                            "min_busbw_gbps": HEALTHY_PAIR_GBPS}
    assert found.tiers["across-torsets"]["slow"] == 4 and found.tiers["across-torsets"]["pairs"] == 12
    assert found.tiers["torset-00|torset-01"]["median_busbw_gbps"] == SLOW_PAIR_GBPS
    assert found.tiers["torset-00|torset-02"]["slow"] == 0
    # without the torsets the same pairs read as four slow pairs of cleared nodes, one note each
    flat = doctor.diagnose([], pairs, [], Expectations.for_sku(H100))
    assert flat.suspects == () and flat.tiers == {}
    assert sum("the path between them" in n for n in flat.notes) == 4


def test_a_node_slow_in_every_pair_is_named_beside_a_slow_torset_path():
    pairs, torsets = run_torset_plan(12, 4, bad_nodes=frozenset({1}), bad_paths=SLOW_PATH)
    found = doctor.diagnose([], pairs, [], Expectations.for_sku(H100), torsets)
    assert [s.host for s in found.suspects] == [hosts(12)[1]]
    assert "node common to the slow pairs" in found.suspects[0].reason
    (path,) = [n for n in found.notes if "path between torset" in n]
    assert "torset-00 and torset torset-01: 3 of its 4 pairs are slow" in path  # the 4th is the bad node's


def test_pairs_are_compared_within_their_tier():
    """Across torsets every pair is 30 % slower (still above the line): a tier's figure and a note,
    no slow pair, no suspect."""
    pairs, torsets = run_torset_plan(8, 4)
    pairs = [PairRun(p.round, p.hosts, p.busbw_gbps * (0.7 if torsets[p.hosts[0]] != torsets[p.hosts[1]] else 1.0))
             for p in pairs]
    exp = Expectations()  # no line: only the relative rule
    found = doctor.diagnose([], pairs, [], exp, torsets)
    assert found.suspects == () and found.slow_pairs == ()
    assert any(n.startswith("pairs across torsets reach 70% of pairs within one") for n in found.notes)


# --- relative to the peers when every pair is below the line (issue 23, measured case) -----------
def test_every_pair_below_the_line_and_one_node_ten_times_slower_names_that_node():
    """Four hosts, one at a tenth, every pair below the size's own 2-node line (as measured with tc on
    one GPU machine): the node is named, and a note says the whole fabric is below its line too."""
    exp = Expectations.for_sku(H100)
    below = exp.pair_slow_below_gbps * 0.6
    runs = run_plan(4, {2}, healthy=below, slow=below / 10)
    found = doctor.diagnose([], runs, [], exp)
    assert [s.host for s in found.suspects] == [hosts(4)[2]]
    s = found.suspects[0]
    assert "far below the other pairs" in s.reason and "every pair is also below the line" in s.reason
    assert s.evidence["every_pair_below_line"] is True
    assert any(n.startswith("all 6 pairs are below the 2-node line") and "whole fabric is below its line" in n
               for n in found.notes)
    assert not any("the cause is not one node" in n for n in found.notes)
    assert len(found.slow_pairs) == 3


def test_every_pair_equally_below_the_line_still_names_no_node():
    exp = Expectations.for_sku(H100)
    found = doctor.diagnose([], run_plan(4, set(), healthy=exp.pair_slow_below_gbps * 0.6), [], exp)
    assert found.suspects == ()
    assert any("the cause is not one node" in n for n in found.notes)


def test_a_host_to_torset_mapping_gives_the_planners_indices():
    from verify import torsets

    names = hosts(4)
    labels = {names[0]: "a", names[1]: "b", names[2]: "a", names[3]: "b"}
    assert torsets.by_index(names, labels) == {0: "a", 1: "b", 2: "a", 3: "b"}
    assert doctor.plan_pairs(4, torsets=torsets.by_index(names, labels))[0] == ((0, 2), (1, 3))  # within first
    with pytest.raises(ValueError, match="node index"):
        doctor.plan_pairs(4, torsets=torsets.by_index(names, {names[0]: "a"}))
