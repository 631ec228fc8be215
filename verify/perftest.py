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

from verify import bounded
from verify.bounded import Kept
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


class Parser:
    """`parse_all`, one line at a time (`feed`); `headed` says whether a table header was seen (`looks_like`).
    It keeps the last `verify.bounded.SERIES` tables and the first `verify.bounded.POINTS` rows of each;
    a header in a unit it does not know is a ParseError, raised by `series`."""

    def __init__(self) -> None:
        self.found: Kept[Series] = Kept(bounded.SERIES, "perftest tables", keep_last=True)
        self.tool_hint: str | None = None
        self.table: dict | None = None
        self.headed = False
        self.error: ParseError | None = None
        self.tables_cut = 0  # tables with more than bounded.POINTS rows

    def _close(self) -> None:
        table = self.table
        if table and table["points"]:
            self.found.append(Series(tool=table["tool"], kind=table["kind"], points=tuple(table["points"].items),
                                     unit_printed=table["unit"]))
            self.tables_cut += bool(table["points"].dropped)
        self.table = None

    def feed(self, line: str) -> None:
        bw = _BW_HEADER.match(line) if "#bytes" in line else None
        lat = None if bw or "#bytes" not in line else _LAT_HEADER.match(line)
        self.headed = self.headed or bool(bw or lat)
        if self.error is None:
            try:
                self._feed(line, bw, lat)
            except ParseError as exc:  # parse_all stops at it
                self.error = exc

    def _feed(self, line: str, bw: re.Match | None, lat: re.Match | None) -> None:
        title = _TITLE.match(line) if "Test" in line else None
        if title:
            verb = _VERBS.get(title["verb"], "atomic")
            self.tool_hint = f"ib_{verb}_{'bw' if title['what'] == 'BW' else 'lat'}"
            return
        named = _TOOL_NAME.search(line) if "ib_" in line else None
        if named and self.table is None:
            self.tool_hint = named.group(1)
        tool_hint = self.tool_hint
        if bw or lat:
            self._close()
            if bw:
                unit = bw["unit"]
                if unit not in _GBITS:
                    raise ParseError(f"perftest bandwidth unit {unit!r} is not one of {', '.join(_GBITS)}")
                tool = tool_hint if tool_hint and tool_hint.endswith("_bw") else "ib_write_bw"
                # columns: bytes, [sl,] iterations, peak, average, msgrate
                self.table = {"tool": tool, "kind": BANDWIDTH, "unit": unit, "col": 4 if bw["sl"] else 3,
                              "factor": _GBITS[unit], "points": Kept(bounded.POINTS, "rows")}
            else:
                tokens = line.split()
                col = next(i for i, t in enumerate(tokens) if t.startswith("t_avg"))
                tool = tool_hint if tool_hint and tool_hint.endswith("_lat") else "ib_write_lat"
                self.table = {"tool": tool, "kind": LATENCY, "unit": "usec", "col": col, "factor": 1.0,
                              "points": Kept(bounded.POINTS, "rows")}
            return
        table = self.table
        if table is None:
            return
        if _RULE.match(line):
            if table["points"]:
                self._close()
            return
        if _ROW.match(line):
            cells = line.split()
            if len(cells) > table["col"]:
                table["points"].append(Point(size_bytes=int(cells[0]),
                                             value=float(cells[table["col"]]) * table["factor"]))
        # anything else inside a table (CPU frequency warnings, "...") is skipped

    def series(self) -> list[Series]:
        """The tables read so far, the one still open included; the unit's ParseError if there was one."""
        if self.error is not None:
            raise self.error
        self._close()
        return list(self.found.items)

    def not_kept(self) -> list[str]:
        return bounded.notes(self.found, self.tables_cut)


def parse_all(text: str) -> list[Series]:
    """Every perftest result table in `text`, in order."""
    parser = Parser()
    for line in text.splitlines():
        parser.feed(line)
    return parser.series()


def parse(text: str) -> list[Series]:
    found = parse_all(text)
    if not found:
        raise ParseError("no perftest table (' #bytes  #iterations  BW peak[...]' or '... t_avg[usec]') in the log")
    return found
