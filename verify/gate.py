"""Which verdicts stop a deploy or a CI job: the gate's level, the same for the stack
(`fabricTest.failOn`) and the command line (`--fail-on`).

`fail`: only FAIL trips it. `warn`: anything but PASS does (WARN, UNKNOWN, FAIL): a team that asks
for a clean result does not let "could not judge" through either. The levels follow the verdict's
own order of severity (verify.verdict.Verdict.severity: PASS < WARN < UNKNOWN < FAIL).
"""

from __future__ import annotations

from verify.verdict import Verdict

LEVELS = {"fail": Verdict.FAIL, "warn": Verdict.WARN}  # --fail-on / fabricTest.failOn -> the lowest verdict that trips
DEFAULT_LEVEL = "fail"


def trips(verdict: str | None, level: str | None) -> bool:
    """Whether a result with `verdict` trips a gate at `level` (None: no gate)."""
    if level is None or verdict is None:
        return False
    return Verdict(verdict).severity >= LEVELS[level].severity
