"""docs/certifier-runbook.md's commands, run as written against the real API server after the scenario
each section is for (a quarantine, a tripped breaker, a held node), with NODE the node in question: every
kubectl command of the page runs, or is named below with why it cannot run here.

What this proves: the names the page uses (the condition, the Events' reasons, the ConfigMaps and their
keys, the hold's annotation and taint key, the CronJob a re-test is made from) are the ones the certifier
writes, and an admin's re-test Job passes the namespace's Pod Security admission. Not proved: what the
re-test's pod then does (kwok runs no container).
"""

from __future__ import annotations

import json
import re
import shlex

import pytest

from core import fabric
from e2e import apply
from e2e.tests.test_certifier import World, doctor_log
from offline import engine

RUNBOOK = engine.ROOT / "docs" / "certifier-runbook.md"
# Commands that need a running container (kwok runs none), each with why.
NOT_HERE = {
    "kubectl -n fabric-certifier logs -f job/retest-now": "the re-test's pod runs no container under kwok",
    "kubectl -n fabric-certifier logs deploy/fabric-certifier-admission --since=1h | grep NODE": "no container, no log",
    "kubectl -n fabric-certifier logs deploy/fabric-certifier-admission": "no container, no log",
    "kubectl -n fabric-certifier logs job/JOB": "no container, no log",
}
# The workload objects the sections' commands act on, beyond what World applies: the CronJob a re-test is
# created from, the admission Deployment (kwok runs its pods Ready, which is what `rollout status` reads).
WORKLOADS = ("CronJob", "Deployment")


def sections() -> dict[str, list[str]]:
    """Each `## ` section's kubectl commands, in the page's order (code blocks and inline code)."""
    out: dict[str, list[str]] = {}
    title = ""
    for block in re.split(r"^## (.+)$", RUNBOOK.read_text(), flags=re.M)[1:]:
        if not title:
            title = block
            continue
        text = re.sub(r"\s*\n\s*", " ", block)  # an inline command may wrap
        commands = re.findall(r"```bash (.*?) ```", text) + re.findall(r"(?<!`)`(kubectl [^`]+)`", text)
        out[title] = [c.strip() for chunk in commands for c in re.split(r"(?= kubectl )", chunk)
                      if c.strip().startswith("kubectl ")]
        title = ""
    return out


def run(world: World, command: str, node: str) -> str:
    """One command of the page, NODE replaced; a `| grep` tail is left to the assertion."""
    command = command.split(" | ")[0].replace("NODE", node)
    done = world.kubectl(*shlex.split(command)[1:], check=False)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout


@pytest.fixture
def runbook_world(planes, tmp_path) -> World:
    world = World(planes, tmp_path)
    groups, single = apply.stack_objects(world.rendering)
    for o in single:
        if o["kind"] in WORKLOADS and o["metadata"]["namespace"] == "fabric-certifier":
            assert not apply.apply_one(world.plane, o), apply.label(o)
    return world


def test_every_kubectl_command_of_the_page_is_run_here_or_said_why_not():
    commands = [c for cs in sections().values() for c in cs]
    assert len(commands) >= 15, commands
    assert set(NOT_HERE) <= set(commands), "a command named here is no longer in the page"


def test_a_node_is_quarantined(runbook_world: World):
    world = runbook_world
    assert world.admit_once().returncode == 0
    assert world.run_and_certify(doctor_log(job=world.job_name, slow=(3,)))[0] == 0
    node = world.ib[3]
    out = {c: run(world, c, node) for c in sections()["A node is quarantined"] if c not in NOT_HERE}
    why, events, history = list(out.values())[:3]
    assert "busbw" in why or "GB/s" in why, why
    assert node in events and "FabricQuarantined" in events, events
    assert json.loads(history), "the node's history"
    created = world.kubectl("get", "job", "retest-now", "-n", "fabric-certifier", "-o", "json").stdout
    assert json.loads(created)["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert world.node(node)["spec"].get("unschedulable") is not True, "the page's cordon, then its uncordon"


def test_the_circuit_breaker_tripped(runbook_world: World):
    world = runbook_world
    assert world.admit_once().returncode == 0
    world.run_and_certify(doctor_log(job=world.job_name, slow=(2, 3)))
    out = {c: run(world, c, world.ib[2]) for c in sections()["The circuit breaker tripped"] if c not in NOT_HERE}
    events, result = list(out.values())[:2]
    assert world.ib[2] in events and world.ib[3] in events, events
    assert json.loads(result)["breaker"].startswith("circuit breaker"), result
    assert fabric.QUARANTINED in world.fabric_taints(world.ib[2]), "the page's own quarantine, as the admin"


def test_a_node_is_never_admitted(runbook_world: World):
    world = runbook_world
    assert world.admit_once().returncode == 0
    node = world.ib[0]
    assert world.fabric_taints(node) == [fabric.UNCERTIFIED]
    out = {c: run(world, c, node) for c in sections()["A node is never admitted"] if c not in NOT_HERE}
    held = next(iter(out.values()))
    assert fabric.HOLD_TAINT_KEY in held and held.splitlines()[1].strip(), "the hold and when it was put on"
    assert any("Allocatable" in text for text in out.values())
    assert world.fabric_taints(node) == [], "the page's last step lifts the hold"


def test_the_admission_loop_is_down(runbook_world: World):
    world = runbook_world
    for command in sections()["The admission loop is down"]:
        if command not in NOT_HERE:
            run(world, command.replace("rollout status", "rollout status --timeout=90s"), world.ib[0])


def test_the_certifier_is_not_running(runbook_world: World):
    """The CronJob the page reads is the stack's, with the fields it names (empty: it never ran here)."""
    world = runbook_world
    out = {c: run(world, c, world.ib[0]) for c in sections()["The certifier is not running"] if c not in NOT_HERE}
    times = next(iter(out.values())).split("\n")
    assert times[2] in ("", "false"), times  # not suspended
    assert any(c.startswith("kubectl -n fabric-certifier create job --from=cronjob/") for c in out)
    made = json.loads(world.kubectl("get", "job", "retest-now", "-n", "fabric-certifier", "-o", "json").stdout)
    assert made["metadata"]["ownerReferences"][0]["name"] == "fabric-certifier"
