"""Parser for perftest (`ib_write_bw`, `ib_write_lat`, and the read/send variants) output.

Formats handled (linux-rdma/perftest@00b55b6 src/perftest_parameters.h):
- bandwidth table ` #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]`
  with `--report_gbits`; `[MiB/sec]` without it (`[MB/sec]` before perftest@1d202bb, same 2^20
  factor); the QoS variant with a `#sl` column; duration mode (`-D`) prints the same columns;
- latency table ` #bytes #iterations    t_min[usec] ... t_avg[usec] ...` and, in duration mode,
  ` #bytes        #iterations       t_avg[usec]    tps average`.

The judged figure is `BW average` (in duration mode peak is not measured) and `t_avg`.
"Conflicting CPU frequency values detected" warnings inside a table are skipped.
"""

from __future__ import annotations

import re

from verify.series import BANDWIDTH, LATENCY, PERFTEST_MIBPS_TO_GBITS, ParseError, Point, Series

_BW_HEADER = re.compile(r"^\s*#bytes\s+(?P<sl>#sl\s+)?#iterations\s+BW peak\[(?P<unit>[A-Za-z/]+)\]\s+BW average")
_LAT_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+.*t_avg\[usec\]")
_NUM = r"-?\d+(?:\.\d+)?"
_ROW = re.compile(rf"^\s*\d+(?:\s+{_NUM})+\s*$")
_RULE = re.compile(r"^-{40,}\s*$")
# "                    RDMA_Write BW Test", "Send Latency Test", "RDMA_Read BW Test"
_TITLE = re.compile(r"^\s*(?P<verb>RDMA_Write|RDMA_Read|Send|Atomic[A-Za-z_ ]*)\s+(?P<what>BW|Latency) Test\s*$")
# Azure's rdma-test prints "Starting RDMA client 'ib_write_bw' for mlx5_0 ..."
_TOOL_NAME = re.compile(r"\b(ib_(?:write|read|send|atomic)_(?:bw|lat))\b")
_VERBS = {"RDMA_Write": "write", "RDMA_Read": "read", "Send": "send"}

_GBITS = {"Gb/sec": 1.0, "MiB/sec": PERFTEST_MIBPS_TO_GBITS, "MB/sec": PERFTEST_MIBPS_TO_GBITS}


def looks_like(text: str) -> bool:
    return any(_BW_HEADER.match(line) or _LAT_HEADER.match(line) for line in text.splitlines())


def parse_all(text: str) -> list[Series]:
    """Every perftest result table in `text`, in order."""
    found: list[Series] = []
    tool_hint: str | None = None
    table: dict | None = None

    def close() -> None:
        nonlocal table
        if table and table["points"]:
            found.append(Series(tool=table["tool"], kind=table["kind"], points=tuple(table["points"]),
                                unit_printed=table["unit"]))
        table = None

    for line in text.splitlines():
        title = _TITLE.match(line)
        if title:
            verb = _VERBS.get(title["verb"], "atomic")
            tool_hint = f"ib_{verb}_{'bw' if title['what'] == 'BW' else 'lat'}"
            continue
        named = _TOOL_NAME.search(line)
        if named and table is None:
            tool_hint = named.group(1)
        bw = _BW_HEADER.match(line)
        lat = None if bw else _LAT_HEADER.match(line)
        if bw or lat:
            close()
            if bw:
                unit = bw["unit"]
                if unit not in _GBITS:
                    raise ParseError(f"perftest bandwidth unit {unit!r} is not one of {', '.join(_GBITS)}")
                tool = tool_hint if tool_hint and tool_hint.endswith("_bw") else "ib_write_bw"
                # columns: bytes, [sl,] iterations, peak, average, msgrate
                table = {"tool": tool, "kind": BANDWIDTH, "unit": unit, "col": 4 if bw["sl"] else 3,
                         "factor": _GBITS[unit], "points": []}
            else:
                tokens = line.split()
                col = next(i for i, t in enumerate(tokens) if t.startswith("t_avg"))
                tool = tool_hint if tool_hint and tool_hint.endswith("_lat") else "ib_write_lat"
                table = {"tool": tool, "kind": LATENCY, "unit": "usec", "col": col, "factor": 1.0, "points": []}
            continue
        if table is None:
            continue
        if _RULE.match(line):
            if table["points"]:
                close()
            continue
        if _ROW.match(line):
            cells = line.split()
            if len(cells) > table["col"]:
                table["points"].append(Point(size_bytes=int(cells[0]),
                                             value=float(cells[table["col"]]) * table["factor"]))
        # anything else inside a table (CPU frequency warnings, "...") is skipped
    close()
    return found


def parse(text: str) -> list[Series]:
    found = parse_all(text)
    if not found:
        raise ParseError("no perftest table (' #bytes  #iterations  BW peak[...]' or '... t_avg[usec]') in the log")
    return found
