"""A stack's offline render applied to the real API server, as `pulumi up` would apply it: the Helm
releases installed with the pinned Helm from the packaged charts (their CRDs first, as Helm does), the
Volcano manifest, then every other Kubernetes object, each server-side. Nothing is skipped silently:
`Outcome.refused` names each object the server refused, with the server's own message.

Volcano's webhook configurations stay as the manifest declares them: Volcano's own webhook (v1.10, with a
stand-in that admits the paths 1.10 does not serve: e2e/volcano.py) answers them, so the fabric test's
Job is admitted or refused by it, as on AKS.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster import Plane, say
from offline import charts, config_groups, objects
from offline.engine import Rendering

NOT_YET = ("no matches for kind", "ensure CRDs are installed first", "the server could not find the requested resource")
CRD_WAIT_SECONDS = 30


@dataclass
class Outcome:
    applied: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (object, the server's message)
    releases: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def label(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')} ({obj.get('apiVersion')})"


def stack_objects(rendering: Rendering) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the objects of the ConfigGroups, every other object the stack applies), in declaration order."""
    groups, single = [], []
    for r in rendering.resources:
        groups += config_groups.objects(r)
        if objects.k8s_api_kind(r):
            single.append(objects.manifest(r))
    return groups, single


def apply_one(plane: Plane, obj: Mapping[str, Any], manager: str = "pulumi-e2e") -> str | None:
    """Server-side apply of one object; None when accepted, else the server's message. Waits up to
    CRD_WAIT_SECONDS while the kind is not served yet (a CRD installed a moment before)."""
    deadline = time.monotonic() + CRD_WAIT_SECONDS
    while True:
        done = plane.kubectl("apply", "--server-side", "--force-conflicts", f"--field-manager={manager}", "-f", "-",
                             input=json.dumps(obj), check=False)
        if done.returncode == 0:
            return None
        message = (done.stderr or done.stdout).strip()
        if not any(s in message for s in NOT_YET) or time.monotonic() > deadline:
            return message
        time.sleep(1)


def helm_install(plane: Plane, release: charts.Release, archive: Path, helm: Path, values_dir: Path) -> str | None:
    """`helm install` of one release from its packaged archive with the stack's values; None on success."""
    values_dir.mkdir(parents=True, exist_ok=True)
    values = values_dir / f"{release.name}.values.yaml"
    values.write_text(yaml.safe_dump(release.values, sort_keys=True))
    argv = [str(helm), "install", release.name, str(archive), "--namespace", release.namespace, "--create-namespace",
            "--values", str(values), "--kubeconfig", str(plane.state / "kubeconfig"), "--timeout", "120s"]
    done = subprocess.run(argv, capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip()


def apply_rendering(plane: Plane, rendering: Rendering, work: Path) -> Outcome:
    out = Outcome()
    groups, single = stack_objects(rendering)
    namespaces = [o for o in single if o["kind"] == "Namespace"]
    for obj in namespaces:
        _record(out, obj, apply_one(plane, obj))
    helm = charts.find_helm()
    for release in charts.releases(rendering):
        archive = release.archive(charts.charts_dir())
        if not archive.is_file():
            out.refused.append((f"Helm release {release.name}", f"no chart archive {archive}"))
            continue
        error = helm_install(plane, release, archive, helm, work / "values")
        if error:
            out.refused.append((f"Helm release {release.namespace}/{release.name} ({archive.name})", error))
        else:
            out.releases.append(f"{release.name} ({archive.name})")
    for obj in groups:
        _record(out, obj, apply_one(plane, obj))
    for obj in single:
        if obj["kind"] != "Namespace":
            _record(out, obj, apply_one(plane, obj))
    say(f"{rendering.stack}: {len(out.applied)} objects and {len(out.releases)} Helm releases accepted, "
        f"{len(out.refused)} refused")
    return out


def _record(out: Outcome, obj: Mapping[str, Any], error: str | None) -> None:
    if error is None:
        out.applied.append(label(obj))
    else:
        out.refused.append((label(obj), error))


def failures(outcome: Outcome) -> str:
    return "\n".join(f"- {what}: {why}" for what, why in outcome.refused)

