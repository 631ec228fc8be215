"""What an nccl-tests run printed, as records: its result rows (each placement's time, algbw, busbw and
#wrong), the ranks it listed, its header and footer, and what NCCL's own lines said; with the figures
derived from them (the largest size's busbw, hosts, whether the run completed). Units as nccl-tests prints
them. verify/nccl.py reads a log (the text table or the -J JSON) into an `NcclResult`; the verdict and the
report read the record.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify.transport import Transport


@dataclass(frozen=True)
class Measurement:
    """One placement (out-of-place or in-place) of one row. Units as nccl-tests prints them."""

    time_us: float
    algbw_gbps: float  # GB/s (bytes)
    busbw_gbps: float  # GB/s (bytes)
    wrong: int | None  # None when not checked ("N/A", run with -c 0)


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int  # elements
    type: str
    redop: str
    root: int
    out_of_place: Measurement | None
    in_place: Measurement | None

    @property
    def busbw_gbps(self) -> float:
        """The out-of-place bus bandwidth (in-place when a run printed only in-place)."""
        m = self.out_of_place or self.in_place
        assert m is not None
        return m.busbw_gbps

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        return tuple(m for m in (self.out_of_place, self.in_place) if m is not None)


@dataclass(frozen=True)
class Rank:
    rank: int
    host: str
    device: int
    pci: str
    gpu: str
    pid: int | None = None
    group: int | None = None


@dataclass(frozen=True)
class NcclResult:
    rows: tuple[Row, ...]
    ranks_listed: tuple[Rank, ...] = ()  # the "Using devices" lines (or JSON "devices")
    ranks: int | None = None
    ranks_source: str | None = None  # how `ranks` was found, for the report
    test: str | None = None  # e.g. "all_reduce_perf"
    gpus_per_process: int | None = None  # header nGpus x nThread
    min_bytes: int | None = None
    max_bytes_requested: int | None = None
    validation: bool | None = None  # header "validation: 1" (-c 1)
    out_of_bounds: int | None = None  # footer; None when the footer is missing
    avg_busbw_gbps: float | None = None  # footer average over EVERY row (small ones too)
    concluded: bool = False  # footer seen: the test ran to its end
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    errors: tuple[str, ...] = ()  # failure lines: a failed run
    warnings: tuple[str, ...] = ()  # NCCL WARN lines: worth showing, not failures by themselves
    source_format: str = "text"  # "text" | "json"
    transport: Transport | None = None  # NCCL's INFO lines (verify.transport); None for the JSON format
    not_kept: tuple[str, ...] = ()  # what the reader counted but did not keep (verify.bounded), in words

    # ---- derived figures -------------------------------------------------------------------
    @property
    def hosts(self) -> tuple[str, ...]:
        """Distinct host names in rank order; empty when the log does not list devices."""
        return tuple(dict.fromkeys(r.host for r in self.ranks_listed))

    @property
    def gpus(self) -> tuple[str, ...]:
        """Distinct GPU models listed."""
        return tuple(dict.fromkeys(r.gpu for r in self.ranks_listed))

    @property
    def largest(self) -> Row | None:
        return max(self.rows, key=lambda r: r.size_bytes) if self.rows else None

    @property
    def max_size_bytes(self) -> int | None:
        return self.largest.size_bytes if self.largest else None

    @property
    def busbw_at_max_size_gbps(self) -> float | None:
        return self.largest.busbw_gbps if self.largest else None

    @property
    def in_place_busbw_at_max_size_gbps(self) -> float | None:
        row = self.largest
        return row.in_place.busbw_gbps if row and row.in_place else None

    @property
    def max_busbw_gbps(self) -> float | None:
        values = [m.busbw_gbps for r in self.rows for m in r.measurements]
        return max(values) if values else None

    @property
    def wrong(self) -> int | None:
        """Total #wrong over every row and placement; None when nothing was checked (N/A)."""
        checked = [m.wrong for r in self.rows for m in r.measurements if m.wrong is not None]
        return sum(checked) if checked else None

    @property
    def complete(self) -> bool:
        """The footer was printed: the run was not cut short."""
        return self.out_of_bounds is not None or self.concluded
