"""The policy pack's rules (policy/rules.py) on the offline render: `python -m offline policy`.

CrossGuard runs the same rules during `pulumi preview --policy-pack policy`, which needs cloud
credentials (preview.yml). Here each rule gets what the analyzer would hand it - the resource's
inputs passed through pulumi_policy's own deserializer and read-only proxies - for every resource of
the offline render, so a pull request from a fork gets the policy verdict too (offline.yml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from offline.engine import Rendering, Resource
from policy import rules


@dataclass(frozen=True)
class ValidationArgs:
    """The fields of pulumi_policy.ResourceValidationArgs that the rules read."""

    resource_type: str
    name: str
    urn: str
    props: Any


@dataclass(frozen=True)
class Violation:
    policy: str
    resource: str  # the resource's name in the program
    message: str
    enforcement: str = rules.MANDATORY  # advisory ones are reported and fail nothing

    @property
    def mandatory(self) -> bool:
        return self.enforcement == rules.MANDATORY


def validation_args(resource: Resource) -> ValidationArgs:
    props = unknown_checking_proxy(deserialize_properties(resource.inputs))
    return ValidationArgs(resource_type=resource.type, name=resource.name, urn=resource.urn, props=props)


def violations(rendering: Rendering) -> list[Violation]:
    """Every violation the pack would report for this render, mandatory and advisory."""
    found: list[Violation] = []
    for resource in rendering.resources:
        args = validation_args(resource)
        for rule in rules.POLICIES:
            rule.check(args, lambda message, urn=None, rule=rule, resource=resource: found.append(
                Violation(rule.name, resource.name, str(message), rule.enforcement)))
    return found


def report(stack: str, found: list[Violation]) -> str:
    """Markdown: the verdict for one stack, one line per violation."""
    mandatory = [v for v in found if v.mandatory]
    advice = [v for v in found if not v.mandatory]
    if not found:
        return f"- `{stack}`: every rule of the policy pack passes ({len(rules.POLICIES)} rules)"
    head = f"**{len(mandatory)} mandatory violation(s)**" if mandatory else "no mandatory violation"
    lines = [f"- `{stack}`: {head}" + (f", {len(advice)} advisory" if advice else "")]
    lines += [f"  - `{v.policy}` ({v.enforcement}) on `{v.resource}`: {v.message}" for v in mandatory + advice]
    return "\n".join(lines)
