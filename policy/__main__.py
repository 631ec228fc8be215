"""The aks-infiniband policy pack: `pulumi preview --policy-pack policy` (from the project directory).

The rules live in rules.py as plain functions; this file only wraps each in a ResourceValidationPolicy
of the rule's enforcement level (mandatory, or advisory for the guardrails' non-production variants).
The rules import the project's `core` package, which sits in this
directory's parent: the analyzer runs this file from policy/, so the parent is put on sys.path here.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE):  # the project root (core/), then this directory (rules)
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import rules  # noqa: E402
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy  # noqa: E402

PolicyPack(
    name="aks-infiniband",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(name=rule.name, description=rule.description, validate=rule.check,
                                 enforcement_level=EnforcementLevel(rule.enforcement))
        for rule in rules.POLICIES
    ],
)
