"""Run `__main__.py` under Pulumi's mock engine and record everything it would ask the engine for.

`render(stack)` loads `Pulumi.<stack>.yaml` the way the CLI hands it to the program (scalars as
strings, objects as JSON), runs the real program, and returns a `Rendering`: every resource with
its inputs, parent, dependencies and options, and the stack outputs. Secret inputs and outputs
are kept apart so that a render can redact them.
"""

from __future__ import annotations

import copy
import functools
import os
import runpy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.platform import volcano
from offline import pulumi_adapter as sdk
from offline import reference as reference_material
from offline.mocks import OfflineMocks
from stack_config import goyaml, stackfile

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "aks-infiniband"
SECRET = "[secret]"
# libyaml when available (as offline/charts.py): the test suite reads the stack files for each of its
# hundreds of renders, and the pure-Python loader took ten times as long.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Resource:
    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    secret_inputs: list[str]  # top-level input keys that hold a secret somewhere inside
    dependencies: list[str]  # URNs (explicit depends_on and those implied by inputs)
    provider: str
    protect: bool
    retain_on_delete: bool
    custom_timeouts: dict[str, str]
    ignore_changes: list[str]
    additional_secret_outputs: list[str]
    remote: bool
    # the former identities the resource answers to (renames): each alias's non-empty fields
    aliases: list[dict[str, str]] = field(default_factory=list)
    # read, not created: a `.get` of an existing object or a StackReference (nothing is applied)
    read: bool = False

    @property
    def short_type(self) -> str:
        return self.type


@dataclass
class Rendering:
    stack: str
    resources: list[Resource]
    outputs: dict[str, Any]
    secret_outputs: set[str] = field(default_factory=set)

    def of_type(self, type_: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Resource:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        if len(found) != 1:
            names = [r.name for r in self.of_type(type_)]
            raise LookupError(f"expected one {type_} named {name!r}, found {len(found)} among {names}")
        return found[0]

    def by_urn(self, urn: str) -> Resource:
        for r in self.resources:
            if r.urn == urn:
                return r
        raise LookupError(urn)

    def depends_on(self, resource: Resource, other: Resource) -> bool:
        """Whether `resource` waits for `other`, directly or through any chain of dependencies,
        counting a dependency on a component as one on everything inside it."""
        children: dict[str, list[str]] = {}
        for r in self.resources:
            children.setdefault(r.parent, []).append(r.urn)

        def expand(urn: str) -> set[str]:
            out, todo = set(), [urn]
            while todo:
                u = todo.pop()
                if u not in out:
                    out.add(u)
                    todo.extend(children.get(u, []))
            return out

        seen: set[str] = set()
        todo = list(resource.dependencies)
        while todo:
            urn = todo.pop()
            for u in expand(urn):
                if u in seen:
                    continue
                seen.add(u)
                if u == other.urn:
                    return True
                try:
                    todo.extend(self.by_urn(u).dependencies)
                except LookupError:
                    pass
        return False


def _alias(alias: Any) -> dict[str, str]:
    if alias.HasField("spec"):
        spec = alias.spec
        return {k: v for k, v in (("name", spec.name), ("type", spec.type), ("parentUrn", spec.parentUrn)) if v}
    return {"urn": alias.urn}


class _InputsKept(pulumi.runtime.Mocks):
    """The mocks the monitor answers with, keeping the inputs it deserialized for the registration it
    answers: the record takes them instead of deserializing the request a second time."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        self.mocks, self.inputs = mocks, {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.inputs = args.inputs
        return self.mocks.new_resource(args)

    def call(self, args: pulumi.runtime.MockCallArgs) -> Any:
        return self.mocks.call(args)

    def register_transform(self, transform: Any) -> None:
        self.mocks.register_transform(transform)

    def register_invoke_transform(self, transform: Any) -> None:
        self.mocks.register_invoke_transform(transform)


class RecordingMonitor(sdk.MockMonitor):
    """The SDK's mock monitor, also keeping each registration request's options and edges."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        self._kept = _InputsKept(mocks)
        super().__init__(self._kept)
        self.registrations: list[Resource] = []

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            deps = set(request.dependencies)
            for prop in request.propertyDependencies.values():
                deps.update(prop.urns)
            timeouts = {k: getattr(request.customTimeouts, k) for k in ("create", "update", "delete")
                        if getattr(request.customTimeouts, k)}
            self.registrations.append(
                Resource(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    parent=request.parent,
                    custom=request.custom,
                    inputs=self._kept.inputs,
                    secret_inputs=sdk.secret_keys(self._kept.inputs),
                    dependencies=sorted(deps),
                    provider=request.provider,
                    protect=request.protect,
                    retain_on_delete=request.retainOnDelete,
                    custom_timeouts=timeouts,
                    ignore_changes=list(request.ignoreChanges),
                    additional_secret_outputs=list(request.additionalSecretOutputs),
                    remote=request.remote,
                    aliases=[_alias(a) for a in request.aliases],
                )
            )
        return response

    def ReadResource(self, request):  # noqa: N802 (gRPC method name)
        """A read (e.g. a StackReference): recorded like a registration, with its properties as inputs."""
        response = super().ReadResource(request)
        self.registrations.append(
            Resource(type=request.type, name=request.name, urn=response.urn, parent=request.parent, custom=True,
                     inputs=sdk.deserialize(request.properties), secret_inputs=[],
                     dependencies=sorted(request.dependencies), provider=request.provider, protect=False,
                     retain_on_delete=False, custom_timeouts={}, ignore_changes=[],
                     additional_secret_outputs=list(request.additionalSecretOutputs), remote=False, read=True)
        )
        return response


def stack_file_config(stack: str, root: Path | None = None) -> dict[str, Any]:
    """The `config:` map of Pulumi.<stack>.yaml, as typed YAML values, read as strictly as the CLI reads
    it (stack_config.stackfile: a StackFileError names the file, line and column)."""
    root = ROOT if root is None else root
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path.name} in {root}")
    return stackfile.read(path)


def project_defaults(root: Path = ROOT) -> dict[str, Any]:
    """The defaults Pulumi.yaml declares for the project's keys, by full key: the CLI hands them to
    the program for every key the stack file leaves unset."""
    path = root / "Pulumi.yaml"
    return copy.deepcopy(_defaults(path, path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=4)
def _defaults(path: Path, mtime_ns: int) -> dict[str, Any]:
    """Read once per version of the file (its mtime): every render asks, and parsing it was a third of
    the cost of a run that the configuration stops."""
    doc = yaml.load(path.read_text(), Loader=_LOADER) or {}  # noqa: S506 (a safe loader)
    return {f"{PROJECT}:{name}": decl["default"]
            for name, decl in (doc.get("config") or {}).items() if "default" in decl}


def as_cli_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Values as the Pulumi CLI hands them to a program: strings; objects and arrays as JSON, numbers
    as Go writes them (stack_config.goyaml); encrypted values (which cannot be decrypted offline) as a placeholder."""
    out: dict[str, str] = {}
    for key, value in config.items():
        full = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            out[full] = SECRET
        else:
            out[full] = goyaml.cli_string(value)
    return out


class ReferenceMissing(pulumi.RunError):
    """The render needs Volcano's release manifest, and the reference material here lacks it (the
    program's own one-line message, which says how to get it). The tests skip on it (tests/conftest.py)."""


def render(stack: str = "dev", config: Mapping[str, Any] | None = None, program: Path | None = None,
           monitor: RecordingMonitor | None = None) -> Rendering:
    """Run the program for `stack` under mocks, with the configuration the CLI would hand it: the
    stack file's (or `config`, which replaces it; keys may omit the project prefix) over the
    defaults Pulumi.yaml declares. Exceptions from the program (e.g. a RunError for bad
    configuration) propagate unchanged; pass your own `monitor` to see what was registered before."""
    program = program or ROOT / "__main__.py"
    given = stack_file_config(stack) if config is None else config
    full = {k if ":" in k else f"{PROJECT}:{k}": v for k, v in given.items()}
    cfg = as_cli_config({**project_defaults(), **full})
    monitor = monitor if monitor is not None else RecordingMonitor(OfflineMocks())
    root = sdk.start(OfflineMocks(), project=PROJECT, stack=stack, monitor=monitor)

    cwd = os.getcwd()
    os.chdir(program.parent)  # Pulumi runs a program from its project directory
    # Volcano's release manifest, which the program applies: the reference material's examples/ holds it
    # under the cache's name (offline/reference.lock.json, checked by `make reference`), so the render
    # reads and checks that copy and fetches nothing (unless the cache is set already). Without it the
    # render cannot be made: the program stops with one line saying how to get it.
    volcano_env = {} if os.environ.get(volcano.CACHE_ENV) else {
        volcano.CACHE_ENV: str(reference_material.reference_dir() / "examples"),
        volcano.NO_FETCH_ENV: "the offline render reads Volcano's release manifest from the reference material "
                              f"and fetches nothing: {reference_material.HOW_TO_GET}"}
    os.environ.update(volcano_env)
    try:
        with sdk.cli_config(cfg):
            sdk.run(lambda: runpy.run_path(str(program), run_name="__main__"))
    except pulumi.RunError as err:
        if volcano_env and isinstance(err.__context__, volcano.ManifestMissing):
            raise ReferenceMissing(str(err)) from None
        raise
    finally:
        os.chdir(cwd)
        for key in volcano_env:
            del os.environ[key]

    outputs: dict[str, Any] = {}
    secret_outputs: set[str] = set()
    for key, value in sorted(sdk.outputs(root).items()):
        outputs[key], is_secret = sdk.resolve(value)
        if is_secret:
            secret_outputs.add(key)
    return Rendering(stack=stack, resources=monitor.registrations, outputs=outputs, secret_outputs=secret_outputs)
