"""The all-reduce's report: the typed result (verify/result.py: one JSON object for the Pulumi step and
scripts) and a readable table (for people)."""

from __future__ import annotations

import math

from core import kinds
from verify.figures import figure as shown_figure
from verify.nccl_result import NcclResult
from verify.result import AllReduceFigures, FabricResult, SizeRow
from verify.result import Transport as ResultTransport
from verify.transport import Transport
from verify.verdict import Judgement, headline


def _num(value: float | None, digits: int = 2) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(float(value), digits)


def human_size(n: int) -> str:
    """8589934592 -> "8G", 1024 -> "1K", 8 -> "8" (the units nccl-tests' -b/-e take)."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def summary(result: NcclResult, judgement: Judgement) -> FabricResult:
    """Everything a caller needs, as the typed result (verify/result.py; its JSON keys are public API,
    the stack exports some of them)."""
    gpus_per_node = None
    if result.ranks_listed:  # ranks per host, when every host runs the same number
        per_host = {h: sum(1 for r in result.ranks_listed if r.host == h) for h in result.hosts}
        if len(set(per_host.values())) == 1 and result.ranks == len(result.ranks_listed):
            gpus_per_node = next(iter(per_host.values()))
    elif result.ranks is not None and judgement.nodes and result.ranks % judgement.nodes == 0:
        gpus_per_node = result.ranks // judgement.nodes
    figures = AllReduceFigures(
        max_size_bytes=result.max_size_bytes,
        busbw_at_max_size_gbps=_num(result.busbw_at_max_size_gbps),
        in_place_busbw_at_max_size_gbps=_num(result.in_place_busbw_at_max_size_gbps),
        max_busbw_gbps=_num(result.max_busbw_gbps),
        avg_busbw_gbps=_num(result.avg_busbw_gbps, 4),
        ranks=result.ranks,
        ranks_source=result.ranks_source,
        hosts=tuple(result.hosts) or None,
        gpus_per_node=gpus_per_node,
        gpus=tuple(result.gpus) or None,
        wrong=result.wrong,
        out_of_bounds=result.out_of_bounds,
        complete=result.complete,
        errors=tuple(result.errors),
        transport=(ResultTransport.from_json(result.transport.as_dict(judgement.nodes))
                   if result.transport is not None else None),
        nccl_version=result.nccl_version,
        nccl_tests_version=result.nccl_tests_version,
        test=result.test,
        baseline_gbps=judgement.baseline_gbps,
        threshold_gbps=judgement.threshold_gbps,
        warn_below_gbps=_num(judgement.warn_below_gbps),
        fail_below_gbps=_num(judgement.fail_below_gbps),
        expectation_source=judgement.expectation_source,
        source_format=result.source_format,
        rows=tuple(
            SizeRow(
                size_bytes=r.size_bytes,
                busbw_gbps=_num(r.out_of_place.busbw_gbps) if r.out_of_place else None,
                in_place_busbw_gbps=_num(r.in_place.busbw_gbps) if r.in_place else None,
            )
            for r in result.rows
        ),
        plot=None,
    )
    return FabricResult(kind=kinds.NCCL, verdict=judgement.verdict.value, reasons=tuple(judgement.reasons),
                        sku=judgement.sku, nodes=judgement.nodes, allreduce=figures)


def transport_block(transport: Transport | None, nodes: int | None) -> list[str]:
    """The text report's transport lines: what NCCL used between the nodes, per host where it matters."""
    if transport is None or not transport.seen:
        return ["transport:    not in the log (no NCCL INFO transport lines)"]
    gdr = {
        True: "yes, on every RDMA inter-node connection",
        False: "NO: some RDMA inter-node connections ran without it",
        None: "- (no RDMA inter-node connection)",
    }[transport.gdr]
    lines = [
        f"transport:    {transport.summary(nodes)}",
        f"  network:    {transport.network or 'not logged'}",
        f"  GPUDirect:  {gdr}",
    ]
    groups: dict[tuple[str, ...], list[str]] = {}
    for host, names in transport.hcas_by_host.items():
        groups.setdefault(names, []).append(host)
    for i, (names, hosts) in enumerate(sorted(groups.items(), key=lambda g: -len(g[1]))):
        shown = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        lines.append(f"  {'HCAs:' if i == 0 else '':<11} {len(names)} on {shown}: {', '.join(names) or 'none'}")
    channels = transport.inter_node_channels
    lines.append(f"  inter-node: {', '.join(f'{p} x{n}' for p, n in channels.items()) or 'no inter-node channel'}"
                 + ("  (connection ends: [send] and [receive] lines)" if channels else ""))
    if transport.plugins:
        lines.append(f"  plugins:    {', '.join(transport.plugins)}")
    warnings, count = transport.warnings, transport.warning_count
    lines.append(f"  NCCL WARN:  {count or 'none'}")
    lines += [f"    {w}" for w in warnings[:10]]
    if count > 10:
        lines.append(f"    (+{count - 10} more)")
    return lines


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def table(result: NcclResult, judgement: Judgement) -> str:
    """A readable report: the rows, the figures that matter, the verdict and why."""
    lines = [
        f"{'size':>8}  {'type':>6}  {'oop algbw':>9}  {'oop busbw':>9}  {'ip busbw':>9}  {'#wrong':>6}",
    ]
    for r in result.rows:
        oop, ip = r.out_of_place, r.in_place
        wrong = [m.wrong for m in r.measurements if m.wrong is not None]
        lines.append(
            f"{human_size(r.size_bytes):>8}  {r.type:>6}  {_fmt(oop.algbw_gbps if oop else None):>9}  "
            f"{_fmt(oop.busbw_gbps if oop else None):>9}  {_fmt(ip.busbw_gbps if ip else None):>9}  "
            f"{(str(sum(wrong)) if wrong else 'N/A'):>6}"
        )
    hosts = ", ".join(result.hosts) if result.hosts else "not named in the log"
    who = [
        f"ranks:        {result.ranks if result.ranks is not None else 'unknown'}"
        + (f"  (from {result.ranks_source})" if result.ranks_source else ""),
        f"hosts:        {hosts}",
        f"nodes judged: {judgement.nodes if judgement.nodes is not None else 'unknown'}",
    ]
    if result.gpus:
        who.append(f"GPUs:         {', '.join(result.gpus)}")
    versions = [
        f"nccl-tests {result.nccl_tests_version}" if result.nccl_tests_version else None,
        f"NCCL {result.nccl_version}" if result.nccl_version else None,
    ]
    if any(versions):
        who.append(f"versions:     {', '.join(v for v in versions if v)}")
    size = result.max_size_bytes
    figures = [
        f"busbw at largest size ({human_size(size) if size else '-'}): {_fmt(result.busbw_at_max_size_gbps)} GB/s"
        f"  (in-place {_fmt(result.in_place_busbw_at_max_size_gbps)})",
        f"max busbw:    {_fmt(result.max_busbw_gbps)} GB/s",
        f"avg busbw:    {_fmt(result.avg_busbw_gbps, '.4g')} GB/s  (footer; averages small messages too, not judged)",
        f"#wrong:       {result.wrong if result.wrong is not None else 'not checked (N/A)'}"
        f"   out-of-bounds: {result.out_of_bounds if result.out_of_bounds is not None else 'no footer'}",
    ]
    basis = [f"sku:          {judgement.sku or 'not given'}"]
    if judgement.baseline_gbps is not None or judgement.threshold_gbps is not None:
        basis.append(
            f"baseline:     {_fmt(judgement.baseline_gbps, 'g')} GB/s   "
            f"threshold: {_fmt(judgement.threshold_gbps, 'g')} GB/s"
        )
    transport = transport_block(result.transport, judgement.nodes)
    judged = result.busbw_at_max_size_gbps
    figure = f"{shown_figure(judged)} GB/s busbw" if judged is not None and not math.isnan(judged) else None
    threshold = f"{judgement.threshold_gbps:g} GB/s" if judgement.threshold_gbps is not None else None
    verdict = [headline(judgement.verdict, judgement.sku, figure, size, threshold)]
    verdict += [f"  - {r}" for r in judgement.reasons]
    return "\n".join(lines + [""] + who + [""] + figures + [""] + transport + [""] + basis + [""] + verdict) + "\n"
