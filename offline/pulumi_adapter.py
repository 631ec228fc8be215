"""Every use of the Pulumi SDK's internals, in one place: what the offline engine (and one test) needs
that the SDK does not offer publicly. Nothing the deployed program imports comes from here.

The SDK's public testing API (`pulumi.runtime.set_mocks`, `Mocks`) runs resource callbacks, but an
offline render also needs to: run a whole program file to completion and wait for every
registration (what `pulumi up` does around a program), read the root stack's outputs, see each
registration request (the mock monitor), and tell secrets apart in the wire format. Two more make
a render cheap without changing what it registers: monitor calls run inline rather than on a thread
pool, no stack trace is taken for source positions the mock monitor drops, and no alias is collapsed
to a URN that nothing reads.

`tests/unit/offline/test_pulumi_adapter.py` is the canary: it exercises each of these against the installed SDK
and fails loudly, naming what to re-check, on a Pulumi version other than `PULUMI_VERSION`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

import pulumi
from pulumi import _types
from pulumi import resource as _sdk_resource
from pulumi.runtime import mocks as _mocks
from pulumi.runtime import resource as _resource
from pulumi.runtime import rpc as _rpc
from pulumi.runtime import settings as _settings
from pulumi.runtime.config import set_all_config as _set_all_config
from pulumi.runtime.proto import resource_pb2 as _resource_pb2
from pulumi.runtime.proto import source_pb2 as _source_pb2
from pulumi.runtime.stack import run_pulumi_func as _run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

# The SDK version these internals were checked against (requirements.txt pins it).
PULUMI_VERSION = "3.272.0"
INSTALLED_VERSION = version("pulumi")

# The wire format's marker of a secret value: {SIG_KEY: SECRET_SIG, "value": ...}.
SIG_KEY: str = _rpc._special_sig_key
SECRET_SIG: str = _rpc._special_secret_sig

# The SDK's mock resource monitor; RecordingMonitor extends it to keep each request.
MockMonitor = _mocks.MockMonitor


def deserialize(struct: Any) -> dict[str, Any]:
    """A registration request's properties (protobuf Struct) as Python values, unknowns dropped."""
    return _rpc.deserialize_properties(struct, keep_unknowns=False)


def secret_keys(inputs: dict[str, Any]) -> list[str]:
    """The top-level properties that hold a secret somewhere inside, of properties as `deserialize` (and
    the mock monitor) gives them: a secret anywhere in a value marks the whole top-level value."""
    return sorted(k for k, v in inputs.items() if isinstance(v, dict) and v.get(SIG_KEY) == SECRET_SIG)


@contextmanager
def cli_config(config: Mapping[str, str]) -> Iterator[None]:
    """Hand a program its configuration as the CLI does: the PULUMI_CONFIG environment variable (a
    JSON map, read by the public `pulumi.runtime.get_config_env`), and nothing set in-process."""
    before = os.environ.get("PULUMI_CONFIG")
    os.environ["PULUMI_CONFIG"] = json.dumps(dict(config))
    _set_all_config({}, [])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PULUMI_CONFIG", None)
        else:
            os.environ["PULUMI_CONFIG"] = before


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each submitted call at once, on the calling thread. The SDK hands every monitor call to
    the event loop's default executor, as a gRPC call to the engine needs; the mock monitor answers
    in-process without blocking, and the thread hand-offs were about a third of a render's time.

    A call sees its own event loop, as it would on a pool thread: the mock monitor waits on coroutines
    of its own (`_sync_await`), which on the program's running loop would run other registrations
    inside this one, nesting deeper with each (a RecursionError at a few hundred resources)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self._loop = asyncio.new_event_loop()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        running = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(None)
        asyncio.set_event_loop(self._loop)
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 (handed to the awaiting coroutine, as a thread would)
            future.set_exception(e)
        finally:
            asyncio.set_event_loop(running)
            asyncio.events._set_running_loop(running)
        return future


_INLINE = _InlineExecutor()


def _no_stack_trace() -> Any:
    """Every registration walks the whole Python stack (with the test runner's frames, about 60) for
    the source position the engine shows in errors; the mock monitor drops it. An empty trace instead
    is a tenth of a render."""
    return _source_pb2.StackTrace()


_COLLAPSE_ALIAS_TO_URN = _sdk_resource.collapse_alias_to_urn


def _alias_kept_as_given(alias: Any, name: str, type_: str, parent: Any) -> Any:
    """Each resource collapses its aliases to URNs when it is constructed (chained Outputs; an
    azure-native type has over a hundred aliases: about a third of a render, measured). Only the SDK's
    path for an engine without alias specs (`all_aliases`) reads them; with alias specs each is sent as
    given."""
    return alias


def start(mocks: pulumi.runtime.Mocks, *, project: str, stack: str, monitor: Any) -> Any:
    """Set up a fresh root stack under `mocks` (as a new `pulumi up` would); returns the root."""
    _ensure_event_loop().set_default_executor(_INLINE)
    _resource._get_stack_trace = _no_stack_trace
    _settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
    # The monitor's features decide the SDK's path for every registration of this run.
    alias_specs = _settings.monitor_supports_feature(_resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS)
    _sdk_resource.collapse_alias_to_urn = _alias_kept_as_given if alias_specs else _COLLAPSE_ALIAS_TO_URN
    return _settings.ROOT.get()


def run(program: Callable[[], Any]) -> None:
    """Run `program` and wait until every resource registration and output it started is done. A run
    that fails (an error raised in an apply) leaves the registrations that waited on it pending: they
    are cancelled, or the next run in this process would run them and meet the old error."""
    try:
        _sync_await(_run_pulumi_func(program))
    except BaseException:
        # the SDK's futures that held the error are never awaited: the language host silences asyncio's
        # log of them (pulumi-language-python-exec, automation/_server.py _suppress_unobserved_task_logging)
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        loop = _ensure_event_loop()
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        with _settings.SETTINGS.lock:  # the SDK's set of pending outputs outlives a run's settings
            _settings.SETTINGS.outputs.clear()
        raise


def outputs(root: Any) -> dict[str, Any]:
    """The root stack's outputs as `pulumi.export` set them (Inputs, not yet resolved)."""
    return dict(root.outputs)


def resolve(value: Any) -> tuple[Any, bool]:
    """(the value, whether it is secret) of an exported Input, outside the program's event loop."""
    async def both() -> tuple[Any, bool]:
        out = pulumi.Output.from_input(value)
        return await out.future(with_unknowns=False), await out.is_secret()

    return _sync_await(both())


def sdk_plain(value: Any) -> Any:
    """Typed input classes -> plain dicts with the API's names, as the SDK itself translates them.
    The reference that `components.fabric.mpi_job.plain` (public surface only) is checked against."""
    if _types.is_input_type(type(value)):
        return {k: sdk_plain(v) for k, v in _types.input_type_to_dict(value).items()}
    if isinstance(value, dict):
        return {k: sdk_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sdk_plain(v) for v in value]
    return value
