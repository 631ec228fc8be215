"""A launcher log read once, line by line, in memory that does not grow with the log: what `report` judges.

`LogFold` hands each line to the readers that fold it into what they keep (verify.bounded): the all-reduce
(`verify.nccl.Stream`, the text before the first marker and the allreduce sections, as
`sections.allreduce_text` chooses), the doctor's sections (`sections.DoctorReader`), and the OSU and
perftest tables (`verify.osu`, `verify.perftest`). What it answers is what the whole-text functions answer
(`sections.split`, `p2p.detect`, `nccl.parse`, `p2p.parse`), for any log: tests/unit/verify/test_logread.py holds them
to it on every log in tests/data.

`lines` reads a file or stdin in chunks and splits them as str.splitlines splits a whole text (UTF-8, bad
bytes replaced, as `Path.read_bytes().decode(errors="replace")` does); a line over `LINE_CHARS` is read up
to that many characters and the report says so.
"""

from __future__ import annotations

import codecs
import dataclasses
from collections import deque
from collections.abc import Iterable, Iterator
from typing import IO

from core import kinds
from verify import bounded, osu, p2p, perftest
from verify.doctor_checks import PairRun
from verify.nccl import ParseError, Stream
from verify.nccl_result import NcclResult
from verify.sections import ALLREDUCE, DoctorReader, DoctorRun, NcclFigure, hosts_of, parse_marker
from verify.series import Series

CHUNK_BYTES = 1 << 20
LINE_CHARS = 1 << 20  # a log line is a few hundred characters; past this it is a file of something else
# What str.splitlines ends a line at (\r\n is one end).
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


class Lines:
    """The lines of a stream of text chunks; `cut` counts the lines longer than LINE_CHARS, read in part, and
    `undecodable` those that held bytes that are not UTF-8 (replaced by U+FFFD as they were decoded)."""

    def __init__(self, chunks: Iterable[str]) -> None:
        self.chunks, self.cut, self.undecodable = chunks, 0, 0

    def __iter__(self) -> Iterator[str]:
        for line in self._lines():
            if "\ufffd" in line:
                self.undecodable += 1
            yield line

    def _lines(self) -> Iterator[str]:
        carry, after_cr, skipping = "", False, False
        for text in self.chunks:
            if after_cr and text.startswith("\n"):  # the \n of a \r\n split between two chunks
                text = text[1:]
            after_cr = False
            if not text:
                continue
            lines = (carry + text).splitlines()
            if text[-1] in _BREAKS:
                carry, after_cr = "", text[-1] == "\r"
            else:
                carry = lines.pop()
            if skipping and lines:  # the rest of a cut line, up to its end
                del lines[0]
                skipping = False
            yield from lines
            if skipping:
                carry = ""
            elif len(carry) > LINE_CHARS:
                yield carry[:LINE_CHARS]
                self.cut += 1
                carry, skipping = "", True
        if carry and not skipping:
            yield carry


def binary_chunks(f: IO[bytes]) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := f.read(CHUNK_BYTES):
        yield decoder.decode(chunk)
    yield decoder.decode(b"", final=True)


def text_chunks(f: IO[str]) -> Iterator[str]:
    while chunk := f.read(CHUNK_BYTES):
        yield chunk


class LogFold:
    """One pass over a log (`feed` each line), then the answers. `nccl` / `p2p` False: that kind's readers
    are left out (`report --kind` names the kind; a log judged as one kind needs no other)."""

    def __init__(self, *, nccl: bool = True, p2p: bool = True, tail: int = 0) -> None:
        self.allreduce = Stream() if nccl else None
        self.doctor = DoctorReader() if nccl else None
        self.osu = osu.Parser() if p2p else None
        self.perftest = perftest.Parser() if p2p else None
        self.section: str | None = None  # the name of the section being read (None: before the first marker)
        self.allreduce_section = False  # an allreduce marker was seen
        self.round0: tuple[tuple[str, ...], NcclFigure] | None = None  # the first allreduce section, of 2 hosts
        self._round0_open = False
        self.lines_cut = 0
        self.lines_undecodable = 0
        # the last `tail` lines up to the last that is not empty, and the empty lines after it
        self._tail: deque[str] = deque(maxlen=tail)
        self._empty_after = 0

    def feed(self, line: str) -> None:
        if self._tail.maxlen:
            if line:
                self._tail.extend([""] * min(self._empty_after, self._tail.maxlen))
                self._tail.append(line)
                self._empty_after = 0
            else:
                self._empty_after += 1
        if marker := parse_marker(line):
            self.section, attrs = marker
            self._round0_open = False
            if self.section == ALLREDUCE and not self.allreduce_section:
                self.allreduce_section = True
                if self.allreduce is not None and len(hosts := hosts_of(attrs)) == 2:
                    self.round0, self._round0_open = (hosts, NcclFigure()), True
            if self.doctor is not None:
                self.doctor.begin(self.section, attrs)
        elif self.allreduce is not None:
            if self.section is None or self.section == ALLREDUCE:
                self.allreduce.feed(line)
            if self._round0_open:
                self.round0[1].feed(line)
            self.doctor.feed(line)
        if self.osu is not None:
            self.osu.feed(line)
            self.perftest.feed(line)

    def read(self, lines: Iterable[str]) -> LogFold:
        for line in lines:
            self.feed(line)
        self.lines_cut += getattr(lines, "cut", 0)
        self.lines_undecodable += getattr(lines, "undecodable", 0)
        return self

    # ---- the answers -------------------------------------------------------------------------------
    def last_lines(self) -> list[str]:
        """The log's last `tail` lines, the empty ones at its end left out (what `collect` shows)."""
        return list(self._tail)

    def kind(self) -> str:
        """As `report --kind auto` chooses: a doctor's log holds ib_write_bw tables too, and its all-reduce
        section makes it nccl; else p2p where an OSU or perftest table is, else nccl."""
        if self.allreduce_section:
            return kinds.first_of(kinds.NCCL_TESTS).name
        tables = self.osu is not None and (self.osu.titled or self.perftest.headed)
        return kinds.first_of(kinds.BANDWIDTH_TABLES if tables else kinds.NCCL_TESTS).name

    def _cut(self) -> tuple[str, ...]:
        cut = (f"{self.lines_cut} line(s) over {bounded.chars(LINE_CHARS)}: the start of each read",) \
            if self.lines_cut else ()
        bad = (f"{self.lines_undecodable} line(s) with bytes that are not UTF-8: read with those bytes replaced",) \
            if self.lines_undecodable else ()
        return cut + bad

    def nccl(self) -> NcclResult:
        """`nccl.parse(sections.allreduce_text(log))`; ParseError when the log holds no nccl-tests result."""
        result = self.allreduce.result()
        return dataclasses.replace(result, not_kept=result.not_kept + self._cut()) if self._cut() else result

    def doctor_run(self) -> DoctorRun:
        """`sections.read_doctor(sections.split(log))`."""
        return self.doctor.run()

    def round0_pair(self) -> PairRun | None:
        """The first allreduce section as the doctor's pair of round 0, when it names two hosts."""
        if self.round0 is None:
            return None
        (a, b), sink = self.round0
        return sink.pair(0, (a, b))

    def p2p(self) -> list[Series]:
        """`p2p.parse(log)`."""
        return p2p.found(self.osu.series() + self.perftest.series())

    def p2p_not_kept(self) -> tuple[str, ...]:
        return (*self.osu.not_kept(), *self.perftest.not_kept(), *self._cut())


def fold(log: str | LogFold, *, nccl: bool = True, p2p: bool = True) -> LogFold:
    """A log given whole, folded (as a file is, line by line); a fold as it is."""
    return log if isinstance(log, LogFold) else LogFold(nccl=nccl, p2p=p2p).read(log.splitlines())


def read(f: IO[bytes] | IO[str], kind: str = "auto", tail: int = 0) -> LogFold:
    """A file, stdin or an HTTP answer, read once: binary (decoded as UTF-8) or, where it is a text stream,
    as it comes. `kind`: the kind it is judged as (auto: either); `tail`: the last lines to keep."""
    chunks = text_chunks(f) if isinstance(f.read(0), str) else binary_chunks(f)  # type: ignore[arg-type]
    log_format = None if kind == "auto" else kinds.kind(kind).log_format  # None: either
    out = LogFold(nccl=log_format in (None, kinds.NCCL_TESTS), p2p=log_format in (None, kinds.BANDWIDTH_TABLES),
                  tail=tail)
    return out.read(Lines(chunks))


__all__ = ["LINE_CHARS", "Lines", "LogFold", "ParseError", "fold", "read"]
