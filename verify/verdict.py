"""The verdict on a parsed nccl-tests run: PASS, WARN, FAIL or UNKNOWN, with the reasons.

The rules, in one place (docs/fabric-test.md shows them as a table):

- The figure judged is the out-of-place bus bandwidth at the LARGEST message size, not the footer's
  "Avg bus bandwidth" (which averages every row, small messages too).
- FAIL: the run failed (nccl-tests/NCCL failure lines, or the job failed), printed no rows, reported
  wrong results (#wrong > 0 or out-of-bounds values > 0), ran on fewer hosts than the nodes it was meant
  to span, or its busbw at the largest size is below the threshold - unless that threshold is the
  catalog's and DERIVED rather than measured (ND H100/H200 v5): then it is WARN, with a reason that
  says so, because no published figure proves the fabric bad (set a threshold to make it a FAIL) -
  but below `FLOOR_FRACTION_OF_BASELINE` x baseline it is FAIL whatever the threshold's origin, a
  threshold you set below that floor included.
- FAIL, from NCCL's own INFO lines (`verify.transport`), on a run across nodes: a rank selected the
  Socket network or an inter-node connection went over NET/Socket (TCP, not RDMA); or, on a size
  whose catalog entry expects GPUDirect RDMA (every ND size), an RDMA inter-node connection ran
  without GDRDMA (staged through host memory); or, on a GPU pool whose RDMA driver has no peer memory
  (`rdma_driver` inbox, core/rdma_drivers.py), NCCL's lines do not show GPUDirect over DMA-BUF on every HCA of
  every host (verify/dmabuf.py: the lines, their NCCL source, the causes), a log without them included.
- WARN, from the same lines: a host opened fewer InfiniBand HCAs than the catalog's HCAs per VM, or
  a host named by nccl-tests logged no transport line. A log without transport lines (NCCL_DEBUG
  not INFO) keeps the bandwidth verdict, with a note that the transport was not checked.
- UNKNOWN: nothing to judge against, or nothing fit to judge: no SKU given, no expectation for the SKU
  at that node count (the catalog says so rather than guess), a single node (the fabric was never
  crossed), a largest message below `MIN_JUDGED_SIZE_BYTES` (bandwidth is still climbing there), or a
  log cut off before the footer.
- WARN: judged, above the threshold but below `WARN_FRACTION_OF_BASELINE` x baseline, where that
  threshold is the catalog's published one (`warn_below_gbps`: no band above a derived threshold or
  the user's); or the rank count differs from nodes x GPUs per VM.
- PASS: none of the above.

When several apply the worst wins, in the order FAIL > UNKNOWN > WARN > PASS. A threshold override
(the stack's `fabricTest.thresholdGbps`, the CLI's `--threshold-gbps`) replaces the catalog's
threshold and lets a SKU without an expectation be judged against it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from core import catalog, modes, rdma_drivers
from core.expectations import FLOOR_FRACTION_OF_BASELINE, Expectation
from verify import dmabuf, figures
from verify.nccl_result import NcclResult
from verify.transport import SOCKET, Transport, natural_key

# Below this fraction of the baseline (and above the threshold) a run is WARN. Azure's published fail
# line sits at 96 % of its baseline (180 of 187 GB/s), so the WARN band is the narrow stretch where a
# run is below what a healthy fabric measured but above the line that says it is broken. Only where
# both are published (`warn_below_gbps`).
WARN_FRACTION_OF_BASELINE = 0.97
# A run whose largest message is smaller than this has not reached the bandwidth plateau.
MIN_JUDGED_SIZE_BYTES = 1 << 30
FROM_CATALOG = object()  # judge()'s default: look the expectation up in the catalog


class Verdict(enum.StrEnum):
    PASS = "PASS"
    WARN = "WARN"
    UNKNOWN = "UNKNOWN"
    FAIL = "FAIL"

    @property
    def severity(self) -> int:
        return {"PASS": 0, "WARN": 1, "UNKNOWN": 2, "FAIL": 3}[self.value]


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reasons: tuple[str, ...]
    nodes: int | None  # the node count judged (given, or the hosts the log names)
    sku: str | None
    baseline_gbps: float | None
    threshold_gbps: float | None
    warn_below_gbps: float | None
    expectation_source: str | None
    judged_busbw_gbps: float | None
    fail_below_gbps: float | None = None  # the floor: FAIL below it whatever the threshold's origin


def plural(n: int | None, noun: str) -> str:
    """"1 node", "2 nodes"."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def headline(verdict: Verdict, sku: str | None, figure: str | None, size_bytes: int | None,
             threshold: str | None) -> str:
    """The first line of a report, the same for both kinds of result:
    `VERDICT: X — <sku>, <figure> at <size>, threshold <t>` (what was judged, against what)."""
    parts = [sku or "no SKU given"]
    if figure is None:
        parts.append("no figure to judge")
    else:
        parts += [f"{figure} at {_size(size_bytes or 0)}", f"threshold {threshold}" if threshold else "no threshold"]
    return f"VERDICT: {verdict.value} — {', '.join(parts)}"


def warn_below_gbps(expectation: Expectation | None, threshold_gbps: float | None = None) -> float | None:
    """The WARN line below the baseline (`WARN_FRACTION_OF_BASELINE` x baseline), or None where there
    is no WARN band: it applies only when the threshold judged is the catalog's PUBLISHED one - not
    when the expectation is derived (a derived baseline is not a measurement to fall short of), and
    not when the user's threshold (`threshold_gbps`) replaces the catalog's."""
    if expectation is None or expectation.derived or threshold_gbps is not None:
        return None
    return expectation.baseline_gbps * WARN_FRACTION_OF_BASELINE


def pass_line_gbps(expectation: Expectation | None, threshold_gbps: float | None = None) -> float | None:
    """The busbw at the largest size at and above which judge()'s bandwidth rules give PASS: the
    threshold (the override, else the expectation's) and the WARN line (`warn_below_gbps`), whichever
    is higher. None when there is no threshold (the verdict cannot be PASS). The fabric test's
    launcher compares the all-nodes run against it to decide whether the doctor runs (`auto`), and a
    doctor's pair against the 2-node one to call it slow (verify.doctor_checks.Expectations)."""
    threshold = threshold_gbps if threshold_gbps is not None else (expectation.threshold_gbps if expectation else None)
    if threshold is None:
        return None
    lines = [float(threshold), warn_below_gbps(expectation, threshold_gbps),
             expectation.baseline_gbps * FLOOR_FRACTION_OF_BASELINE if expectation else None]  # the floor holds always
    return max(x for x in lines if x is not None)


def _gbps(x: float) -> str:
    """A busbw in a reason: two decimals, and small figures with their significant digits (never 0.00)."""
    return f"{x:.2f}" if abs(x) >= 0.1 else figures.figure(x)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:g} {unit}"
    return f"{n} B"


def judge(
    result: NcclResult,
    *,
    sku: str | None = None,
    nodes: int | None = None,
    threshold_gbps: float | None = None,
    job_failed: str | None = None,
    expectation: Expectation | None | object = FROM_CATALOG,
    rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA,
) -> Judgement:
    """Judge `result`. `nodes` defaults to the number of distinct hosts the log names.
    `job_failed` is a message when the job that ran the test ended badly (the collector passes it).
    `rdma_driver`: the pool's driver stack; with DMA-BUF, PASS needs NCCL to show it on every HCA.
    `expectation` replaces the catalog's entry for (sku, nodes) - for tests and what-ifs."""
    findings: list[tuple[Verdict, str]] = []
    notes: list[str] = []  # said, but no bearing on the verdict

    def add(verdict: Verdict, reason: str) -> None:
        findings.append((verdict, reason))

    hosts = result.hosts
    nodes_given = nodes is not None
    if nodes is None and hosts:
        nodes = len(hosts)

    entry: catalog.Sku | None = None
    if sku:
        try:
            entry = catalog.lookup(sku)
        except KeyError as exc:
            add(Verdict.UNKNOWN, str(exc.args[0]))
    if nodes is None and entry and entry.gpus_per_vm and result.ranks and result.ranks % entry.gpus_per_vm == 0:
        nodes = result.ranks // entry.gpus_per_vm  # the log names no hosts: one rank per GPU, every GPU used
        notes.append(f"{plural(nodes, 'node')}: {result.ranks} ranks / {entry.gpus_per_vm} GPUs per "
                     f"{entry.vm_size} (the log names no hosts; pass --nodes if that is wrong)")

    # -- did the run run? ----------------------------------------------------------------------
    if job_failed:
        add(Verdict.FAIL, f"the job failed: {job_failed}")
    if result.errors:
        shown = "; ".join(result.errors[:3]) + (f" (+{len(result.errors) - 3} more)" if len(result.errors) > 3 else "")
        add(Verdict.FAIL, f"the run failed: {shown}")
    if not result.rows:
        add(Verdict.FAIL, "the log has no result rows: the test never measured anything")
    elif not result.complete:
        add(
            Verdict.UNKNOWN,
            f"the log is cut off: no footer ('# Out of bounds values' / 'Avg bus bandwidth') after the row "
            f"for {_size(result.max_size_bytes or 0)}",
        )

    # -- are the results right? ----------------------------------------------------------------
    if result.wrong:
        add(Verdict.FAIL, f"{result.wrong} wrong elements reported (#wrong > 0): the all-reduce returned bad data")
    if result.out_of_bounds:
        add(Verdict.FAIL, f"{result.out_of_bounds} out-of-bounds values reported by nccl-tests")

    # -- did it cross the fabric? --------------------------------------------------------------
    crossed = True  # whether the measured bandwidth is the fabric's at all
    if nodes_given and hosts and len(hosts) < (nodes or 0):
        crossed = False
        add(Verdict.FAIL, f"expected {plural(nodes, 'node')} but the ranks ran on {plural(len(hosts), 'host')}: "
                          f"{', '.join(hosts)}")
    if nodes_given and hosts and len(hosts) > (nodes or 0):
        # the figures are those of every host the ranks ran on, not of the count given
        add(Verdict.UNKNOWN, f"--nodes {nodes} but the ranks ran on {plural(len(hosts), 'host')}: {_hosts(hosts)}; "
                             f"the figures are of {plural(len(hosts), 'node')}: leave --nodes out to judge them so")
    elif result.ranks is not None and result.ranks < 2:
        add(Verdict.UNKNOWN, f"{plural(result.ranks, 'rank')}: nothing was exchanged")
    elif nodes is not None and nodes < 2:
        where = f" ({hosts[0]})" if hosts else ""
        add(Verdict.UNKNOWN, f"single node{where}: the run never crossed the InfiniBand fabric (NVLink/PCIe only)")
    elif nodes is None:
        add(Verdict.UNKNOWN, "node count unknown: the log names no hosts; pass --nodes")
    if entry and nodes and entry.gpus_per_vm and result.ranks is not None:
        expected_ranks = nodes * entry.gpus_per_vm
        if result.ranks != expected_ranks:
            add(
                Verdict.WARN,
                f"{result.ranks} ranks, expected {expected_ranks} ({plural(nodes, 'node')} x {entry.gpus_per_vm} "
                f"GPUs of {entry.vm_size}): the baseline assumes every GPU takes part",
            )

    # -- which transport did it use? (first: when it is wrong, it is why the figure is) ---------
    for verdict, reason in _transport_findings(result, entry, nodes):
        if verdict is None:
            notes.append(reason)
        else:
            add(verdict, reason)
    if entry is not None and rdma_drivers.gdr_via_dmabuf(entry, rdma_driver) and (nodes or 0) >= 2:
        missing = dmabuf.problems(result.transport or Transport())
        for why in missing:
            add(Verdict.FAIL, f"GPUDirect over DMA-BUF not shown (rdmaDriver {rdma_driver.name}, no nvidia-peermem): "
                              f"{why}")
        if not missing:
            notes.append(f"{dmabuf.summary(result.transport or Transport())} (NCCL's own lines, rdmaDriver "
                         f"{rdma_driver.name})")

    # -- is it fast enough? --------------------------------------------------------------------
    if expectation is FROM_CATALOG:
        expectation = entry.allreduce_expectation(nodes) if entry and nodes else None
    assert expectation is None or isinstance(expectation, Expectation)
    baseline = expectation.baseline_gbps if expectation else None
    threshold = expectation.threshold_gbps if expectation else None
    if threshold_gbps is not None:
        threshold = float(threshold_gbps)
    warn_below = warn_below_gbps(expectation, threshold_gbps)
    floor = baseline * FLOOR_FRACTION_OF_BASELINE if baseline is not None else None
    judged = result.busbw_at_max_size_gbps

    if not sku and threshold is None:
        add(Verdict.UNKNOWN, "no SKU given (--sku) and no --threshold-gbps: nothing to judge against")
    elif entry and nodes and nodes >= 2 and expectation is None and threshold is None:
        add(
            Verdict.UNKNOWN,
            f"the catalog has no all-reduce expectation for {entry.vm_size} with {plural(nodes, 'node')} "
            f"(no published figure yet); pass --threshold-gbps to judge against your own",
        )
    if judged is not None and threshold is not None and crossed and not (nodes is not None and nodes < 2):
        size = result.max_size_bytes or 0
        if size < MIN_JUDGED_SIZE_BYTES:
            add(
                Verdict.UNKNOWN,
                f"largest message {_size(size)} is below {_size(MIN_JUDGED_SIZE_BYTES)}: bus bandwidth has not "
                f"reached its plateau; run up to at least 1G (all_reduce_perf -e 8G)",
            )
        elif judged < threshold and (threshold_gbps is not None or expectation is None or not expectation.derived):
            add(Verdict.FAIL, f"busbw {_gbps(judged)} GB/s at {_size(size)} is below the threshold {threshold:g} GB/s")
        elif floor is not None and judged < floor:  # whatever the threshold's origin, the user's included
            whose = (f"your threshold {threshold:g} GB/s is below it, but" if threshold_gbps is not None
                     else "the baseline is derived, but")
            add(
                Verdict.FAIL,
                f"busbw {_gbps(judged)} GB/s at {_size(size)} is below {FLOOR_FRACTION_OF_BASELINE:.0%} of the "
                f"baseline {baseline:g} GB/s ({floor:g} GB/s): {whose} no working fabric is that slow",
            )
        elif judged < threshold:  # the catalog's threshold, derived
            add(
                Verdict.WARN,
                f"busbw {_gbps(judged)} GB/s at {_size(size)} is below the threshold {threshold:g} GB/s, which is "
                f"derived, not a published measurement; set a threshold (fabricTest.thresholdGbps, "
                f"--threshold-gbps) to make this a FAIL",
            )
        elif warn_below is not None and judged < warn_below:
            add(
                Verdict.WARN,
                f"busbw {_gbps(judged)} GB/s at {_size(size)} is above the threshold {threshold:g} GB/s but below "
                f"{WARN_FRACTION_OF_BASELINE:.0%} of the baseline {baseline:g} GB/s",
            )
        else:
            ref = f"baseline {baseline:g} GB/s, " if baseline is not None else ""
            findings.append(
                (Verdict.PASS, f"busbw {_gbps(judged)} GB/s at {_size(size)} ({ref}threshold {threshold:g} GB/s)")
            )

    notes += result.not_kept  # a log unlike any run's: what the bounded reader left out (verify.bounded)
    verdict = max((v for v, _ in findings), key=lambda v: v.severity, default=Verdict.UNKNOWN)
    reasons = tuple(r for v, r in sorted(findings, key=lambda f: -f[0].severity)) + tuple(notes)
    if not reasons:
        reasons = ("nothing to judge",)
    return Judgement(
        verdict=verdict,
        reasons=reasons,
        nodes=nodes,
        sku=entry.vm_size if entry else sku,
        baseline_gbps=baseline,
        threshold_gbps=threshold,
        warn_below_gbps=warn_below,
        expectation_source=expectation.source if expectation else None,
        judged_busbw_gbps=judged,
        fail_below_gbps=floor,
    )


# What a run without RDMA usually lacks in the pod, in the order to check it.
RDMA_CHECKLIST = (
    f"the worker pods' limits hold the RDMA resource ({' or '.join(modes.extended_resources())}) "
    "and the node advertises it "
    "(kubectl describe node: the RDMA device plugin of the NicClusterPolicy), /dev/infiniband is in the "
    "container, and the container has IPC_LOCK"
)
GDR_CHECKLIST = (
    "GPUDirect RDMA needs the GPU driver's peer-memory support: nvidia-peermem loaded by the GPU Operator "
    "(driver.rdma.enabled=true) or dma-buf (the open kernel modules on a kernel >= 5.12); "
    "NCCL_NET_GDR_LEVEL=SYS lets NCCL use it across the VM's PCI tree"
)


# From NCCL 2.30.3, src/graph/paths.cc logs "GPU Direct RDMA Disabled for ..." (the distance hint quoted
# above) at TRACE, not INFO (line 500 at v2.30.3-1 and v2.30.4-1), so its absence then says nothing.
SILENT_GDR_DISTANCE = (2, 30, 3)


def _nccl_version(text: str | None) -> tuple[int, ...]:
    """(2, 30, 4) of "2.30.4+cuda13.0"; () when unknown."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(g) for g in m.groups()) if m else ()


def _hosts(hosts: tuple[str, ...] | list[str], shown: int = 4) -> str:
    hosts = list(hosts)
    return ", ".join(hosts[:shown]) + (f" and {len(hosts) - shown} more" if len(hosts) > shown else "")


def _transport_findings(
    result: NcclResult, entry: catalog.Sku | None, nodes: int | None
) -> list[tuple[Verdict | None, str]]:
    """The transport rules (module docstring). A finding with verdict None is a note."""
    t = result.transport or Transport()
    if not t.seen:
        return [(None, "transport not checked: the log has no NCCL INFO transport lines ('Using network', "
                       "'NET/IB : Using', '... via NET/...'; the stack's job logs them with NCCL_DEBUG=INFO "
                       "NCCL_DEBUG_SUBSYS=INIT,NET)")]
    span = max(nodes or 0, t.nodes or 0, len(t.hosts))
    if span < 2:
        return [(None, f"transport: {t.summary(1)}")]
    found: list[tuple[Verdict | None, str]] = []
    if socket_hosts := t.socket_hosts:
        how = []
        if any(SOCKET in t.networks_by_host.get(h, ()) for h in socket_hosts):
            how.append("NCCL selected the Socket network")
        if sockets := {p: n for p, n in t.inter_node_channels.items() if p.split("/")[1] == SOCKET}:
            how.append("inter-node connections ran " + ", ".join(f"via {p} ({n} ends)" for p, n in sockets.items()))
        no_device = [h for h in t.no_ib_device_hosts if h in socket_hosts]
        why = (f"; NCCL found no InfiniBand device on {_hosts(no_device)} ('NET/IB : No device found')"
               if no_device else "")
        found.append((
            Verdict.FAIL,
            f"RDMA was not used: {' and '.join(how)} on {_hosts(socket_hosts)} (TCP over the pod network){why}; "
            f"check that {RDMA_CHECKLIST}",
        ))
    if entry is not None and entry.expects_gpudirect_rdma and t.gdr is False:
        rdma = t.rdma_channels
        without = sum(n for p, n in rdma.items() if not p.endswith("/GDRDMA"))
        cause = ""
        if t.gdr_disabled_hcas_by_host:
            hosts = list(t.gdr_disabled_hcas_by_host)
            cause = f"; NCCL reported 'GPU Direct RDMA Disabled for HCA' on {_hosts(hosts)}"
        elif t.gdr_distance_disabled_hosts:
            cause = (f"; NCCL disabled it by distance on {_hosts(t.gdr_distance_disabled_hosts)} "
                     f"(NCCL_NET_GDR_LEVEL, the topology file)")
        elif _nccl_version(result.nccl_version) >= SILENT_GDR_DISTANCE:
            cause = (f"; NCCL {result.nccl_version} no longer logs its distance check (from 2.30.3), so GPUs too "
                     f"far from their NIC for NCCL_NET_GDR_LEVEL (or a wrong topology file) may also be the cause")
        found.append((
            Verdict.FAIL,
            f"GPUDirect RDMA was not used: {without} of {sum(rdma.values())} inter-node connection ends ran without "
            f"GDRDMA on {_hosts(t.hosts_without_gdr())} ({', '.join(f'{p} x{n}' for p, n in rdma.items())}), so "
            f"data went through host memory{cause}; {entry.family} expects it: {GDR_CHECKLIST}",
        ))
    if entry is not None and entry.ib_hcas_per_vm and not socket_hosts:
        every = {name for names in t.hcas_by_host.values() for name in names}
        for host, names in t.hcas_by_host.items():
            if len(names) < entry.ib_hcas_per_vm:
                missing = sorted(every - set(names), key=natural_key)
                what = (f"missing {', '.join(missing)} (opened on other hosts)" if missing
                        else f"{entry.ib_hcas_per_vm - len(names)} missing (no host opened more)")
                found.append((
                    Verdict.WARN,
                    f"host {host} opened {len(names)} of the {entry.ib_hcas_per_vm} InfiniBand HCAs of {entry.vm_size} "
                    f"({', '.join(names) or 'none'}): {what}; check the HCAs' links (ibstat) and the RDMA "
                    f"resource of its worker pod",
                ))
        # NCCL's IB transport, and the IBext plugins, list their HCAs in a "NET/IB : Using" line
        ib_hosts = [h for h in t.hosts if all(n.startswith("IB") for n in t.networks_by_host.get(h, ()))]
        if unlisted := [h for h in ib_hosts if h not in t.hcas_by_host]:
            found.append((Verdict.WARN, f"no 'NET/IB : Using' line from {_hosts(unlisted)}: the log is incomplete "
                                        f"(rotated, or cut off), so their HCAs were not checked"))
    silent = [h for h in result.hosts if h.split(".")[0] not in t.hosts]
    if silent:
        found.append((Verdict.WARN, f"no NCCL transport line from {_hosts(silent)}: the log is incomplete "
                                    f"(rotated, or cut off), so their transport was not checked"))
    elif not result.hosts and nodes and len(t.hosts) < nodes:
        found.append((Verdict.WARN, f"only {len(t.hosts)} of {plural(nodes, 'node')} logged NCCL lines: the log is "
                                    f"incomplete (rotated, or cut off), so the others' transport was not checked"))
    if not found:
        found.append((Verdict.PASS, f"transport: {t.summary(span)}"))
    return found
