"""Parser for nccl-tests output (`all_reduce_perf` and friends): the text table and the `-J` JSON.

Formats handled, each seen in ../shared/reference/nccl-tests or read from NVIDIA/nccl-tests source
(src/util.cu, src/common.cu, src/common.h @ v2.19.6):

- the text header, old (< 2.17.6: no "# nccl-tests version" line, no "unalign") and new;
- "# Using devices" / "#  Rank N Group G Pid P on HOST device D [PCI] NAME" lines (one per rank under
  MPI, gathered to rank 0), from which ranks, hosts and GPU models come;
- result rows: size, count, type, redop, root, then time/algbw/busbw/#wrong out-of-place and in-place
  (`#wrong` is "N/A" under `-c 0`), with the optional per-iteration columns (`-I 1`) and timestamps;
- NCCL `INFO`/`WARN` lines interleaved anywhere, even between a row's first five columns and the rest
  (nccl-tests prints a row in two pieces around the measurement, into the same stdout buffer NCCL logs to);
  the same pass hands every line to `verify.transport`, which reads NCCL's own (`NcclResult.transport`,
  and the WARN lines in `warnings`); line prefixes are `verify.loglines`' business;
- the footer ("# Out of bounds values", "# Avg bus bandwidth", "# Collective test concluded");
- failure lines printed by nccl-tests' CUDACHECK / NCCLCHECK / TESTCHECK macros and timeouts;
- the JSON document that `-J FILE.json` writes (JSON_FILE_VERSION 3), optionally preceded by `#` lines.

The records it returns (`NcclResult`, its rows and ranks) are verify/nccl_result.py's. `Stream` reads a log
one line at a time (`parse` feeds it a whole text), keeping what the result needs,
not the lines, so its memory does not grow with the log (verify.bounded).

A log with no table and no failure line is not an nccl-tests result: `ParseError`, with a message
that says what was looked for. Everything else returns an `NcclResult`; whether it is good is the
verdict's business, not the parser's.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from verify import bounded
from verify import transport as transport_mod
from verify.bounded import Kept
from verify.loglines import ROW_COLUMNS, untag
from verify.nccl_result import Measurement, NcclResult, Rank, Row
from verify.transport import Transport


class ParseError(ValueError):
    """The input is not an nccl-tests result (or is unreadable). The message says why."""


# ------------------------------------------------------------------------------------------------
# text format

_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)(?:.*?nccl-library=(\d+))?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_PARAMS = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_VALIDATION = re.compile(r"\bvalidation:\s*(\d+)")
# src/util.cu: "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"; older releases
# printed no Group.
_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$"
)
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)", re.IGNORECASE)
# NCCL's own banner: "host:pid:tid [dev] NCCL INFO NCCL version 2.28.9+cuda13.0" (or without the
# INFO prefix under NCCL_DEBUG=VERSION).
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
# src/common.h CUDACHECK / NCCLCHECK / TESTCHECK, src/common.cu timeout, util.cu writeErrors.
_FAILURE = re.compile(
    r"Test (?:CUDA |NCCL )?failure|: Test timeout \(|^#\s*error:|Invalid number of GPUs"
)
# A word each of _FAILURE's patterns holds, looked for first: one search, not two, on most lines (NCCL's INFO).
_MAYBE_FAILURE = re.compile(r"failure|timeout|error:|Invalid number")
# A row's first five columns (verify.loglines). What follows is either the rest of the row or, when
# NCCL logged in between, the start of a log line.
_PREAMBLE = ROW_COLUMNS
_TIMESTAMP = re.compile(r"\s+\d{4}-\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}\s*$")
_NUM = r"(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-nan|N/A)"
_BODY = re.compile(rf"^\s*{_NUM}(?:\s+{_NUM})+\s*$", re.IGNORECASE)


def _num(token: str) -> float:
    try:
        return float(token)
    except ValueError:
        return math.nan


def _wrong(token: str) -> int | None:
    if token.upper() == "N/A":
        return None
    value = _num(token)
    return None if math.isnan(value) else int(value)


def _measurement(tokens: list[str]) -> Measurement:
    return Measurement(
        time_us=_num(tokens[0]), algbw_gbps=_num(tokens[1]), busbw_gbps=_num(tokens[2]), wrong=_wrong(tokens[3])
    )


def _body(text: str) -> tuple[Measurement, Measurement] | None:
    """The measurement columns of a row, or None if `text` is not one: 8 columns (4 per placement),
    or 16 with the per-iteration columns of `-I 1` (time algbw busbw #wrong i_min i_max i_p99 i_cv%)."""
    text = _TIMESTAMP.sub("", text)
    if not _BODY.match(text):
        return None
    tokens = text.split()
    if len(tokens) == 8:
        return _measurement(tokens[0:4]), _measurement(tokens[4:8])
    if len(tokens) == 16:
        return _measurement(tokens[0:4]), _measurement(tokens[8:12])
    return None


def _decode_nccl_code(code: int) -> str:
    """NCCL_VERSION_CODE -> "major.minor.patch" (nccl.h: X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _infer_allreduce_ranks(rows: tuple[Row, ...]) -> int | None:
    """Rank count from all-reduce rows: nccl-tests computes busbw = algbw x 2(n-1)/n
    (src/all_reduce.cu), so the printed pair pins n down. Only rows with algbw >= 1 GB/s are used
    (two printed decimals make smaller ones useless) and n must be the ONE value that fits every
    such row within print rounding; otherwise None (ambiguous: very large n)."""
    pairs = [(m.algbw_gbps, m.busbw_gbps) for r in rows for m in r.measurements if m.algbw_gbps >= 1.0]
    if not pairs:
        return None
    fits = []
    for n in range(2, 4097):
        factor = 2 * (n - 1) / n
        if all(abs(a * factor - b) <= 0.005 * (1 + factor) + 1e-9 for a, b in pairs):
            fits.append(n)
            if len(fits) > 1:
                return None
    return fits[0] if fits else None


class TextParser:
    """The text format, one line at a time (`feed`), then `result`. What a log can hold without end (rows,
    "Rank" lines, failure lines) is kept up to `verify.bounded`'s limits and counted beyond them, so the
    memory does not grow with the log; NCCL's own lines are folded into counts (`verify.transport`)."""

    def __init__(self) -> None:
        self.rows: Kept[Row] = Kept(bounded.ROWS, "result rows")
        self.ranks: Kept[Rank] = Kept(bounded.RANKS, "'Rank' lines")
        self.errors: Kept[str] = Kept(bounded.LINES, "failure lines")
        self.info: dict = {}
        self.pending: tuple | None = None  # a row's first five columns waiting for the rest
        self.unread_rows = 0  # rows whose first columns came and whose figures never did: counted, not judged
        self.header_seen = False
        self.nccl_lines = transport_mod.Collector()  # NCCL's own lines, read in the same pass

    def feed(self, raw: str) -> None:
        line = untag(raw)
        stripped = line.strip()
        if not stripped:
            return
        info = self.info
        self.nccl_lines.feed(line)
        if _MAYBE_FAILURE.search(line) and (_FAILURE.search(stripped) or _FAILURE.search(line)):
            self.errors.append(stripped)
        if "NCCL version" in line and (m := _NCCL_VERSION.search(line)):
            info.setdefault("nccl_version", m.group(1))
        if line.lstrip().startswith("#"):
            self._comment(stripped)
            return

        if m := _PREAMBLE.match(line):
            rest = line[m.end() :]
            head = (int(m.group(1)), int(m.group(2)), m.group(3), m.group(4), int(m.group(5)))
            body = _body(rest)
            self.unread_rows += self.pending is not None  # the row before this one never got its figures
            if body is not None:
                self.rows.append(Row(*head, out_of_place=body[0], in_place=body[1]))
                self.pending = None
            else:
                self.pending = head  # NCCL logged between the columns; the rest comes on a later line
            return
        if self.pending is not None and (body := _body(line)) is not None:
            self.rows.append(Row(*self.pending, out_of_place=body[0], in_place=body[1]))
            self.pending = None

    def _comment(self, stripped: str) -> None:
        info = self.info
        if m := _VERSION.match(stripped):
            info["nccl_tests_version"] = m.group(1)
            if m.group(2) and "nccl_code" not in info:
                info["nccl_code"] = int(m.group(2))
            self.header_seen = True
        elif m := _STARTING.match(stripped):
            info["test"] = m.group(1)
            self.header_seen = True
        elif m := _CONCLUDED.match(stripped):
            info["concluded"] = True
            info.setdefault("test", m.group(1))
        elif m := _PARAMS.match(stripped):
            info["gpus_per_process"] = int(m.group(1)) * int(m.group(2))
            info["min_bytes"], info["max_bytes"] = int(m.group(3)), int(m.group(4))
            if v := _VALIDATION.search(stripped):
                info["validation"] = v.group(1) != "0"
            self.header_seen = True
        elif m := _RANK.match(stripped):
            self.ranks.append(
                Rank(
                    rank=int(m.group(1)),
                    group=int(m.group(2)) if m.group(2) is not None else None,
                    pid=int(m.group(3)),
                    host=m.group(4),
                    device=int(m.group(5)),
                    pci=m.group(6),
                    gpu=m.group(7),
                )
            )
        elif m := _OOB.match(stripped):
            info["out_of_bounds"] = int(m.group(1))
        elif m := _AVG.match(stripped):
            info["avg"] = _num(m.group(1))
        elif "size" in stripped and "busbw" in stripped:
            self.header_seen = True

    def _unread(self) -> str | None:
        n = self.unread_rows + (self.pending is not None)
        return f"{n} result row(s) it could not read (their figures are missing or garbled): not judged" if n else None

    def result(self) -> NcclResult:
        rows, errors, info = self.rows.items, self.errors.items, self.info
        if not rows and not errors and not self.header_seen:
            raise ParseError(
                "no nccl-tests result found: expected a table of rows 'size count type redop root time algbw "
                "busbw #wrong ...' (all_reduce_perf output) or an nccl-tests -J JSON document"
            )
        transport = self.nccl_lines.result()
        nccl_version = info.get("nccl_version")
        if nccl_version is None and "nccl_code" in info:
            nccl_version = _decode_nccl_code(info["nccl_code"])
        return _finish(
            rows=tuple(rows),
            ranks_listed=tuple(self.ranks.items),
            test=info.get("test"),
            gpus_per_process=info.get("gpus_per_process"),
            min_bytes=info.get("min_bytes"),
            max_bytes_requested=info.get("max_bytes"),
            validation=info.get("validation"),
            out_of_bounds=info.get("out_of_bounds"),
            avg_busbw_gbps=info.get("avg"),
            concluded=bool(info.get("concluded")),
            nccl_tests_version=info.get("nccl_tests_version"),
            nccl_version=nccl_version,
            errors=tuple(errors),
            warnings=transport.warnings,
            source_format="text",
            transport=transport,
            not_kept=tuple(n for n in (*(k.note() for k in (self.rows, self.ranks, self.errors)), self._unread()) if n),
            listed_entries_are_processes=False,
        )


def _finish(*, ranks_listed: tuple[Rank, ...], listed_entries_are_processes: bool, **fields) -> NcclResult:
    """Fill in the rank count: from the listed devices when there are any, else inferred."""
    ranks: int | None = None
    source: str | None = None
    if ranks_listed:
        if listed_entries_are_processes:
            # -J JSON keeps one device entry per process (util.cu parseRankInfo reads the first line of
            # each process's block), so a process driving g GPUs with t threads stands for g*t ranks.
            ranks = len(ranks_listed) * (fields.get("gpus_per_process") or 1)
            source = "devices listed in the JSON x GPUs per process"
        else:
            ranks = len({r.rank for r in ranks_listed})
            source = "'Using devices' lines"
    test = fields.get("test")
    if ranks is None and (test is None or test.startswith("all_reduce")):
        inferred = _infer_allreduce_ranks(fields["rows"])
        if inferred is not None:
            ranks, source = inferred, "busbw/algbw = 2(n-1)/n"
    return NcclResult(ranks_listed=ranks_listed, ranks=ranks, ranks_source=source, **fields)


# ------------------------------------------------------------------------------------------------
# JSON format (nccl-tests -J, src/util.cu JSON_FILE_VERSION 3)


def _json_measurement(obj: dict | None) -> Measurement | None:
    if not obj:
        return None
    nwrong = obj.get("nwrong")

    def f(value) -> float:
        return _num(str(value)) if value is not None else math.nan

    return Measurement(
        time_us=f(obj.get("time", obj.get("cpu_time"))),
        algbw_gbps=f(obj.get("alg_bw")),
        busbw_gbps=f(obj.get("bus_bw")),
        wrong=None if nwrong is None or (isinstance(nwrong, str) and nwrong.lower() == "nan") else int(nwrong),
    )


def _parse_json(doc: object) -> NcclResult:
    if not isinstance(doc, dict) or "results" not in doc and "config" not in doc:
        raise ParseError("JSON input is not an nccl-tests -J document (no 'config' or 'results' key)")
    config = doc.get("config") or {}
    rows = []
    for i, r in enumerate(doc.get("results") or []):
        try:
            rows.append(
                Row(
                    size_bytes=int(r["size"]),
                    count=int(r["count"]),
                    type=str(r["type"]),
                    redop=str(r["redop"]),
                    root=int(str(r.get("root", "-1")).strip() or -1),
                    out_of_place=_json_measurement(r.get("out_of_place")),
                    in_place=_json_measurement(r.get("in_place")),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ParseError(f"JSON results[{i}] is not an nccl-tests result row: {exc!r}") from None
    ranks = tuple(
        Rank(
            rank=int(d.get("rank", i)),
            group=d.get("group"),
            pid=d.get("pid"),
            host=str(d.get("hostname", "")),
            device=int(d.get("device", 0)),
            pci=str(d.get("device_hex", "")),
            gpu=str(d.get("device_info", "")),
        )
        for i, d in enumerate(config.get("devices") or [])
    )
    oob = doc.get("out_of_bounds") or {}
    avg = doc.get("average_bus_bandwidth") or {}
    code = doc.get("nccl_version")
    validation = config.get("validation")
    errors = tuple(str(e) for e in (doc.get("errors") or []) if str(e).strip())
    gpp = None
    if config.get("ngpus") is not None:
        gpp = int(config["ngpus"]) * int(config.get("nthreads") or 1)
    return _finish(
        rows=tuple(rows),
        ranks_listed=ranks,
        test=None,
        gpus_per_process=gpp,
        min_bytes=config.get("minimum_bytes"),
        max_bytes_requested=config.get("maximum_bytes"),
        validation=None if validation is None else bool(validation),
        out_of_bounds=int(oob["count"]) if "count" in oob else None,
        avg_busbw_gbps=_num(str(avg["bandwidth"])) if "bandwidth" in avg else None,
        concluded="average_bus_bandwidth" in doc,
        nccl_tests_version=None,  # the JSON does not carry it
        nccl_version=_decode_nccl_code(int(code)) if isinstance(code, int) and code > 0 else None,
        errors=errors,
        warnings=(),
        source_format="json",
        listed_entries_are_processes=True,
    )


# ------------------------------------------------------------------------------------------------


class Stream:
    """`parse`, one line at a time: the text format as it comes (`TextParser`), or, when the first line
    that is neither blank nor a `#` line opens a JSON object, the `-J` document (kept, up to
    `verify.bounded.JSON_CHARS`). `transport` is what NCCL's lines say even where `result` raises."""

    def __init__(self) -> None:
        self.text = TextParser()
        self.content = False  # a line that is not blank
        self.body_seen = False  # a line that is neither blank nor a `#` line
        self.json: list[str] | None = None  # the JSON document's lines, once the log turned out to be one
        self.json_chars = 0

    def feed(self, line: str) -> None:
        self.text.feed(line)
        first = line.lstrip()
        self.content = self.content or bool(first)
        if first.startswith("#"):
            return
        if self.json is not None:
            self.json_chars += len(line) + 1
            if self.json_chars <= bounded.JSON_CHARS:
                self.json.append(line)
        elif first and not self.body_seen:
            self.body_seen = True
            if first.startswith("{"):
                self.json, self.json_chars = [line], len(line) + 1

    def transport(self) -> Transport:
        return self.text.nccl_lines.result()

    def result(self) -> NcclResult:
        if self.json is not None:
            if self.json_chars > bounded.JSON_CHARS:
                limit = bounded.chars(bounded.JSON_CHARS)
                raise ParseError(f"the input looks like nccl-tests -J JSON but is over {limit}, far more than "
                                 "nccl-tests writes for a run")
            try:
                doc = json.loads("\n".join(self.json).strip())
            except json.JSONDecodeError as exc:
                raise ParseError(
                    f"the input looks like nccl-tests -J JSON but does not parse ({exc.msg} at line {exc.lineno}); "
                    "nccl-tests completes the file only when the run ends, so a cut-off run leaves it unfinished"
                ) from None
            return _parse_json(doc)
        if not self.content:
            raise ParseError("the input is empty: no nccl-tests output to parse")
        return self.text.result()


def parse(text: str) -> NcclResult:
    """Parse nccl-tests output: the text a run prints, or the JSON document `-J` writes."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("the input is empty: no nccl-tests output to parse")
    stream = Stream()
    for line in text.splitlines():
        stream.feed(line)
    return stream.result()


def parse_file(path: str | Path) -> NcclResult:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ParseError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse(data.decode("utf-8", errors="replace"))


__all__ = ["ParseError", "Stream", "parse", "parse_file"]
