"""The log read once, line by line (verify/logread.py): the same answers as the whole-text functions on every
log we hold, the lines split as str.splitlines splits, and memory that does not grow with the log (what a
log can hold without end is kept up to verify.bounded's limits, and the report says what it left out)."""

from __future__ import annotations

import gc
import io
import json
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

from core import kinds
from tests.paths import ROOT
from tools import bench_log_reader
from verify import bounded, logread, nccl, p2p, readers, sections
from verify.series import ParseError as P2pParseError

DATA = ROOT / "tests" / "data"
LOGS = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".json"))
SETTINGS = readers.Settings(sku="Standard_ND96isr_H200_v5", nodes=None, threshold=None)


def _answer(call):
    """What a call returns, or the error it raises, comparable (repr: a NaN figure equals itself there)."""
    try:
        return repr(call())
    except (nccl.ParseError, P2pParseError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _whole_text(text: str) -> dict:
    """The answers of the functions that read the log whole, as `report` used them before it read a stream."""
    parts = sections.split(text)
    first = next((s for s in parts if s.name == sections.ALLREDUCE), None)
    return {
        "kind": kinds.NCCL if any(s.name == sections.ALLREDUCE for s in parts)
        else kinds.P2P if p2p.detect(text) else kinds.NCCL,
        "nccl": _answer(lambda: nccl.parse(sections.allreduce_text(text))),
        "doctor": _answer(lambda: sections.read_doctor(parts)),
        "round0": repr(sections.pair_run(0, first.hosts(), first.text)
                       if first is not None and len(first.hosts()) == 2 else None),
        "p2p": _answer(lambda: p2p.parse(text)),
    }


def _streamed(path: Path) -> dict:
    with path.open("rb") as f:
        read = logread.read(f)
    return {"kind": read.kind(), "nccl": _answer(read.nccl), "doctor": _answer(read.doctor_run),
            "round0": repr(read.round0_pair()), "p2p": _answer(read.p2p)}


def test_the_logs_compared_are_every_kind_we_hold():
    names = [p.name for p in LOGS]
    assert len(LOGS) >= 25 and any("doctor-launcher" in n for n in names) and any(n.endswith(".json") for n in names)
    assert {_streamed(p)["kind"] for p in LOGS} == {kinds.NCCL, kinds.P2P}


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.relative_to(DATA).as_posix())
def test_one_pass_answers_as_the_whole_text_functions(path: Path):
    text = path.read_bytes().decode("utf-8", errors="replace")
    assert _streamed(path) == _whole_text(text)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.relative_to(DATA).as_posix())
def test_the_report_of_a_file_read_as_a_stream_is_that_of_its_text(path: Path):
    text = path.read_bytes().decode("utf-8", errors="replace")
    with path.open("rb") as f:
        read = logread.read(f)
    kind = _whole_text(text)["kind"]
    assert read.kind() == kind
    reader = readers.reader(kind)
    whole, streamed = _answer(lambda: reader.judge(text, SETTINGS)), _answer(lambda: reader.judge(read, SETTINGS))
    assert streamed == whole


def test_stdin_is_read_as_bytes_like_a_file(tmp_path: Path):
    """A real stdin (a pipe, a byte that is not UTF-8 in it) gives the file's report."""
    log = tmp_path / "bad-byte.log"
    log.write_bytes((DATA / "nccl-info_2.28.9_socket-fallback_2-fake-hosts-x1-gpu_h200x2.log").read_bytes()
                    + b"\xff\xfe stray bytes\r\n")
    runs = [subprocess.run([sys.executable, "-m", "verify", "report", arg, "--json"], cwd=ROOT, capture_output=True,
                           input=log.read_bytes() if arg == "-" else None, timeout=120) for arg in ("-", str(log))]
    assert runs[0].returncode == runs[1].returncode == 0, runs[0].stderr
    assert json.loads(runs[0].stdout) == json.loads(runs[1].stdout)


# ---- the lines ---------------------------------------------------------------------------------------
_PIECES = ["a", "bb", "é", "€", "😀", " ", "#", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028"]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_lines_are_split_as_splitlines_splits_the_whole_text(monkeypatch, chunk: int):
    """Chunk edges anywhere: in a \\r\\n, in a character's UTF-8 bytes, in a byte that is not UTF-8."""
    monkeypatch.setattr(logread, "CHUNK_BYTES", chunk)
    rng = random.Random(chunk)
    for _ in range(300):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 40)))
        data = bytearray(text.encode())
        for _ in range(rng.randrange(0, 3)):  # bad bytes: a lone continuation byte, a cut sequence, 0xff
            data.insert(rng.randrange(0, len(data) + 1), rng.choice([0x80, 0xE2, 0xFF]))
        expected = bytes(data).decode("utf-8", errors="replace").splitlines()
        assert list(logread.Lines(logread.binary_chunks(io.BytesIO(bytes(data))))) == expected, bytes(data)
        assert list(logread.Lines(logread.text_chunks(io.StringIO(text)))) == text.splitlines(), text


def test_a_line_longer_than_the_limit_is_read_in_part_and_the_report_says_so(monkeypatch):
    monkeypatch.setattr(logread, "CHUNK_BYTES", 16)
    monkeypatch.setattr(logread, "LINE_CHARS", 100)
    table = ["# nccl-tests version 2.19.6", "  1073741824  268435456  float  sum  -1  5000.0  214.7  402.6  0  5000.0  "
             "214.7  402.6  0", "# Out of bounds values : 0 OK"]
    lines = logread.Lines(logread.text_chunks(io.StringIO("\n".join([table[0], "x" * 1000, *table[1:]]))))
    assert list(lines) == [table[0], "x" * 100, *table[1:]] and lines.cut == 1
    read = logread.LogFold().read(logread.Lines(logread.text_chunks(io.StringIO("\n".join(["y" * 250, *table])))))
    assert read.nccl().not_kept == ("1 line(s) over 100 characters: the start of each read",)
    assert read.nccl().rows[0].busbw_gbps == 402.6
    assert "1 line(s) over 100 characters" in readers.reader(kinds.NCCL).judge(read, SETTINGS).result.reasons[-1]


# ---- bounded memory ----------------------------------------------------------------------------------
_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _retained(root: object) -> int:
    """How many objects `root` holds, however deep (classes, modules and functions are not its state)."""
    seen, todo = {id(root)}, [root]
    while todo:
        for ref in gc.get_referents(todo.pop()):
            if id(ref) not in seen and not isinstance(ref, _NOT_STATE):
                seen.add(id(ref))
                todo.append(ref)
    return len(seen)


def _folded(megabytes: float) -> tuple[logread.LogFold, int]:
    read, count = logread.LogFold(), 0
    for line in bench_log_reader.lines(int(megabytes * (1 << 20)), hosts=4):
        read.feed(line)
        count += 1
    return read, count


def test_what_the_reader_holds_does_not_grow_with_the_log():
    """Ten times the lines of the benchmark's log (NCCL INFO lines from every rank, the table among them):
    the same objects held, give or take the few WARN lines kept, where keeping the lines would add 100,000s."""
    small, small_lines = _folded(1)
    big, big_lines = _folded(10)
    assert big_lines > 9 * small_lines > 40_000
    assert _retained(big) - _retained(small) < 100
    assert repr(big.nccl().rows) == repr(small.nccl().rows) and len(big.nccl().rows) == 32
    assert big.nccl().transport.inter_node_channels["NET/IB/GDRDMA"] > 9 * small.nccl().transport.inter_node_channels[
        "NET/IB/GDRDMA"]


def test_what_a_log_holds_without_end_is_kept_up_to_a_limit_and_said(monkeypatch):
    for name, limit in (("ROWS", 40), ("RANKS", 20), ("LINES", 5)):
        monkeypatch.setattr(bounded, name, limit)
    row = "  1073741824  268435456  float  sum  -1  5000.0  214.7  402.6  0  5000.0  214.7  402.6  0"
    lines = ["# nccl-tests version 2.19.6", *(f"#  Rank {r} Group 0 Pid {r} on node-{r // 8} device {r % 8} "
                                              f"[0000:01:00] NVIDIA H200" for r in range(64))]
    lines += [row] * 300 + ["node-0: Test NCCL failure common.cu:1 'unhandled system error'"] * 30
    lines += ["node-0:1:1 [0] NCCL INFO Using network IB"]
    lines += ["node-0:1:1 [0] misc/socket.cc:50 NCCL WARN socket closed"] * 70
    read = logread.LogFold().read(lines)
    result = read.nccl()
    assert (len(result.rows), len(result.ranks_listed), len(result.errors)) == (40, 20, 5)
    assert result.transport.warnings == ("node-0:1:1 [0] misc/socket.cc:50 NCCL WARN socket closed",) * 5
    assert result.transport.as_dict()["nccl_warnings_total"] == 70
    assert result.not_kept == ("300 result rows in the log: the first 40 read, the rest counted",
                               "64 'Rank' lines in the log: the first 20 read, the rest counted",
                               "30 failure lines in the log: the first 5 read, the rest counted")
    judged = readers.reader(kinds.NCCL).judge(read, SETTINGS)
    assert set(result.not_kept) <= set(judged.result.reasons) and "NCCL WARN:  70" in judged.text


def test_point_to_point_tables_keep_the_last_ones_the_verdict_reads(monkeypatch):
    monkeypatch.setattr(bounded, "SERIES", 2)
    monkeypatch.setattr(bounded, "POINTS", 3)
    table = ["# OSU MPI Bandwidth Test v7.4", "# Size      Bandwidth (MB/s)"]
    lines = [*table, "1 10.0", *table, "1 20.0", *table, *(f"{1 << i} {i * 1000.0}" for i in range(1, 30))]
    read = logread.LogFold().read(lines)
    series = read.p2p()
    assert [s.points[0].value for s in series] == [20.0 * 8 / 1000, 1000.0 * 8 / 1000] and len(series[1].points) == 3
    assert read.p2p_not_kept() == ("3 OSU tables in the log: the last 2 read, the rest counted",
                                   "1 table(s) of over 3 rows: the first 3 rows of each read")
    judged = readers.reader(kinds.P2P).judge(read, readers.Settings(sku=None, nodes=None, threshold=None))
    assert judged.result.reasons[-2:] == read.p2p_not_kept()


def test_a_json_document_past_the_limit_is_refused_by_name(monkeypatch):
    doc = (DATA / "nccl-tests-2.19.6_json-v3_h200x2_constructed.json").read_text()
    assert len(doc) > 1000 and logread.fold(doc).nccl().rows
    monkeypatch.setattr(bounded, "JSON_CHARS", 1000)
    with pytest.raises(nccl.ParseError, match="JSON but is over 1000 characters, far more"):
        logread.fold(doc).nccl()


def test_a_doctor_section_past_the_limit_is_read_in_part_and_said(monkeypatch):
    monkeypatch.setattr(bounded, "SECTION_CHARS", 200)
    gpus = [f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:032d})" for i in range(8)]
    log = "\n".join([sections.marker("doctor", mode="always", run="yes", reason="mode-always"),
                     sections.marker("node", host="node-0", check="gpus"), *gpus,
                     sections.marker("doctor-end", elapsed_s=1)])
    run = logread.fold(log).doctor_run()
    assert run.nodes[0].gpus == 3  # the first 200 characters hold three lines
    assert run.not_kept == ("1 doctor section(s) over 200 characters: the start of each read",)


@pytest.mark.parametrize("ending", ["", "\n", "\n\n\n", "\n \n\n"])
def test_the_tail_is_the_last_lines_before_the_empty_ones_at_the_end(ending: str):
    """What the certifier shows of the log it read as it arrived: what it showed of the whole text."""
    text = "\n".join(f"line {i}" + ("\n" * (i % 7 == 0)) for i in range(100)) + ending
    read = logread.read(io.BytesIO(text.encode()), tail=30)
    assert read.last_lines() == text.rstrip("\n").splitlines()[-30:]
    assert logread.read(io.BytesIO(b"\n\n"), tail=30).last_lines() == []
