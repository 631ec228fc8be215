"""The canary for Pulumi's internals: everything the offline engine uses that the SDK does not offer
publicly lives in offline/pulumi_adapter.py, and these tests exercise each piece against the installed
SDK. On a Pulumi upgrade they fail first and say what to re-check; the deployed program uses none."""

from __future__ import annotations

import ast
import unicodedata

import pulumi
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import resource_pb2

from components.fabric import mpi_job, nccl_job, p2p_job
from core import catalog, modes
from offline import engine
from offline import pulumi_adapter as sdk
from tests.paths import ROOT


def test_the_adapter_was_checked_against_the_installed_pulumi():
    assert sdk.INSTALLED_VERSION == sdk.PULUMI_VERSION, (
        f"pulumi {sdk.INSTALLED_VERSION} is installed; offline/pulumi_adapter.py was checked against "
        f"{sdk.PULUMI_VERSION}. Re-check each private use listed there (these tests exercise them), "
        f"then set PULUMI_VERSION."
    )


def test_the_secret_marker_of_the_wire_format():
    """A secret anywhere inside a top-level property marks that property: the SDK's deserialisation
    carries the marker up, level by level (the offline engine reads secret inputs from it)."""
    secret = {sdk.SIG_KEY: sdk.SECRET_SIG, "value": "x"}
    struct = struct_pb2.Struct()
    struct.update({"kubeconfig": secret, "name": "plain", "spec": {"users": [{"token": secret}], "n": 1}})
    assert sdk.secret_keys(sdk.deserialize(struct)) == ["kubeconfig", "spec"]
    assert sdk.deserialize(struct)["name"] == "plain"


class EchoMocks(pulumi.runtime.Mocks):
    """Every resource's outputs are its inputs; no calls."""

    def new_resource(self, args):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


def test_a_program_runs_to_completion_and_its_outputs_resolve():
    monitor = engine.RecordingMonitor(EchoMocks())
    root = sdk.start(EchoMocks(), project="canary", stack="t", monitor=monitor)

    def program():
        res = pulumi.CustomResource("test:index:Thing", "thing", {"size": 3})
        pulumi.export("size", res.id.apply(lambda _: 3))
        pulumi.export("token", pulumi.Output.secret("s3cret"))

    sdk.run(program)
    outputs = sdk.outputs(root)
    assert sdk.resolve(outputs["size"]) == (3, False)
    assert sdk.resolve(outputs["token"]) == ("s3cret", True)
    (thing,) = monitor.registrations
    assert (thing.type, thing.name, thing.inputs) == ("test:index:Thing", "thing", {"size": 3})


def test_the_program_reads_its_config_the_way_the_cli_hands_it():
    with sdk.cli_config({"aks-infiniband:rdmaMode": "sriov"}):
        assert pulumi.runtime.get_config_env()["aks-infiniband:rdmaMode"] == "sriov"
        assert pulumi.runtime.get_config("aks-infiniband:rdmaMode") == "sriov"
    assert pulumi.runtime.get_config("aks-infiniband:rdmaMode") is None


@pytest.mark.parametrize("size", ["Standard_ND96isr_H100_v5", "Standard_HB176rs_v4"])
def test_the_jobs_plain_specs_match_the_sdks_own_translation(size, monkeypatch):
    """components.fabric.mpi_job.plain (public surface only) gives what Pulumi itself would register."""
    sku = catalog.lookup(size)
    image = "example.invalid/img:1.0"
    if sku.has_gpus:
        args = nccl_job.NcclJobArgs(sku=sku, node_count=2, rdma_mode=modes.SRIOV, image=image,
                                    all_reduce_args="-b 8 -e 1G", timeout_minutes=30)
        build = nccl_job.job_spec
        configmaps = {"topology": "t"}
    else:
        args = p2p_job.P2pJobArgs(sku=sku, rdma_mode=modes.SRIOV, image=image, timeout_minutes=30)
        build = p2p_job.job_spec
        configmaps = {p2p_job.OSU_BUILD_CONTAINER: "o"}
    ours = build(args, "launcher", configmaps, "hash")
    monkeypatch.setattr(mpi_job, "plain", sdk.sdk_plain)
    assert ours == build(args, "launcher", configmaps, "hash")


def test_a_program_of_many_independent_resources_runs_without_nesting_them():
    """The mock monitor's own waits must not run other registrations inside it (on the program's loop
    they did, one level deeper for each: a RecursionError from about 120 resources)."""
    monitor = engine.RecordingMonitor(EchoMocks())
    sdk.start(EchoMocks(), project="canary", stack="t", monitor=monitor)
    sdk.run(lambda: [pulumi.CustomResource("test:index:Thing", f"thing-{i}", {"i": i}) for i in range(300)])
    assert sorted(r.inputs["i"] for r in monitor.registrations) == list(range(300))


class NoAliasSpecsMonitor(engine.RecordingMonitor):
    """An engine without alias specs: the SDK then sends each alias as a URN it collapsed itself."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.alias_urns: dict[str, list[str]] = {}

    def GetDeploymentInfo(self, request):  # noqa: N802 (gRPC method name)
        info = super().GetDeploymentInfo(request)
        features = [f for f in info.supportedFeatures if f != resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        self.alias_urns[request.name] = sorted(request.aliasURNs)
        return super().RegisterResource(request)


def renamed_group_and_child() -> None:
    group = pulumi.ComponentResource("test:index:Group", "group", None,
                                     pulumi.ResourceOptions(aliases=[pulumi.Alias(name="old-group")]))
    pulumi.CustomResource("test:index:Thing", "thing", {}, pulumi.ResourceOptions(
        parent=group, aliases=[pulumi.Alias(type_="test:index:OldThing")]))
    group.register_outputs({})


def test_aliases_reach_an_engine_that_takes_alias_specs_as_given():
    """The adapter skips the SDK's collapse of each alias to a URN at construction: with alias specs
    (the mock monitor's, as the engine's) nothing reads those URNs, and each alias is sent as given."""
    monitor = engine.RecordingMonitor(EchoMocks())
    sdk.start(EchoMocks(), project="canary", stack="t", monitor=monitor)
    sdk.run(renamed_group_and_child)
    assert {r.name: r.aliases for r in monitor.registrations} == {
        "group": [{"name": "old-group"}], "thing": [{"type": "test:index:OldThing"}]}


def test_an_engine_without_alias_specs_still_gets_every_alias_as_a_urn():
    """Without alias specs the SDK's own collapse stays: the child answers to its old type and to its
    place under the parent's old name."""
    monitor = NoAliasSpecsMonitor(EchoMocks())
    sdk.start(EchoMocks(), project="canary", stack="t", monitor=monitor)
    sdk.run(renamed_group_and_child)
    del monitor.alias_urns["canary-t"]  # the root stack
    assert monitor.alias_urns == {  # as the SDK collapses them, the root stack's type in one included
        "group": ["urn:pulumi:t::canary::test:index:Group::old-group"],
        "thing": ["urn:pulumi:t::canary::pulumi:pulumi:Stack$test:index:Group$test:index:OldThing::thing",
                  "urn:pulumi:t::canary::test:index:Group$test:index:OldThing::thing",
                  "urn:pulumi:t::canary::test:index:Group$test:index:Thing::thing"]}


def test_the_deployed_program_uses_no_pulumi_internals():
    """Nothing outside offline/ and tests/ imports pulumi._anything or the adapter."""
    offenders = []
    # (the top-level folders left out are not listed at all: .venv alone holds tens of thousands of files)
    skipped = {"offline", "tests", ".venv", ".venv-scan", "build", "tools", ".git", ".cache"}
    top = [p for p in ROOT.iterdir() if p.name not in skipped]
    paths = [p for p in top if p.suffix == ".py"] + [f for d in top if d.is_dir() for f in d.rglob("*.py")]
    assert ROOT / "__main__.py" in paths and ROOT / "clusterside" / "collect.py" in paths  # the walk sees the program
    for path in paths:
        rel = path.relative_to(ROOT)
        text = path.read_text()
        # Each name below holds "pulumi" (as Python reads identifiers: NFKC), so a module without it
        # imports none of them; most of verify/ and core/ need no parse.
        if "pulumi" not in unicodedata.normalize("NFKC", text):
            continue
        for node in ast.walk(ast.parse(text)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{rel}: {n}" for n in names
                          if n.startswith("pulumi._") or ".pulumi_adapter" in n or n.startswith("pulumi.runtime.")]
    assert offenders == []


def test_the_offline_engine_reaches_pulumi_internals_only_through_the_adapter():
    offenders = []
    for path in (ROOT / "offline").glob("*.py"):
        if path.name == "pulumi_adapter.py":
            continue
        text = path.read_text()
        offenders += [f"{path.name}: {m}" for m in ("pulumi._", "pulumi.runtime.rpc", "pulumi.runtime.settings",
                                                    "sync_await", "run_pulumi_func", "_special_") if m in text]
    assert offenders == []
