"""Which verdicts stop a deploy or a CI job: the gate's level, the same for the stack
(`fabricTest.failOn`) and the command line (`--fail-on`); the levels are core.choices.GATE_LEVELS.

`fail`: only FAIL trips it. `warn`: anything but PASS does (WARN, UNKNOWN, FAIL): a team that asks
for a clean result does not let "could not judge" through either. The levels follow the verdict's
own order of severity (verify.verdict.Verdict.severity: PASS < WARN < UNKNOWN < FAIL).
"""

from __future__ import annotations

from core import choices
from verify.verdict import Verdict


def trips(verdict: str | None, level: str | None) -> bool:
    """Whether a result with `verdict` trips a gate at `level` (None: no gate)."""
    if level is None or verdict is None:
        return False
    return Verdict(verdict).severity >= Verdict(choices.GATE_LEVELS[level]).severity
