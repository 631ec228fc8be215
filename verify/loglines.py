"""What comes before the text of a line in a launcher log: the one place that knows the prefixes.

- `mpirun --tag-output` puts "[JOBID,RANK]<stdout>:" (or <stderr>) before every line a rank prints
  (OpenMPI's IOF); `untag` removes it.
- NCCL's own lines start "HOST:PID:TID [CUDADEV] NCCL INFO " or "HOST:PID:TID [CUDADEV] FILE:LINE
  NCCL WARN " (NVIDIA/nccl src/debug.cc, the same from 2.18 to 2.29; 2.29 replaces '%' and '/' in
  HOST with '-'). HOST is gethostname() cut at the first '.', so a Volcano worker appears as its
  pod name. With NCCL_DEBUG_TIMESTAMP_FORMAT a timestamp comes first; `nccl_line` skips anything
  before HOST. Old releases start a WARN with a newline, so it arrives after an empty line.
- nccl-tests prints a row's first five columns (size, count, type, redop, root), measures, then the
  rest; NCCL connects lazily (2.22+) and logs in between, into the same stdout, so an NCCL line can
  follow those columns with no space: "  8589934592  2147483648  float  sum  -1HOST:PID:TID [0] NCCL
  INFO ...". `ROW_COLUMNS` matches them (root read as -1 first: all_reduce_perf's); only the text after
  them is the NCCL line. The launcher's filter (scripts/nccl-launcher.sh) splits them with these
  same patterns (`*_ERE`), and prints the columns with the row's rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each prefix is written once, as a POSIX ERE that Python's `re` reads the same way, so that the
# launcher's log filter (scripts/nccl-launcher.sh, handed these by verify.launcher_env) matches exactly
# what the parsers here match.
TAG_ERE = r"^\[[0-9]+,[0-9]+\]<std(out|err)>:[ \t]?"
# An nccl-tests row's first five columns: size, count, type, redop, root.
ROW_COLUMNS_ERE = (r"^[ \t]*([0-9]+)[ \t]+([0-9]+)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+([A-Za-z_][A-Za-z0-9_]*)"
                   r"[ \t]+(-1|[0-9]+)")
# NCCL's HOST (gethostname() up to the first '.'), and what precedes its level: "HOST:PID:TID [DEV] ",
# then "FILE:LINE " on a WARN.
HOST_ERE = r"[^][ \t:<>]+"
NCCL_PREFIX_ERE = HOST_ERE + r":[0-9]+:[0-9]+ \[[0-9]+\] ([^ ]+:[0-9]+ )?NCCL (INFO|WARN)"

_TAG = re.compile(TAG_ERE)
ROW_COLUMNS = re.compile(ROW_COLUMNS_ERE)
_NCCL = re.compile(
    rf"(?:^|\s)(?P<host>{HOST_ERE}):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<where>\S+:\d+) )?NCCL (?P<level>INFO|WARN) ?(?P<message>.*)$"
)


def untag(line: str) -> str:
    """`line` without mpirun's --tag-output prefix (and without a trailing carriage return)."""
    return _TAG.sub("", line.rstrip("\r"))


@dataclass(frozen=True)
class NcclLine:
    host: str
    pid: int
    cuda_dev: int
    level: str  # "INFO" | "WARN"
    message: str  # the text after "NCCL INFO " / "NCCL WARN "
    text: str  # the whole line, untagged and stripped (for quoting)


def nccl_line(line: str) -> NcclLine | None:
    """The parts of one of NCCL's INFO/WARN lines (already untagged), or None for any other line. After
    an nccl-tests row's first columns (`ROW_COLUMNS`), the line is what follows them."""
    if "NCCL " not in line:
        return None
    if row := ROW_COLUMNS.match(line):
        line = line[row.end():]
    m = _NCCL.search(line)
    if not m:
        return None
    return NcclLine(
        host=m["host"],
        pid=int(m["pid"]),
        cuda_dev=int(m["dev"]),
        level=m["level"],
        message=m["message"].strip(),
        text=line.strip(),
    )
