"""A second `pulumi up` has nothing to do: the program, run twice with the same configuration, asks
the engine for exactly the same resources with exactly the same inputs, dependencies and options -
in this process, in a fresh interpreter with another hash seed (set/dict ordering noise), and from
a checkout at another absolute path (no paths, timestamps or random names in any input).

One fresh interpreter is enough for the last two: it differs from this process in both the seed and
the checkout's path (this process's render is of this checkout, under this process's seed)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from components.platform import volcano
from offline import engine, synth
from offline.mocks import OFFLINE_ID
from offline.reference import reference_dir
from tests.paths import ROOT

# What a fresh interpreter prints: the dev render as canonical JSON. It lives only for that render, so
# without the cyclic collector, which would walk the provider SDKs' type tables again and again while they
# are imported (the test process collects less often for the same reason: tests/conftest.py); nothing the
# render gives depends on when garbage is collected. Nor is there anything to tear down after it: the exit
# skips the interpreter's teardown of the SDKs (~0.5 s of CPU).
DUMP = """
import gc
gc.disable()
import json, os, sys
from offline import engine
from tests.stack.test_idempotency import canonical
sys.stdout.write(json.dumps(canonical(engine.render("dev")), sort_keys=True))
sys.stdout.flush()
os._exit(0)
"""

TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def canonical(rendering: engine.Rendering) -> dict[str, Any]:
    """Everything the engine is asked for, keyed by URN (registration order depends on when each
    Output resolves, which the engine does not care about); lists inside inputs keep their order."""
    resources = {r.urn: dataclasses.asdict(r) for r in rendering.resources}
    assert len(resources) == len(rendering.resources), "two resources share a URN"
    outputs = {k: ("[secret]" if k in rendering.secret_outputs else v) for k, v in rendering.outputs.items()}
    return json.loads(json.dumps({"resources": resources, "outputs": outputs}, sort_keys=True, default=str))


def strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


# Another shape of the stack (SR-IOV, three A100 nodes, protected): rendered again in
# test_two_renders_ask_for_identical_resources and compared with the session's render of it.
OTHER_SHAPE = {"rdmaMode": "sriov", "ibPool": {"vmSize": "Standard_ND96asr_v4", "nodeCount": 3}, "protect": True}


def test_no_timestamps_random_ids_or_checkout_paths_in_inputs(dev):
    for r in dev.resources:
        for s in strings(r.inputs):
            assert not TIMESTAMP.search(s), f"{r.type} {r.name}: timestamp-like input {s!r}"
            # ids read from Azure (getClientConfig's subscription; all zeros under the mocks) are stable
            assert not [u for u in UUID.findall(s) if u != OFFLINE_ID], f"{r.type} {r.name}: random-looking id {s!r}"
            assert str(ROOT) not in s, f"{r.type} {r.name}: absolute checkout path in input {s!r}"


def _render_in_fresh_interpreter(checkout: Path, hash_seed: str) -> dict[str, Any]:
    path = os.pathsep.join([str(checkout), str(checkout / "tests")])
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1",
           # the checked copy of Volcano's manifest this checkout reads (the copy has no ../shared)
           volcano.CACHE_ENV: os.environ.get(volcano.CACHE_ENV) or str(reference_dir() / "examples")}
    # each checkout's own environment inside it (here a link to this one's), as Pulumi.yaml sets up
    (checkout / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    python = checkout / ".venv" / Path(sys.executable).relative_to(sys.prefix)
    done = subprocess.run([str(python), "-c", DUMP], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _copy_checkout(dest: Path) -> Path:
    """The program and its files at `dest` (not the installed tools: the render needs none), with the
    bytecode this checkout's __pycache__ holds, if any: a module's .pyc is used only while its source has
    the size and modification time it was compiled from (copytree keeps both), and the import system
    points the code it loads at the copy's own files (its __file__, co_filename), so the copy's render
    sees only the copy's paths; without them each of the copy's modules is compiled from source again."""
    skip = shutil.ignore_patterns(".git", ".venv*", "build", ".pytest_cache", ".ruff_cache")

    def ignore(directory: str, names: list[str]) -> set[str]:
        tools = {"bin", "node_modules"} if Path(directory) == ROOT / "tools" else set()
        return set(skip(directory, names)) | (tools & set(names))

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def test_same_inputs_from_another_checkout_and_hash_seed(tmp_path, dev):
    """A copy of the checkout at another absolute path, rendered by a fresh interpreter with another
    hash seed than this process's: the same answer as this process's render of this checkout."""
    other_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    elsewhere = _render_in_fresh_interpreter(_copy_checkout(tmp_path / "elsewhere" / "checkout"), other_seed)
    assert elsewhere == json.loads(json.dumps(canonical(dev), sort_keys=True))
    assert str(tmp_path) not in json.dumps(elsewhere), "an absolute path of the checkout leaked into the inputs"


def test_two_renders_ask_for_identical_resources(dev, render):
    """A second run of the program in this process asks for the same resources and outputs as the first,
    and so gives the same offline render, byte for byte (`make synth`'s files: manifests, plan, timeline,
    pictures); another shape of the stack is just as stable: a render of it now is the render the session
    made of it (two real renders: conftest.rendered renders each configuration once and hands out copies
    of that render, never this test's). The second dev run comes after that other shape, through the
    fixtures, so it also shows that they carry no state from one render to the next: neither dev_config's
    overrides (dev_config() after them still renders the dev stack as the session first rendered it, from
    its stack file) nor a memoised rendering that a test changed."""
    from conftest import dev_config  # here, not at the top: the fresh interpreter imports this module (DUMP)

    other = engine.render("dev", config=dev_config(**OTHER_SHAPE))
    rerun = engine.render("dev", config=dev_config())
    again = canonical(rerun)
    first = canonical(dev)
    assert sorted(again["resources"]) == sorted(first["resources"])
    for urn, resource in first["resources"].items():
        assert again["resources"][urn] == resource, f"{urn} differs between two runs"
    assert again["outputs"] == first["outputs"]
    files, files_again = synth.synthesize(dev), synth.synthesize(rerun)
    assert sorted(files) == sorted(files_again)
    changed = [p for p in files if files[p] != files_again[p]]
    assert not changed, f"render not deterministic: {changed}"
    mine = render(**OTHER_SHAPE)
    mine.resources.clear()
    mine.outputs.clear()
    assert canonical(render(**OTHER_SHAPE)) == canonical(other)
