"""The render's timeline as data: each step (a resource, or on-node work after it) with its duration
and dependencies, when it starts and ends, and the critical path. Built by `schedule.build_timeline`,
drawn by `mermaid`; its own module so that neither imports the other."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from offline.durations import Duration


@dataclass
class Step:
    id: str
    label: str  # the rule that gave the duration
    type: str
    component: str
    duration: Duration
    deps: set[str] = field(default_factory=set)
    on_node: bool = False  # work the cluster does after Pulumi moved on


@dataclass
class Timeline:
    steps: dict[str, Step]
    target: str | None  # the step whose end is the first all-reduce result
    start: dict[str, dict[str, float]]  # scenario -> step id -> start minute
    finish: dict[str, dict[str, float]]
    critical_path: list[str]  # typical scenario, in order

    def critical_total(self, scenario: str) -> float:
        end = self.target or max(self.finish[scenario], key=lambda s: (self.finish[scenario][s], s), default=None)
        return self.finish[scenario][end] if end else 0.0

    def sequential_total(self, scenario: str) -> float:
        # fsum: exact, so the total does not depend on the (racy) order resources registered in
        return math.fsum(getattr(s.duration, f"{scenario}_min") for s in self.steps.values())

    def apply_complete(self, scenario: str) -> float:
        """When `pulumi up` returns: every resource created (on-node steps may still be running)."""
        return max((f for sid, f in self.finish[scenario].items() if not self.steps[sid].on_node), default=0.0)
