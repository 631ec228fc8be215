"""The shape of a point-to-point result, shared by its parsers (`verify.osu`, `verify.perftest`) and
its verdict (`verify.p2p`): a series of (message size, value) points per tool, in one unit per kind.

Units, normalised once here so that nothing downstream converts again:
- bandwidth in Gb/s (10^9 bits/s), the unit of the InfiniBand line rate and of Azure's own gate
  (`check_ib_bw_non_gdr`, ib_write_bw `--report_gbits`);
- latency in microseconds, one-way, as both tools print it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Unit conversions to Gb/s (10^9 bits per second), each with where the unit's definition comes from.
# OSU micro-benchmarks: "MB/s" is 10^6 bytes/s (osu_bw.c: `size / 1e6 * iterations * window_size / t`).
OSU_MBPS_TO_GBITS = 8 / 1000
# perftest: "MiB/sec" (and "MB/sec" before linux-rdma/perftest@1d202bb, same factor) is 2^20 bytes/s;
# "Gb/sec" is 10^9 bits/s (perftest_parameters.c: format_factor = MBS ? 0x100000 : 125000000).
PERFTEST_MIBPS_TO_GBITS = 1048576 * 8 / 1e9

BANDWIDTH = "bandwidth"
LATENCY = "latency"


class ParseError(ValueError):
    """The text holds no result table of a supported tool; the message says what was looked for."""


@dataclass(frozen=True)
class Point:
    size_bytes: int
    value: float  # Gb/s for bandwidth, microseconds for latency


@dataclass(frozen=True)
class Series:
    """One result table: a tool's values by message size, in the normalised unit."""

    tool: str  # "osu_bw" | "osu_latency" | "ib_write_bw" | "ib_write_lat" | ...
    kind: str  # BANDWIDTH | LATENCY
    points: tuple[Point, ...]
    version: str | None = None
    unit_printed: str = ""  # the unit the tool printed, before normalisation
    accelerator: str | None = None  # OSU "-CUDA" builds and the like; None for host buffers
    validation_failed_sizes: tuple[int, ...] = ()  # OSU --validation rows that said Fail

    @property
    def unit(self) -> str:
        return "Gb/s" if self.kind == BANDWIDTH else "us"

    @property
    def largest(self) -> Point:
        # The last row at the largest size: duration/infinite modes repeat a size; the last is final.
        top = max(p.size_bytes for p in self.points)
        return [p for p in self.points if p.size_bytes == top][-1]

    @property
    def best(self) -> Point:
        """Highest bandwidth, or lowest latency."""
        pick = max if self.kind == BANDWIDTH else min
        return pick(self.points, key=lambda p: p.value)

    def at_or_above(self, size_bytes: int) -> Point | None:
        """The first point at a size >= size_bytes (e.g. the 1-byte latency; perftest starts at 2)."""
        for p in sorted(self.points, key=lambda p: p.size_bytes):
            if p.size_bytes >= size_bytes:
                return p
        return None
