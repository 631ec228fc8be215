"""Parser for OSU micro-benchmarks `osu_bw` and `osu_latency` output.

Formats handled (OMB c/util/osu_util_mpi.c, print_preamble/print_header):
- title `# OSU MPI Bandwidth Test v7.4` / `# OSU MPI Latency Test v5.8`; accelerator builds print
  `# OSU MPI-CUDA ...` (also -ROCM, -OPENACC, -SYCL) and then `# Send Buffer on DEVICE (D) ...`;
- 7.x adds `# Datatype: MPI_CHAR.` (after the title, or after the column header in 7.1-7.3);
- column header `# Size      Bandwidth (MB/s)`, `# Size       Avg Latency(us)` (7.x) or
  `# Size          Latency (us)` (5.x), optionally followed by Min/Max/Iterations/Validation columns;
- rows `<size> <value> [extra columns]`, sizes in bytes, bandwidth in MB/s (10^6 bytes/s), latency in us.

Everything else in a launcher log (mpirun/UCX chatter, kernel messages, timings, other blocks) is
skipped. One log may hold several runs (osu_bw then osu_latency): each becomes its own Series.
"""

from __future__ import annotations

import re

from verify import bounded
from verify.bounded import Kept
from verify.series import BANDWIDTH, LATENCY, OSU_MBPS_TO_GBITS, ParseError, Point, Series

_TITLE = re.compile(
    r"^\s*#?\s*OSU MPI(?:-(?P<accel>[A-Z]+))? (?P<bench>[A-Za-z /-]+?) Test(?: v(?P<version>[\w.]+))?\s*$"
)
_HEADER = re.compile(r"^\s*#\s*Size\s+(?P<cols>.*\S)\s*$")
_ROW = re.compile(r"^\s*(?P<size>\d+)\s+(?P<value>-?\d+(?:\.\d+)?|nan|-?inf)(?P<rest>(?:\s+\S+)*)\s*$", re.I)

# The benchmarks this project runs, by the title OMB prints for them.
TOOLS = {"Bandwidth": ("osu_bw", BANDWIDTH), "Latency": ("osu_latency", LATENCY)}


def looks_like(text: str) -> bool:
    return any(_TITLE.match(line) for line in text.splitlines())


class Parser:
    """`parse_all`, one line at a time (`feed`); `titled` says whether an OSU title was seen (`looks_like`).
    It keeps the last `verify.bounded.SERIES` tables and the first `verify.bounded.POINTS` rows of each."""

    def __init__(self) -> None:
        self.blocks: Kept[Series] = Kept(bounded.SERIES, "OSU tables", keep_last=True)
        self.current: dict | None = None
        self.titled = False
        self.tables_cut = 0  # tables with more than bounded.POINTS rows

    def _close(self) -> None:
        current = self.current
        if current and current["tool"] and current["points"]:
            self.blocks.append(Series(
                tool=current["tool"], kind=current["kind"], points=tuple(current["points"].items),
                version=current["version"], unit_printed=current["unit"], accelerator=current["accel"],
                validation_failed_sizes=tuple(current["failed"].items),
            ))
            self.tables_cut += bool(current["points"].dropped)

    def feed(self, line: str) -> None:
        if "OSU" in line and (title := _TITLE.match(line)):
            self.titled = True
            self._close()
            tool, kind = TOOLS.get(title["bench"].strip(), (None, None))
            self.current = {"tool": tool, "kind": kind, "version": title["version"], "accel": title["accel"],
                            "unit": "", "header": False, "validation_col": None,
                            "points": Kept(bounded.POINTS, "rows"), "failed": Kept(bounded.POINTS, "rows")}
            return
        current = self.current
        if current is None or current["tool"] is None:
            return
        header = _HEADER.match(line)
        if header:
            cols = re.split(r"\s{2,}", header["cols"])
            current["header"] = True
            current["unit"] = "MB/s" if current["kind"] == BANDWIDTH else "us"
            current["validation_col"] = next((i for i, c in enumerate(cols) if c.lower() == "validation"), None)
            return
        if not current["header"]:
            return
        row = _ROW.match(line)
        if not row:
            return
        value = float(row["value"])
        if current["kind"] == BANDWIDTH:
            value *= OSU_MBPS_TO_GBITS
        size = int(row["size"])
        current["points"].append(Point(size_bytes=size, value=value))
        rest = row["rest"].split()
        vcol = current["validation_col"]
        if vcol is not None and vcol >= 1 and len(rest) >= vcol and rest[vcol - 1].lower() == "fail":
            current["failed"].append(size)

    def series(self) -> list[Series]:
        """The tables read so far, the one still open included."""
        self._close()
        self.current = None
        return list(self.blocks.items)

    def not_kept(self) -> list[str]:
        return bounded.notes(self.blocks, self.tables_cut)


def parse_all(text: str) -> list[Series]:
    """Every osu_bw / osu_latency block in `text`, in order. Other OSU benchmarks are skipped."""
    parser = Parser()
    for line in text.splitlines():
        parser.feed(line)
    return parser.series()


def parse(text: str) -> list[Series]:
    found = parse_all(text)
    if not found:
        raise ParseError("no osu_bw or osu_latency table ('# OSU MPI Bandwidth|Latency Test' then '# Size' rows)")
    return found
