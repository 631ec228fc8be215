"""What the log readers keep of the things a log can hold without end (result rows, failure lines, NCCL
WARN lines, a section's text): the first few, and a count of the rest. A log is read once, line by line
(`verify.logread`), so memory does not grow with the log; where something was left out, the report says so.

The limits sit far above what a run prints (a sweep of 8 B to 16 GiB is 32 rows; a node's ibstatus
listing is under a hundred lines), so only a log unlike any run's meets them.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")

ROWS = 10_000  # nccl-tests result rows (-N repeats the sweep; -N 0 repeats it without end)
RANKS = 65_536  # "#  Rank N ..." lines
LINES = 1_000  # failure lines and NCCL WARN lines: the report shows the first 3, 10 or 50
JSON_CHARS = 64 << 20  # an nccl-tests -J document: a few KB per row
SECTION_CHARS = 1 << 20  # a doctor section read as a whole (ibstatus, nvidia-smi -L)
SERIES = 256  # point-to-point tables: the verdict reads the last one
POINTS = 10_000  # rows of one point-to-point table


class Kept(Generic[T]):
    """A list that keeps its first `limit` items (its last, with keep_last) and counts the others."""

    __slots__ = ("dropped", "items", "keep_last", "limit", "what")

    def __init__(self, limit: int, what: str, keep_last: bool = False) -> None:
        self.items: list[T] | deque[T] = deque(maxlen=limit) if keep_last else []
        self.limit, self.what, self.keep_last, self.dropped = limit, what, keep_last, 0

    def append(self, item: T) -> None:
        if len(self.items) < self.limit:
            self.items.append(item)
        else:
            self.dropped += 1
            if self.keep_last:
                self.items.append(item)  # the deque lets the oldest go

    def __len__(self) -> int:
        return len(self.items)

    def note(self) -> str | None:
        """What was left out, in words (None: nothing)."""
        if not self.dropped:
            return None
        which = "last" if self.keep_last else "first"
        return f"{self.limit + self.dropped} {self.what} in the log: the {which} {self.limit} read, the rest counted"


def chars(n: int) -> str:
    """A limit in characters, in words: "64 MiB" (a character of a log is a byte but for a few)."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} characters"


def notes(tables: Kept, tables_cut: int) -> list[str]:
    """What a point-to-point parser left out: tables, and rows of its tables."""
    cut = f"{tables_cut} table(s) of over {POINTS} rows: the first {POINTS} rows of each read" if tables_cut else None
    return [n for n in (tables.note(), cut) if n]
