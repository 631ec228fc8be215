"""Validation is complete: every value either builds the whole stack or stops it with one error
before any resource exists.

The walk: every declared key, every field of the object keys and `azure-native:location`, each with
wrong and near-miss values derived from a good one - type errors, a `v` added or dropped, suffixes,
whitespace, empty, huge, non-ASCII, boundaries. Each value goes through `stack_config.parse` as the
CLI hands it to the program (test_bad_input.py shows that a ConfigError there stops the real program
before its first resource). A refused value must give exactly one problem line, naming the key.

Every accepted value must then build the stack: the real program runs under the mock engine. To keep
this fast, accepted values are deduplicated by the configuration they parse to, and values of
different keys share a render (the i-th accepted value of every key in render i, or in the first later
one it goes with, checked with parse first); a failing shared render is retried one value at a time
to name the culprit. Values of a key that the program receives alike (see _kind) are rendered once.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

import stack_config
from offline import engine
from offline.mocks import OfflineMocks
from stack_config import Key

P = stack_config.PROJECT
LOCATION = stack_config.LOCATION_KEY
SUBSCRIPTION = "/subscriptions/00000000-0000-0000-0000-000000000000"
VNET = f"{SUBSCRIPTION}/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/spoke"
IDENTITIES = f"{SUBSCRIPTION}/resourceGroups/id/providers/Microsoft.ManagedIdentity/userAssignedIdentities"
# Good values for keys whose default is derived (no literal default in the schema).
GOOD = {
    "resourceGroupName": "aks-infiniband-dev",
    "clusterName": "aks-ib-dev",
    "fabricTest.allReduceArgs": "-b 8 -e 16G -f 2 -g 1",
    "fabricTest.thresholdGbps": 360,
    "fabricTest.p2pThresholdGbits": 390,
    # the platform-team options (core/enterprise.py), unset by default
    "ibPool.minNodeCount": 1,
    "apiServer.privateDnsZone": "system",
    "apiServer.subnetId": f"{VNET}/subnets/apiserver",
    "identity.controlPlaneIdentityId": f"{IDENTITIES}/cp",
    "identity.kubeletIdentityId": f"{IDENTITIES}/kubelet",
    "network.systemSubnetId": f"{VNET}/subnets/system",
    "network.ibSubnetId": f"{VNET}/subnets/ib",
    "network.dataplane": "cilium",
    "network.podCidr": "192.168.0.0/16",
    "network.serviceCidr": "10.100.0.0/16",
    "network.dnsServiceIp": "10.0.0.10",
    "network.outboundType": "managedNATGateway",
    "azureStack": "platform-team/aks-infiniband/private-azure",
    "certifier.pushgatewayUrl": "http://pushgateway.monitoring:9091",
    "entraId.deployerPrincipalType": "User",
    # a cluster that already exists, local charts (stack_config/existing.py): files and folders that are there
    "existingCluster.kubeconfig": "Pulumi.yaml",
    "existingCluster.context": "team-a",
    "charts.directory": "tests/data/chart-archives/other-version",
}
# Good lists for the array fields: their near misses are built from these.
GOOD_LISTS = {
    "apiServer.authorizedIpRanges": ["203.0.113.0/24"],
    "entraId.adminGroupObjectIds": ["11111111-1111-1111-1111-111111111111"],
    "existingCluster.preinstalled": ["volcano"],
}
HUGE = "x" * 5000
BOUNDARIES = (-1, 0, 1, 2, 4, 5, 9, 10, 11, 99, 100, 101, 119, 120, 121, 127, 128, 129, 255, 256, 719, 720, 721,
              1599, 1600, 1601, 2047, 2048, 2049, 3199, 3200, 3201, 2**31, 10**18)


def _string_near_misses(s: str) -> list[Any]:
    out: list[Any] = [
        s, "", " ", f" {s}", f"{s} ", f"{s}\n", s.upper(), s.lower(), s.capitalize(), f"v{s}", f"V{s}",
        f"{s}-rc.1", f"{s}.0", f"{s}.", f"{s}x", f"{s}_", f"{s}/", f"{s}:latest", s[:-1], s[1:], s * 40, HUGE,
        f"{s}é", f"é{s}", s.replace("a", "а", 1),  # Cyrillic a
        s.replace("1", "١", 1), "latest", "master", "null", "None", "true", 1, 0, 1.5, True, [s], {"x": s},
        1.3, 26.7,  # what YAML makes of an unquoted 1.30 or 26.70
    ]
    if s.startswith("v"):
        out.append(s[1:])
    if "." in s:
        out += [s.rsplit(".", 1)[0], s.replace(".", ",")]
    return out


def _integer_near_misses(n: int) -> list[Any]:
    return [n, *BOUNDARIES, str(n), f" {n} ", f"{n}.0", float(n), n + 0.5, f"{n}x", f"{n} GB", "two", "", "١", "1e3",
            "0x10", True, False, None, [n], {"n": n}, -n, n * 1000]


def _boolean_near_misses(b: bool) -> list[Any]:
    return [b, not b, "true", "false", "True", "FALSE", "yes", "no", "on", "1", "0", 1, 0, "", "tru", None, [b]]


def _object_near_misses() -> list[Any]:
    return ["x", "", "{}", "[]", "null", 1, True, [], {"unknownKey": 1}, {"": 1}]


def _array_near_misses(good: list[str]) -> list[Any]:
    item = good[0]
    return [[], good, good * 2, good * 300, [item.upper()], [f" {item}"], [item[:-1]], [f"{item}x"], [""], [1], [None],
            [good], item, "", "[]", json.dumps(good), 1, True, {"a": item}, None]


def _tags_near_misses() -> list[Any]:
    return [{}, {"a": "b"}, {"a": 1}, {"a": True}, {"": "x"}, {"a/b": "x"}, {"a?": "x"}, {"é": "ü"},
            {"a": "x" * 256}, {"a": "x" * 257}, {"k" * 512: "v"}, {"k" * 513: "v"},
            {f"k{i}": "v" for i in range(50)}, {f"k{i}": "v" for i in range(51)}, "owner=me", ["a"], {"a": None}]


def _leaves() -> Iterator[tuple[str, Key | None]]:
    for key in stack_config.SCHEMA:
        yield key.name, key
        for f in key.fields:
            yield f"{key.name}.{f.name}", f


def _good(path: str, key: Key, base: dict[str, Any]) -> Any:
    top, _, field = path.partition(".")
    current = base.get(f"{P}:{top}")
    if field and isinstance(current, dict) and field in current:
        return current[field]
    if not field and current is not None and not key.fields:
        return current
    return GOOD.get(path, key.default)


def cases(base: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(key path, value) for every leaf and object key, with the location."""
    for path, key in _leaves():
        if key.fields:
            values = _object_near_misses()
        elif key.type == "object":
            values = _tags_near_misses()
        elif key.type == "array":
            values = _array_near_misses(GOOD_LISTS[path])
        elif key.type == "string":
            values = _string_near_misses(_good(path, key, base))
        elif key.type == "integer":
            values = _integer_near_misses(_good(path, key, base))
        else:
            values = _boolean_near_misses(_good(path, key, base))
        for value in values:
            yield path, value
        if key.fields or key.required:
            yield path, None  # removed
    for value in _string_near_misses(base[LOCATION]) + ["East US", "eastus2", "westeurope", "eastuss", "mars"]:
        yield LOCATION, value


def with_value(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """The stack's config with `path` set to `value` (None removes it)."""
    cfg = copy.deepcopy(base)
    if path == LOCATION:
        full, field = LOCATION, ""
    else:
        top, _, field = path.partition(".")
        full = f"{P}:{top}"
    if not field:
        if value is None:
            cfg.pop(full, None)
        else:
            cfg[full] = value
        return cfg
    obj = cfg.get(full)
    obj = dict(obj) if isinstance(obj, dict) else {}
    if value is None:
        obj.pop(field, None)
    else:
        obj[field] = value
    cfg[full] = obj
    return cfg


_DEFAULTS = engine.project_defaults()


def _cli(cfg: dict[str, Any]) -> dict[str, str]:
    """What the program receives: the stack file over Pulumi.yaml's defaults, as CLI strings."""
    return engine.as_cli_config({**_DEFAULTS, **cfg})


def _kind(value: Any) -> Any:
    """Accepted values of one key that the program is expected to treat alike share a kind; one of
    each kind is rendered. Strings by their shape (padding, ASCII, case, length), integers by being
    the smallest or largest accepted, maps by emptiness, size and characters. The program passes
    these values on unchanged, so one of a kind stands for the others. `value` is the value as the
    program receives it (see _received)."""
    if isinstance(value, str):
        return ("str", value == value.strip(), value.isascii(), value != value.lower(), len(value) > 64)
    if isinstance(value, dict):
        text = json.dumps(value)
        return ("map", len(value) == 0, len(value) > 10, text.isascii(), len(text) > 300)
    return (type(value).__name__, repr(value)) if not isinstance(value, int) or isinstance(value, bool) else "int"


def _received(path: str, value: Any) -> Any:
    """`value` of `path` as the program receives it: the CLI hands every top-level value over as a
    string (engine.as_cli_config), so a YAML number given for a top-level string key (resourceGroupName:
    26.7) reaches the program as the text "26.7", a string like any other; a field keeps its type in
    its object's JSON, and the other keys' values are read back to their type."""
    key = None if "." in path or path == LOCATION else stack_config.SCHEMA_BY_NAME[path]
    if path == LOCATION or (key is not None and key.type == "string"):
        return engine.as_cli_config({"x:y": value})["x:y"]
    return value


def _parse(cfg: dict[str, Any], stack: str) -> stack_config.StackConfig:
    return stack_config.parse(_cli(cfg), stack)


def _render(stack: str, cfg: dict[str, Any]) -> engine.Rendering:
    return engine.render(stack, config=cfg, monitor=engine.RecordingMonitor(OfflineMocks()))


def _refused_properly(path: str, value: Any, problems: list[str]) -> str | None:
    """None when the refusal names the key on one line (an object key: one line per field at fault,
    e.g. both required fields of ibPool when it is replaced by {}), else what is wrong with it."""
    key = LOCATION if path == LOCATION else f"{P}:{path}"
    if not problems or (len(problems) > 1 and ("." in path or path == LOCATION)):
        return f"{path} = {value!r}: expected one problem, got {problems}"
    strays = [p for p in problems if not (p.startswith(key + ":") or p.startswith(key + "."))]
    if strays:
        return f"{path} = {value!r}: a problem does not name {key}: {strays}"
    # ... and shows what it got (or says the key is missing or unknown), so the user sees the value YAML read
    unshown = [p for p in problems if not any(x in p for x in (*_shown(value), "is required", "unknown key"))]
    if unshown and not isinstance(value, (dict, list)):
        return f"{path} = {value!r}: a problem does not show the value: {unshown}"
    return None


def _shown(value: Any) -> tuple[str, ...]:
    """The forms a problem line may show a value in: as given, or as it was read (360.0 as 360, 'True' as
    true), through stack_config's own form (a long one cut to its start and its length)."""
    from stack_config.engine import shown

    if isinstance(value, str):
        return (value.strip() or repr(value), value.strip().lower(), shown(value))
    if isinstance(value, float) and value.is_integer():
        return (shown(value), str(int(value)))
    return (shown(value),)


@pytest.mark.parametrize("stack", ["dev", "hb"])
def test_every_value_builds_the_stack_or_stops_it_with_one_error(stack, volcano_manifest):
    base = engine.stack_file_config(stack)
    _parse(base, stack)  # control: the stack file itself is good
    wrong: list[str] = []
    accepted: dict[str, dict[str, tuple[Any, dict[str, Any]]]] = {}  # path -> parsed config -> (value, cfg)
    refused = 0
    first_refused: dict[str, dict[str, Any]] = {}  # path -> the first configuration refused for it
    for path, value in cases(base):
        cfg = with_value(base, path, value)
        try:
            parsed = _parse(cfg, stack)
        except stack_config.ConfigError as err:
            refused += 1
            problem = _refused_properly(path, value, err.problems)
            if problem:
                wrong.append(problem)
            first_refused.setdefault(path, cfg)
            continue
        except Exception as err:  # noqa: BLE001 - anything but a ConfigError is a traceback for the user
            wrong.append(f"{path} = {value!r}: {type(err).__name__} instead of a ConfigError: {err}")
            continue
        accepted.setdefault(path, {}).setdefault(repr(parsed), (value, cfg))

    # One accepted value of each kind (see _kind), and the smallest and largest accepted integer.
    distinct: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    for path, by_config in accepted.items():
        values = list(by_config.values())
        ints = sorted((v for v in values if _kind(_received(path, v[0])) == "int"), key=lambda v: int(v[0]))
        kinds = {_kind(_received(path, v)): (v, c) for v, c in reversed(values) if _kind(_received(path, v)) != "int"}
        distinct[path] = [*kinds.values(), *({id(x): x for x in ints[:1] + ints[-1:]}.values())]
    assert not wrong, "\n".join(wrong)
    assert refused > 500, "the walk refused suspiciously few values"
    # Refused means refused by the real program before its first resource: one refusal per key is run.
    for path, cfg in sorted(first_refused.items()):
        monitor = engine.RecordingMonitor(OfflineMocks())
        with pytest.raises(pulumi.RunError):
            engine.render(stack, config=cfg, monitor=monitor)
        assert monitor.registrations == [], f"{path}: resources were declared before the refusal"

    # Render i holds the i-th distinct accepted value of every key; a value that does not go with one
    # already merged there (a private API server beside authorized ranges) goes to the first later render
    # that takes it, and is rendered alone only when none does.
    rounds = max(len(v) for v in distinct.values())
    merged = [copy.deepcopy(base) for _ in range(rounds)]
    kept: list[list[tuple[str, tuple[Any, dict[str, Any]]]]] = [[] for _ in range(rounds)]
    alone: list[tuple[str, dict[str, Any], list[tuple[str, tuple[Any, dict[str, Any]]]]]] = []
    for path, values in sorted(distinct.items()):
        for i, (value, cfg) in enumerate(values):
            for r in range(i, rounds):
                if any(p == path for p, _ in kept[r]):
                    continue  # one value per key and render
                trial = with_value(merged[r], path, value)
                try:
                    _parse(trial, stack)
                except stack_config.ConfigError:  # fine alone but not with a value already merged
                    continue
                merged[r] = trial
                kept[r].append((path, (value, cfg)))
                break
            else:
                alone.append((f"{path} = {value!r}", cfg, [(path, (value, cfg))]))
    groups = [(f"render {r}: {', '.join(f'{p}={json.dumps(v)[:40]}' for p, (v, _) in kept[r])}", merged[r], kept[r])
              for r in range(rounds)] + alone
    renders = 0
    for what, cfg, holds in groups:
        renders += 1
        try:
            rendering = _render(stack, cfg)
        except Exception as err:  # noqa: BLE001
            culprits = [f"{p} = {v!r}: {type(e).__name__}: {e}" for p, (v, c) in holds
                        for e in [_render_error(stack, c)] if e is not None]
            pytest.fail(f"{what} was accepted but did not build: {type(err).__name__}: {err}\n"
                        + "\n".join(culprits))
        assert rendering.outputs.get("clusterName") and rendering.outputs.get("fabricVerdict"), what
    assert sum(len(k) for k in kept) + len(alone) == sum(len(v) for v in distinct.values())  # each value once
    assert renders <= rounds + 12, f"{renders} renders: the batching no longer keeps this test fast"


def _render_error(stack: str, cfg: dict[str, Any]) -> Exception | None:
    try:
        _render(stack, cfg)
    except Exception as err:  # noqa: BLE001
        return err
    return None


def test_the_walk_covers_every_declared_key_and_field():
    walked = {path for path, _ in cases(engine.stack_file_config("dev"))}
    declared = {path for path, _ in _leaves()} | {LOCATION}
    assert walked == declared


def test_the_walk_would_catch_a_value_that_passes_validation_and_fails_later():
    """The bug the walk exists for: a check looser than the component (the old Volcano check, which
    took 1.15.1 and let VolcanoArgs raise after resources were declared)."""
    from core import pins

    loose = pins.Pin("loose", "anything", lambda v: True)
    versions = stack_config.SCHEMA_BY_NAME["versions"]
    volcano = next(f for f in versions.fields if f.name == "volcano")
    object.__setattr__(volcano, "check", loose.problem)  # Key is frozen
    try:
        # (with its manifest's sha256 and the override, so the compatibility matrix lets it through too)
        cfg = with_value(engine.stack_file_config("dev"), "versions.volcano", "1.14.0@sha256:" + "0" * 64)
        cfg = with_value(cfg, "allowUntestedVersions", True)
        _parse(cfg, "dev")  # now accepted ...
        assert isinstance(_render_error("dev", cfg), ValueError)  # ... and the render says it did not build
    finally:
        object.__setattr__(volcano, "check", stack_config.VERSION_PINS["volcano"].problem)
