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


def parse_all(text: str) -> list[Series]:
    """Every osu_bw / osu_latency block in `text`, in order. Other OSU benchmarks are skipped."""
    blocks: list[Series] = []
    current: dict | None = None

    def close() -> None:
        if current and current["tool"] and current["points"]:
            blocks.append(Series(
                tool=current["tool"], kind=current["kind"], points=tuple(current["points"]),
                version=current["version"], unit_printed=current["unit"], accelerator=current["accel"],
                validation_failed_sizes=tuple(current["failed"]),
            ))

    for line in text.splitlines():
        title = _TITLE.match(line)
        if title:
            close()
            tool, kind = TOOLS.get(title["bench"].strip(), (None, None))
            current = {"tool": tool, "kind": kind, "version": title["version"], "accel": title["accel"],
                       "unit": "", "header": False, "validation_col": None, "points": [], "failed": []}
            continue
        if current is None or current["tool"] is None:
            continue
        header = _HEADER.match(line)
        if header:
            cols = re.split(r"\s{2,}", header["cols"])
            current["header"] = True
            current["unit"] = "MB/s" if current["kind"] == BANDWIDTH else "us"
            current["validation_col"] = next((i for i, c in enumerate(cols) if c.lower() == "validation"), None)
            continue
        if not current["header"]:
            continue
        row = _ROW.match(line)
        if not row:
            continue
        value = float(row["value"])
        if current["kind"] == BANDWIDTH:
            value *= OSU_MBPS_TO_GBITS
        size = int(row["size"])
        current["points"].append(Point(size_bytes=size, value=value))
        rest = row["rest"].split()
        vcol = current["validation_col"]
        if vcol is not None and vcol >= 1 and len(rest) >= vcol and rest[vcol - 1].lower() == "fail":
            current["failed"].append(size)
    close()
    return blocks


def parse(text: str) -> list[Series]:
    found = parse_all(text)
    if not found:
        raise ParseError("no osu_bw or osu_latency table ('# OSU MPI Bandwidth|Latency Test' then '# Size' rows)")
    return found
