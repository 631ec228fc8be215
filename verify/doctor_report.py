"""The fabric doctor in the report: read its sections from a launcher log, name the suspects, and
fold them into the all-reduce's verdict (the overall verdict is the worst finding).

The parts of the result (verify/result.py) it adds to `python -m verify` output (public: the stack
exports `suspects` as fabricSuspects):
- `suspects`: a list of {host, hca (or null), reason, evidence, verdict};
- `doctor`: {mode, ran, reason, finished, elapsed_s, budget_s, notes, pairs, hca_bw, skipped, tiers}.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from core import catalog, rdma_drivers
from verify import logread, result, sections
from verify.doctor import diagnose
from verify.doctor_checks import Diagnosis, Expectations, PairRun
from verify.verdict import Verdict


@dataclass(frozen=True)
class DoctorAssessment:
    run: sections.DoctorRun
    diagnosis: Diagnosis
    expectations: Expectations

    @property
    def verdict(self) -> Verdict:
        return self.diagnosis.verdict

    def reasons(self) -> list[tuple[Verdict, str]]:
        out = [(s.verdict, f"suspect {s.host}" + (f" {s.hca}" if s.hca else "") + f": {s.reason}")
               for s in self.diagnosis.suspects]
        if self.run.ran and not self.run.finished:
            out.append((Verdict.WARN, "the fabric doctor did not finish (no doctor-end marker): the job's deadline "
                                      "or the doctor's time budget cut it short; its findings are partial"))
        return out

    def as_result(self) -> result.Doctor:
        """The `doctor` block of the result (verify/result.py)."""
        run = self.run
        return result.Doctor(
            mode=run.mode,
            ran=run.ran,
            reason=sections.REASONS.get(run.reason or "", run.reason),
            decision=run.decision or None,
            finished=run.finished,
            elapsed_s=run.elapsed_s,
            budget_s=run.budget_s,
            nodes_checked=tuple(n.host for n in run.nodes),
            pairs=tuple(_pair(p) for p in run.pairs),
            slow_pairs=tuple(_pair(p) for p in self.diagnosis.slow_pairs),
            hca_bw=tuple(result.HcaBandwidth(hosts=tuple(b.hosts), hca=b.device, bw_gbits=b.bw_gbits,
                                             failure=b.failure, memory=b.memory) for b in run.hca_bws),
            skipped=tuple(dict(s) for s in run.skipped),
            notes=(*self.diagnosis.notes, *run.not_kept),
            # per tier (within-torset, across-torsets) and per path between torsets ("A|B"), when the
            # caller gave the nodes' torsets; {} otherwise
            tiers={k: dict(v) for k, v in self.diagnosis.tiers.items()},
        )

    def suspects(self) -> tuple[result.Suspect, ...]:
        return tuple(result.Suspect(host=s.host, hca=s.hca, reason=s.reason, evidence=s.evidence,
                                    verdict=s.verdict.value) for s in self.diagnosis.suspects)


def _pair(p: PairRun) -> result.DoctorPair:
    return result.DoctorPair(round=p.round, hosts=tuple(p.hosts), busbw_gbps=p.busbw_gbps, failure=p.failure,
                             transport=p.transport)


def expectations(sku: str | None, threshold_gbps: float | None,
                 rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA) -> Expectations:
    if not sku:
        return Expectations(pair_threshold_gbps=threshold_gbps,
                            pair_threshold_source="threshold override" if threshold_gbps is not None else None)
    try:
        return Expectations.for_sku(catalog.lookup(sku), threshold_gbps, rdma_driver)
    except KeyError:
        return Expectations(pair_threshold_gbps=threshold_gbps)


def assess(log: str | logread.LogFold, *, sku: str | None, threshold_gbps: float | None,
           torsets: Mapping[str, str] | None = None,
           rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA) -> DoctorAssessment:
    """The doctor's findings in `log` (its text, or the one pass over it: verify.logread). A 2-node run's
    all-nodes section is its one pair (round 0), so that the per-HCA figures and the per-node checks have
    a slow pair to explain. `torsets`: host (as the log's markers name it) -> torset, when known
    (verify.doctor.diagnose)."""
    read = logread.fold(log, p2p=False)
    run = read.doctor_run()
    exp = expectations(sku, threshold_gbps, rdma_driver)
    if exp.gdr_via_dmabuf:  # a pair that does not show DMA-BUF proves no node of it: never a fast pair
        run = dataclasses.replace(run, pairs=tuple(_unproven(p) for p in run.pairs))
    pairs = list(run.pairs)
    if run.ran and not pairs and (round0 := read.round0_pair()) is not None:
        pairs.append(round0)
    return DoctorAssessment(run, diagnose(run.nodes, pairs, run.hca_bws, exp, torsets), exp)


def _unproven(p: PairRun) -> PairRun:
    """`p` as a failed run where its NCCL lines do not show GPUDirect over DMA-BUF (verify/dmabuf.py)."""
    if p.failure or (p.transport is not None and not p.no_dmabuf_hosts):
        return p
    where = ", ".join(p.no_dmabuf_hosts) if p.transport is not None else "either node (no NCCL INFO lines)"
    return dataclasses.replace(p, failure=f"GPUDirect over DMA-BUF not shown on {where}")


def merge(out: result.FabricResult, assessment: DoctorAssessment) -> result.FabricResult:
    """`out` (an all-reduce result) with `suspects` and `doctor` added, and the verdict and reasons
    raised to the worst finding."""
    findings = assessment.reasons()
    current = Verdict(out.verdict) if out.verdict in Verdict.__members__ else Verdict.UNKNOWN
    worst = max([current, *(v for v, _ in findings)], key=lambda v: v.severity)
    return dataclasses.replace(
        out, verdict=worst.value,
        reasons=(*out.reasons, *(r for _, r in sorted(findings, key=lambda f: -f[0].severity))),
        suspects=assessment.suspects(), doctor=assessment.as_result())


def text(assessment: DoctorAssessment) -> str:
    """The doctor's block of the readable report."""
    run = assessment.run
    if run.mode is None:
        return ""
    lines = ["", f"fabric doctor ({run.mode}): " + ("ran" if run.ran else "did not run")
             + f" - {sections.REASONS.get(run.reason or '', run.reason or '')}"]
    if run.ran:
        took = f"{run.elapsed_s} s" if run.elapsed_s is not None else "unfinished"
        lines.append(f"  checked {len(run.nodes)} node(s), {len(run.pairs)} pair run(s), "
                     f"{len(run.hca_bws)} HCA ib_write_bw run(s); took {took}"
                     + (f" of a {run.budget_s} s budget" if run.budget_s else ""))
        for s in run.skipped:
            lines.append("  skipped: " + " ".join(f"{k}={v}" for k, v in s.items()))
    for s in assessment.diagnosis.suspects:
        lines.append(f"  SUSPECT {s.host}" + (f" {s.hca}" if s.hca else "") + f" [{s.verdict.value}]: {s.reason}")
    for n in (*assessment.diagnosis.notes, *run.not_kept):
        lines.append(f"  note: {n}")
    for tier, f in assessment.diagnosis.tiers.items():
        lines.append(f"  {tier}: {f['pairs']} pair(s), {f['slow']} slow, median {f['median_busbw_gbps']} GB/s, "
                     f"lowest {f['min_busbw_gbps']}")
    if run.ran and not assessment.diagnosis.suspects:
        lines.append("  no node or HCA named" + ("" if assessment.diagnosis.notes else
                                                  ": every node, pair and HCA checked is within its expectation"))
    return "\n".join(lines) + "\n"
