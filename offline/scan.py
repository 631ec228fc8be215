"""What checkov scans (`make scan`, tests/fidelity/test_checkov.py): the Kubernetes objects of the dev and hb renders
(GPU and CPU-only fabric tests), as `make synth` writes them, except that a Volcano Job becomes one Pod per
task, built from the task's pod template. checkov reads any `kind: Job` as a batch/v1 Job (spec.template),
which a Volcano Job does not have, so it would check nothing real there (and fail two checks on the
missing template); the pods are what the scheduler creates.

Volcano's release manifest (manifests/volcano-manifest/) is left out: upstream's objects as published,
pinned by sha256 and applied unchanged, not this program's to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from offline import engine, synth

STACKS = ("dev", "hb")
VOLCANO_JOB_API = "batch.volcano.sh/"
VOLCANO_MANIFEST = "manifests/volcano-manifest/"


def pods_of_volcano_job(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    pods = []
    for task in job["spec"]["tasks"]:
        template = task["template"]
        pods.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**(template.get("metadata") or {}), "name": f"{meta['name']}-{task['name']}",
                         "namespace": meta.get("namespace", "default")},
            "spec": template["spec"],
        })
    return pods


def write_manifests(out: Path, renderings: Mapping[str, engine.Rendering]) -> int:
    """The renders' manifests into `out` (which must not exist), each file prefixed with its stack; returns
    how many Volcano Jobs were turned into pods.

    A file the first stack already wrote with the very same bytes (most of them: the namespaces, RBAC,
    the certifier's code) is written once: checkov names a resource by kind, namespace and name, not by
    file, so a second copy adds no finding and no resource, only a second parse (checkov's YAML parser
    is pure Python, and the certifier's code ConfigMap alone is half a megabyte)."""
    out.mkdir(parents=True)
    jobs = 0
    written: dict[str, bytes] = {}  # a file's name without its stack prefix -> its bytes
    for stack, rendering in renderings.items():
        files = synth.synthesize(rendering, images=False)
        manifests = {name: content for name, content in files.items()
                     if name.startswith("manifests/") and not name.startswith(VOLCANO_MANIFEST)}
        if not manifests:
            raise ValueError(f"the offline render of {stack} has no manifests")
        files_of_stack: dict[str, bytes] = {}
        for name, content in manifests.items():
            doc = yaml.load(content, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 (safe)
            if doc.get("apiVersion", "").startswith(VOLCANO_JOB_API) and doc.get("kind") == "Job":
                jobs += 1
                for pod in pods_of_volcano_job(doc):
                    files_of_stack[f"pod.{pod['metadata']['name']}.yaml"] = yaml.safe_dump(pod, sort_keys=True).encode()
            else:
                files_of_stack[Path(name).name] = content if isinstance(content, bytes) else content.encode()
        for name, data in files_of_stack.items():
            if written.get(name) != data:
                (out / f"{stack}.{name}").write_bytes(data)
            written.setdefault(name, data)
    return jobs
