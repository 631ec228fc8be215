"""Shared test setup. The mocks are set in one place, `offline.engine.render`, which every test
uses to run the real program; this file gives it to tests as fixtures."""

from __future__ import annotations

import atexit
import copy
import gc
import hashlib
import json
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offline import reference as reference_material

if TYPE_CHECKING:
    from offline import charts, engine

# The program's modules (offline.engine: Pulumi and the stack's components) are imported where a fixture or
# helper needs them, not here: under xdist the controller loads this file too, runs no test, and starts
# its workers only afterwards (their import would delay every worker's start by ~0.4 s).

# pytest imports this file as `conftest` (tests/ on the path). Under another name (tests.conftest) it would
# be a second copy with session state of its own: no render store, and the schema check below wrapped
# twice around every result.
if __name__ != "conftest":
    raise ImportError(f"tests/conftest.py imported as {__name__!r}: import it as `conftest`, the name pytest gives it")

REFERENCE = reference_material.reference_dir()

# The suite keeps many objects alive (the provider SDKs' type tables, the test modules, renders), and
# with Python's default thresholds (700, 10, 10) the collector's passes over them took about a fifth of
# its CPU time (measured with gc.callbacks: 11 s of 48). Collecting less often costs some memory only.
gc.set_threshold(10_000, 50, 1_000)


def _results_held_to_the_schema() -> None:
    """Every fabric result any test writes (verify/result.py's to_json: every --json output) is
    validated against the shipped schema file, so no writer can drift from what users code against."""
    import jsonschema

    from verify import result

    validator = jsonschema.Draft202012Validator(json.loads(result.SCHEMA_PATH.read_text()))
    to_json = result.FabricResult.to_json

    def validated(self: result.FabricResult) -> dict[str, Any]:
        doc = to_json(self)
        validator.validate(doc)
        return doc

    validated.__wrapped__ = to_json  # type: ignore[attr-defined]  # for a test that checks against another schema
    result.FabricResult.to_json = validated  # type: ignore[method-assign]


def dev_config(**overrides: Any) -> dict[str, Any]:
    """The dev stack's config with top-level keys replaced and object keys merged, e.g.
    dev_config(rdmaMode="sriov", ibPool={"vmSize": "Standard_ND96asr_v4"})."""
    from offline import engine

    cfg = copy.deepcopy(engine.stack_file_config("dev"))
    for key, value in overrides.items():
        full = key if ":" in key else f"{engine.PROJECT}:{key}"
        if isinstance(value, dict) and isinstance(cfg.get(full), dict):
            cfg[full] = {**cfg[full], **value}
        elif value is None:
            cfg.pop(full, None)
        else:
            cfg[full] = value
    return cfg


# The halves of a stack (`stackPart`, docs/enterprise-deployment.md), as a test may render them: each
# half is declared by the same function as in the whole stack (stack/azure.py, stack/kubernetes.py;
# tests/stack/test_stack_parts.py holds them equal), at a third to a half of a whole render's cost.
PARTS: dict[str, dict[str, Any]] = {
    "all": {},
    "azure": {"stackPart": "azure"},
    "kubernetes": {"stackPart": "kubernetes", "azureStack": "offline/aks-infiniband/azure-half"},
}

# Each rendering is a pickle: one render per distinct (stack, configuration) per session, shared by
# the session's xdist workers through files in their common temporary directory.
_RENDERED: dict[str, bytes] = {}
_STORE: Path | None = None
# engine.render as the session found it: a test may patch engine.render with one that calls rendered()
# (tests/stack/test_synth.py, tests/stack/test_enterprise.py), and a render not yet stored must still be the real one.
_RENDER: Callable[..., engine.Rendering] | None = None


@pytest.fixture(scope="session", autouse=True)
def _render_store(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where this session's renders are kept: the workers' common directory under xdist (pytest makes
    a new one per session), the session's own otherwise."""
    global _STORE, _RENDER
    from offline import engine

    _RENDER = engine.render
    base = tmp_path_factory.getbasetemp()
    _STORE = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "renders"
    _STORE.mkdir(exist_ok=True)


def with_part(config: dict[str, Any], part: str) -> dict[str, Any]:
    """`config` with the keys that render only one half of its stack ("azure", "kubernetes"; "all": as is)."""
    from offline import engine

    return {**config, **{f"{engine.PROJECT}:{k}": v for k, v in PARTS[part].items()}}


def rendered(stack: str = "dev", config: dict[str, Any] | None = None, part: str = "all") -> engine.Rendering:
    """engine.render(stack, config), memoised for the session: the first call with a configuration
    renders it, every call returns its own copy, so what one test changes in it no other test sees.
    `part` renders one half only (PARTS). A test whose point is that the program runs again
    (idempotency, logs, patched mocks) must call engine.render itself."""
    from offline import engine

    config = with_part(engine.stack_file_config(stack) if config is None else config, part)
    key = json.dumps([stack, config], sort_keys=True)
    if key not in _RENDERED:
        _RENDERED[key] = _stored(stack, config, key)
    return pickle.loads(_RENDERED[key])


def _stored(stack: str, config: dict[str, Any], key: str) -> bytes:
    """The pickled rendering from the session's store, rendered and stored first if no worker has yet."""
    from offline import engine

    path = _STORE / f"{hashlib.sha256(key.encode()).hexdigest()}.pickle" if _STORE else None
    if path and path.exists():
        return path.read_bytes()
    try:
        data = pickle.dumps((_RENDER or engine.render)(stack, config=config))
    except engine.ReferenceMissing as e:  # a Skipped, not a RunError: code under test that reports those lets it by
        pytest.skip(str(e))
    if path:
        partial = path.with_suffix(f".{os.getpid()}")
        partial.write_bytes(data)
        partial.replace(path)  # atomic: another worker reads the whole file or none
    return data


def _shared(stack: str) -> Iterator[engine.Rendering]:
    """One rendering of `stack` for the whole session; fails at the end if a test changed it."""
    rendering = rendered(stack)
    yield rendering
    assert rendering == rendered(stack), f"a test changed the shared {stack} rendering: copy it before changing it"


@pytest.fixture(scope="session")
def dev() -> Iterator[engine.Rendering]:
    """The dev stack, rendered once per session (tests must not mutate it)."""
    yield from _shared("dev")


@pytest.fixture(scope="session")
def hb() -> Iterator[engine.Rendering]:
    """The hb stack (CPU-only HB/HX: the point-to-point job), rendered once per session (tests must not
    mutate it)."""
    yield from _shared("hb")


@pytest.fixture
def render() -> Callable[..., engine.Rendering]:
    """render(**overrides): the dev stack with config overrides (see dev_config), memoised (see rendered)."""
    return lambda **overrides: rendered("dev", dev_config(**overrides))


def dev_kubernetes_half(**overrides: Any) -> engine.Rendering:
    """The Kubernetes half of the dev stack with config overrides (dev_config), for a test of what that
    half declares (operators, Volcano, the fabric test, the certifier)."""
    return rendered("dev", dev_config(**overrides), part="kubernetes")


@pytest.fixture
def render_kubernetes() -> Callable[..., engine.Rendering]:
    """render_kubernetes(**overrides): dev_kubernetes_half as a fixture."""
    return dev_kubernetes_half


@pytest.fixture
def render_azure() -> Callable[..., engine.Rendering]:
    """render_azure(**overrides): the Azure half of the dev stack with config overrides, for a test of
    what that half declares (feature registration, cluster, pools)."""
    return lambda **overrides: rendered("dev", dev_config(**overrides), part="azure")


@pytest.fixture(scope="session")
def reference() -> Path:
    """The upstream schemas and outputs (offline/reference.py says where they are looked for); skips,
    saying why and how to get them, when this checkout has none or an incomplete copy."""
    why = reference_material.unavailable_reason(REFERENCE)
    if why:
        pytest.skip(why)
    return REFERENCE


@pytest.fixture(scope="session")
def volcano_manifest() -> Path:
    """Volcano's pinned release manifest in the reference material, which every render of a Kubernetes half
    applies; skips, saying how to get it, where it is absent. Only for a test whose render's error is caught
    before pytest sees it (the synth CLI prints it, a walk over configurations collects it): any other render
    without it skips by itself (engine.ReferenceMissing, _reference_missing_skips)."""
    from components.platform import volcano
    from core import pins

    path = volcano.cached_path(pins.component("volcano").version, REFERENCE / "examples")
    if not path.is_file():
        pytest.skip(f"Volcano's release manifest not found at {path}: {reference_material.HOW_TO_GET}")
    return path


def _reference_missing_skips() -> Iterator[None]:
    """A test, or a fixture it uses, whose render stopped because the reference material lacks Volcano's
    manifest (offline.engine.ReferenceMissing) is skipped with the render's one-line reason."""
    try:
        return (yield)
    except Exception as e:
        engine = sys.modules.get("offline.engine")
        if engine is not None and isinstance(e, engine.ReferenceMissing):
            pytest.skip(str(e))
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _reference_missing_skips())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _reference_missing_skips())


@pytest.fixture
def azure_log(reference: Path) -> str:
    """Azure's published 2-node ND A100 v4 all-reduce log: the launcher log of the collector's tests
    (tests/unit/clusterside/test_verify_collect*.py)."""
    return (reference / "nccl-tests" / "sample-output_azure-aks-rdma-infiniband_expected-output.txt").read_text()


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned Helm (`make helm`); skips, saying why, where it is missing (CI must have it)."""
    from offline import charts

    try:
        return charts.find_helm()
    except charts.Unavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"{e} - CI must render the charts")
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def dev_charts(dev: engine.Rendering, helm: Path) -> dict[str, charts.RenderedRelease]:
    """The dev stack's Helm releases rendered once per session by the pinned Helm (`helm template` of
    the chart archives; see offline/charts.py), by release name. Skips where the archives are absent."""
    from offline import charts

    archives = charts.charts_dir()
    if not archives.is_dir():
        pytest.skip(f"chart archives not found at {archives} (the reference material's charts/: `make reference`, "
                    "or AKS_IB_CHARTS)")
    return {r.release.name: r for r in charts.render_all(dev, helm=helm, archives=archives)}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where tests run (an xdist worker, or the one process): the schema check goes in before the first
    test; what collection made (the SDKs' type tables, every test module) lives to the end, so it is
    frozen out of the collector's way and its passes walk only what the tests make."""
    _results_held_to_the_schema()
    gc.freeze()


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker skips the interpreter's teardown when it exits. Its results reached the controller
    at the end of its session, and the teardown of all it imported and made took ~0.8 s while the
    controller waited for it after the last test. Registered now, the exit runs after the exit handlers
    registered later (weakref finalizers, matplotlib's, multiprocessing's); it skips the two registered
    before: logging's shutdown, and execnet's cleanup of the gateways a worker never opens."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        atexit.register(_exit_without_teardown)


def _exit_without_teardown() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
