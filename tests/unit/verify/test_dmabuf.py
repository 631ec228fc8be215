"""GPUDirect over DMA-BUF (rdmaDriver inbox), judged from NCCL's own lines: the constructed logs of each
case (tests/data/nccl-info_constructed_dmabuf.md says where each line comes from), the verdict, the CLI,
the launcher's log filter, and the fabric doctor's pairs that admit a node."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from core import catalog, rdma_drivers
from tests.nccl_logs import H100_HOSTS, dmabuf_case_logs, launcher_log
from tests.paths import DATA, ROOT
from verify import __main__ as cli
from verify import dmabuf, launcher_env, nccl, transport
from verify.doctor import diagnose
from verify.doctor_checks import Expectations, PairRun
from verify.verdict import Verdict, judge

H100 = "Standard_ND96isr_H100_v5"
CASES = dmabuf_case_logs()


def case(name: str) -> str:
    return next(text for file, text in CASES.items() if f"_{name}_" in file)


def verdict(text: str, driver: str) -> tuple[Verdict, tuple[str, ...]]:
    j = judge(nccl.parse(text), sku=H100, nodes=2, rdma_driver=rdma_drivers.rdma_driver(driver))
    return j.verdict, j.reasons


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_data_files_are_the_constructed_cases(name):
    assert (DATA / name).read_text() == CASES[name]


def test_every_hca_showing_dmabuf_passes_as_inbox_and_says_so():
    v, reasons = verdict(case("inbox-dmabuf-every-hca"), "inbox")
    assert v is Verdict.PASS
    assert "GPUDirect over DMA-BUF on 16 HCAs of 2 hosts (NCCL's own lines, rdmaDriver inbox)" in reasons


def test_gpudirect_through_peermem_is_no_proof_of_dmabuf():
    """The same figure and GDRDMA on every channel: PASS on a DOCA pool, FAIL on an inbox one, where no peer
    memory exists and NCCL's DMA-BUF line is what shows the path."""
    text = case("doca-peermem")
    assert verdict(text, "doca")[0] is Verdict.PASS
    v, reasons = verdict(text, "inbox")
    assert v is Verdict.FAIL
    assert any("no 'DMA-BUF is available on GPU device' line from nccl-allreduce-mpiworker-0, "
               "nccl-allreduce-mpiworker-1" in r and "open ones (driver.kernelModuleType: open)" in r for r in reasons)


def test_no_gpu_dmabuf_names_the_gpu_driver_not_the_hcas():
    v, reasons = verdict(case("inbox-no-gpu-dmabuf"), "inbox")
    dma = [r for r in reasons if r.startswith("GPUDirect over DMA-BUF not shown")]
    assert v is Verdict.FAIL and len(dma) == 1 and "the GPU driver offers no DMA-BUF" in dma[0]


def test_one_hosts_hcas_without_dmabuf_name_that_host_and_the_kernel_or_rdma_core():
    v, reasons = verdict(case("inbox-hca-no-dmabuf-one-host"), "inbox")
    dma = [r for r in reasons if r.startswith("GPUDirect over DMA-BUF not shown")]
    assert v is Verdict.FAIL and len(dma) == 1
    assert f"for {H100_HOSTS[1]}: mlx5_ib0," in dma[0] and H100_HOSTS[0] not in dma[0]
    assert "a node kernel older than 5.12, or rdma-core in the test image older than v34" in dma[0]


def test_one_hca_of_eight_without_the_line_is_named():
    text = case("inbox-dmabuf-every-hca")
    gone = [x for x in text.splitlines() if H100_HOSTS[0] in x and x.endswith("Enabled for HCA 3 'mlx5_ib3'")]
    lines = [x for x in text.splitlines() if x not in gone]
    assert len(gone) == 8  # one line per rank of the host
    found = dmabuf.problems(transport.parse("\n".join(lines)))
    assert found == [f"no 'GPU Direct RDMA Enabled for HCA' line for {H100_HOSTS[0]}: mlx5_ib3: {dmabuf.NO_HCA_DMABUF}"]


def test_a_log_without_nccls_info_lines_cannot_pass_as_inbox():
    """Without NCCL_DEBUG=INFO the DOCA pool keeps its bandwidth verdict, with a note; an inbox pool's
    GPUDirect cannot be shown, so it is FAIL."""
    text = "\n".join(x for x in case("inbox-dmabuf-every-hca").splitlines() if "NCCL INFO" not in x)
    assert verdict(text, "doca")[0] is Verdict.PASS
    v, reasons = verdict(text, "inbox")
    assert v is Verdict.FAIL and any("the log has no NCCL INFO lines" in r for r in reasons)


def test_the_rule_applies_to_gpu_sizes_across_nodes_only():
    text = case("doca-peermem")
    one = judge(nccl.parse(text), sku=H100, nodes=1, rdma_driver=rdma_drivers.INBOX)
    assert not any("DMA-BUF" in r for r in one.reasons)
    assert not rdma_drivers.gdr_via_dmabuf(catalog.lookup("Standard_HB176rs_v4"), rdma_drivers.INBOX)
    assert not rdma_drivers.gdr_via_dmabuf(catalog.lookup(H100), rdma_drivers.DOCA)


@pytest.mark.parametrize(("name", "doca", "inbox"), [
    ("inbox-dmabuf-every-hca", 0, 0), ("doca-peermem", 0, 1), ("inbox-no-gpu-dmabuf", 1, 1),
    ("inbox-hca-no-dmabuf-one-host", 1, 1)])
def test_verify_report_judges_a_saved_log_the_same_way(capsys, name, doca, inbox):
    path = next(str(DATA / f) for f in CASES if f"_{name}_" in f)
    for driver, code in (("doca", doca), ("inbox", inbox)):
        rc = cli.main(["report", path, "--sku", H100, "--nodes", "2", "--rdma-driver", driver, "--fail-on", "fail",
                       "--json"])
        out = json.loads(capsys.readouterr().out)
        assert (rc, out["verdict"]) == (code, "FAIL" if code else "PASS"), (driver, out["reasons"])


def test_report_refuses_an_unknown_driver(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["report", str(DATA / next(iter(CASES))), "--rdma-driver", "mofed"])
    assert exc.value.code == 2 and "invalid choice: 'mofed'" in capsys.readouterr().err


def condensed(text: str, dmabuf_lines: bool) -> str:
    """The launcher's own filter (scripts/nccl-launcher.sh --condense-nccl-log), run for real."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nccl-launcher.sh"), "--condense-nccl-log"], input=text,
                          capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, **launcher_env.log_filter_env(dmabuf=dmabuf_lines)})
    return done.stdout


def test_the_launchers_filter_keeps_the_dmabuf_lines_where_the_verdict_needs_them():
    text = case("inbox-dmabuf-every-hca")
    kept = condensed(text, True)
    assert kept.count("DMA-BUF is available on GPU device") == 16
    assert verdict(kept, "inbox")[0] is Verdict.PASS
    # the filter of a DOCA pool is unchanged, and drops them: such a log could never pass as inbox
    assert "DMA-BUF is available" not in condensed(text, False)


def pair(hosts: tuple[str, str], text: str) -> PairRun:
    t = transport.parse(text)
    return PairRun(1, hosts, 370.0, transport=t.summary(2), no_gdr_hosts=t.hosts_without_gdr(),
                   no_dmabuf_hosts=dmabuf.hosts_without(t))


def test_a_fast_doctor_pair_without_dmabuf_makes_its_node_a_suspect_on_an_inbox_pool():
    """The certifier admits a node from a fast doctor pair (clusterside/certify.py): on an inbox pool the pair
    must show DMA-BUF too, or the node is a suspect and never admitted."""
    hosts = ["n0", "n1", "n2"]
    good = launcher_log(hosts[:2], 8, busbw_gbps=370.0, dmabuf_hosts=hosts[:2])
    bad = launcher_log(hosts[1:], 8, busbw_gbps=370.0, dmabuf_hosts=["n1"])  # n2: GDRDMA, no DMA-BUF line
    pairs = [pair(("n0", "n1"), good), pair(("n1", "n2"), bad)]
    sku = catalog.lookup(H100)
    inbox = diagnose([], pairs, [], Expectations.for_sku(sku, rdma_driver=rdma_drivers.INBOX))
    assert [(s.host, s.verdict) for s in inbox.suspects] == [("n2", Verdict.FAIL)]
    assert "do not show GPUDirect over DMA-BUF" in inbox.suspects[0].reason
    assert diagnose([], pairs, [], Expectations.for_sku(sku)).suspects == ()


def test_a_doctor_pair_without_dmabuf_never_admits_a_node_through_the_certifier():
    """The whole path on an inbox pool: three nodes, node-2's GPUs offer no DMA-BUF, every pair is fast. The
    pairs with node-2 are failed runs in the result (verify/doctor_report.py), node-2 is a FAIL suspect, and
    the certifier's fast peers (clusterside/certify.py) never include it; judged as doca, it would be admitted."""
    from clusterside import certify
    from verify import doctor, readers, sections

    hosts = ["node-0", "node-1", "node-2"]
    proven = ["node-0", "node-1"]
    out = [sections.marker("allreduce", hosts=hosts), launcher_log(hosts, 8, busbw_gbps=300.0, dmabuf_hosts=proven),
           sections.marker("doctor", mode="always", run="yes", reason="always", budget_s=600)]
    for r, pairs in enumerate(doctor.plan_pairs(3), start=1):
        for a, b in pairs:
            out.append(sections.marker("pair", round=r, hosts=[hosts[a], hosts[b]]))
            out.append(launcher_log([hosts[a], hosts[b]], 8, busbw_gbps=370.0, dmabuf_hosts=proven))
    out.append(sections.marker("doctor-end", elapsed_s=300, budget_s=600))
    log = "\n".join(out) + "\n"
    names = {h: h for h in hosts}

    def judged(driver: str) -> dict:
        settings = readers.Settings(sku=H100, nodes=3, threshold=None, rdma_driver=driver)
        return readers.reader("nccl").judge(log, settings).result.to_json()

    inbox, doca = judged("inbox"), judged("doca")
    assert "node-2" not in certify.fast_peers(inbox, names) and set(certify.fast_peers(inbox, names)) == set(proven)
    assert "FAIL" in {s["verdict"] for s in inbox["suspects"] if s["host"] == "node-2"}
    assert {s["host"] for s in inbox["suspects"]} == {"node-2"}
    assert all(p["failure"].startswith("GPUDirect over DMA-BUF not shown on node-2")
               for p in inbox["doctor"]["pairs"] if "node-2" in p["hosts"])
    assert set(certify.fast_peers(doca, names)) == set(hosts)
