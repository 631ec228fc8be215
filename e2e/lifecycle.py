"""What the engine tier's tests share (e2e/tests/test_engine_*.py): the CLI run on one stack, timed and
checked, and every object the API server lists, to compare what is left after a destroy."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from e2e import engine

# Bounds of each step (seconds), each far above its measured time (docs/real-control-plane.md).
UP_SECONDS, PREVIEW_SECONDS, DESTROY_SECONDS = 900, 300, 600
# What the server or its controllers write by themselves, not the stack: left out of "what is left".
NOT_THE_STACKS = frozenset({
    "events", "events.events.k8s.io", "leases.coordination.k8s.io", "endpoints", "endpointslices.discovery.k8s.io",
    "serviceaccounts", "configmaps", "secrets", "controllerrevisions.apps", "replicasets.apps", "pods", "jobs.batch",
})


class Stack:
    """One stack of e2e/stacks through the real CLI; `times` holds each step's seconds, by command."""

    def __init__(self, name: str, bin_dir: Path):
        self.name, self.bin, self.times = name, bin_dir, {}

    @property
    def file(self) -> Path:
        """The working copy of the stack file (engine.project), which `pulumi config set` changes."""
        return engine.project() / f"Pulumi.{self.name}.yaml"

    @property
    def config(self) -> dict:
        return yaml.safe_load(self.file.read_text())["config"]

    def run(self, *args: str, timeout: float = PREVIEW_SECONDS, check: bool = True) -> subprocess.CompletedProcess:
        start = time.monotonic()
        done = engine.run([*args, "--stack", self.name], self.bin, capture=True, timeout=timeout)
        step = " ".join(a for a in args[:2] if not a.startswith("-"))
        self.times[step] = round(time.monotonic() - start, 1)
        print(f"[engine] pulumi {' '.join(args)} --stack {self.name}: exit {done.returncode} in {self.times[step]}s")
        if check:
            assert done.returncode == 0, (f"pulumi {' '.join(args)} exited {done.returncode}:\n"
                                          f"{done.stdout[-6000:]}\n{done.stderr[-4000:]}")
        return done

    def start(self) -> None:
        """A new stack of this name: its old state forgotten, then `stack init` with the passphrase provider."""
        engine.reset(self.name)
        self.run("stack", "init", "--secrets-provider", "passphrase")

    def preview_steps(self) -> list[dict]:
        return json.loads(self.run("preview", "--json").stdout)["steps"]

    @contextlib.contextmanager
    def config_set(self, key: str, value: str) -> Iterator[None]:
        """`pulumi config set --path KEY VALUE` for the block; the stack file as it was after it."""
        text = self.file.read_text()
        try:
            self.run("config", "set", "--path", key, value)
            yield
        finally:
            self.file.write_text(text)


def listed(plane) -> set[tuple[str, str, str]]:
    """(resource, namespace, name) of every object of every listable resource but those NOT_THE_STACKS."""
    kinds = plane.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    out = set()
    for kind in kinds:
        if kind in NOT_THE_STACKS:
            continue
        for item in json.loads(plane.kubectl("get", kind, "-A", "-o", "json").stdout).get("items", []):
            meta = item["metadata"]
            out.add((kind, meta.get("namespace", ""), meta["name"]))
    return out


CRD = "customresourcedefinitions.apiextensions.k8s.io"
API_SERVICE = "apiservices.apiregistration.k8s.io"


def left_after_destroy(plane, before: set[tuple[str, str, str]]) -> tuple[set, set[str]]:
    """What a destroy left of what the stack made: (objects other than the CRDs Helm keeps by design, those
    CRDs). The API server registers an APIService for each group version a CRD serves, and removes it with the
    CRD: those of the kept CRDs' groups go with them."""
    left = listed(plane) - before
    crds = {name for kind, _, name in left if kind == CRD}
    groups = {name.partition(".")[2] for name in crds}
    others = {x for x in left if x[0] != CRD and not (x[0] == API_SERVICE and x[2].partition(".")[2] in groups)}
    return others, crds
