"""The policy pack's rules (policy/rules.py), called the way CrossGuard calls them: with arguments
built from the real offline render - the inputs passed through pulumi_policy's own deserializer and
read-only proxies - and a `report_violation` that records. The dev render (and other shapes of the
stack) must pass every rule; copies of its inputs, each broken in one way, must be reported.
No PolicyPack is constructed here."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

import stack_config
from components.platform import volcano
from core import catalog, fabric, pins
from offline import engine
from policy import rules
from tests.paths import ROOT

POLICY_DIR = ROOT / "policy"


@dataclass
class FakeArgs:
    """The fields of pulumi_policy.ResourceValidationArgs that the rules read."""

    resource_type: str
    name: str
    urn: str
    props: Any


DIGEST_RULE = "images-pinned-by-digest"

def as_args(resource: engine.Resource, inputs: dict[str, Any] | None = None) -> FakeArgs:
    """The arguments of one rule call. No copy of the inputs first: the deserializer builds its own dicts
    and lists all the way down (it shares only the immutable scalars), so no rule can reach the render's."""
    raw = resource.inputs if inputs is None else inputs
    props = unknown_checking_proxy(deserialize_properties(raw))
    return FakeArgs(resource_type=resource.type, name=resource.name, urn=resource.urn, props=props)


def violations(rule: rules.Validate, args: FakeArgs) -> list[str]:
    found: list[str] = []
    rule(args, lambda message, urn=None: found.append(message))
    return found


def all_violations(rendering: engine.Rendering, enforcement: str = rules.MANDATORY) -> list[str]:
    """The violations of the rules of one enforcement level, as the pack runs them (Rule.check)."""
    return [f"{p.name}: {m}" for r in rendering.resources for p in rules.POLICIES if p.enforcement == enforcement
            for m in violations(p.check, as_args(r))]


# --- the real stack passes -----------------------------------------------------------------------
def test_dev_render_passes_every_rule(dev):
    assert all_violations(dev) == []


def test_dev_render_is_advised_about_its_open_api_server_and_local_accounts(dev):
    """The dev stack keeps a public API server and local accounts (a laptop can run it): advice, not a failure."""
    access = [v.split(":")[0] for v in all_violations(dev, rules.ADVISORY) if not v.startswith(DIGEST_RULE)]
    assert access == ["api-server-restricted-advisory", "local-accounts-disabled-advisory"]


@pytest.mark.parametrize("overrides", [
    {"rdmaMode": "sriov"},
    {"ibPool": {"vmSize": "Standard_ND96asr_v4", "nodeCount": 4}},
    {"ibPool": {"vmSize": "Standard_HB120rs_v3"}},
    {"protect": True},
    {"rdmaMode": "dra"},
    {"ibPool": {"vmSize": "Standard_ND128isr_GB300_v6"}, "rdmaMode": "dra"},
], ids=["sriov", "a100-4-nodes", "hb-cpu-only", "protected", "h100-dra", "gb300-dra"])
def test_other_shapes_of_the_stack_pass(render_azure, render_kubernetes, overrides):
    """Each half of the shape, which together declare what its whole stack declares (tests/stack/test_stack_parts.py:
    the one resource only the whole stack has, the deployer's grant, comes with entraId, which none sets)."""
    assert all_violations(render_azure(**overrides)) == [] and all_violations(render_kubernetes(**overrides)) == []


def test_the_rules_see_what_they_guard(dev):
    """Guard against rules that pass because they never match: each kind of resource they check exists
    in the dev render under the type the rules expect."""
    types = {r.type for r in dev.resources}
    for t in (rules.AGENT_POOL, rules.MANAGED_CLUSTER, rules.NIC_CLUSTER_POLICY, rules.VOLCANO_JOB):
        assert t in types
    assert types & set(rules.HELM_RELEASES) and types & set(rules.CONFIG_GROUPS)
    job = dev.one(rules.VOLCANO_JOB)
    assert len(list(rules.job_containers(as_args(job).props))) >= 2


# --- each rule reports what it must --------------------------------------------------------------
def broken(resource: engine.Resource, change) -> FakeArgs:
    inputs = copy.deepcopy(resource.inputs)
    change(inputs)
    return as_args(resource, inputs)


def worker(inputs: dict[str, Any]) -> dict[str, Any]:
    """The container of the job task that requests GPUs."""
    for task in inputs["spec"]["tasks"]:
        for c in task["template"]["spec"]["containers"]:
            if fabric.GPU_RESOURCE in (c.get("resources") or {}).get("limits", {}):
                return c
    raise LookupError("no GPU container in the job")


def test_ib_size_in_catalog(dev):
    pool = dev.one(rules.AGENT_POOL)
    for size in ("Standard_NC24ads_A100_v4", "Standard_D8s_v5"):
        found = violations(rules.ib_size_in_catalog, broken(pool, lambda i, s=size: i.update(vmSize=s)))
        assert len(found) == 1 and size in found[0]
    # Azure treats sizes case-insensitively, and so does the catalog.
    lower = broken(pool, lambda i: i.update(vmSize=i["vmSize"].lower()))
    assert violations(rules.ib_size_in_catalog, lower) == []


@pytest.mark.parametrize("version", ["", "latest", "master", None])
def test_helm_chart_version_pinned(dev, version):
    release = dev.of_type(rules.HELM_RELEASES[0])[0]

    def change(i):
        if version is None:
            i.pop("version", None)
        else:
            i["version"] = version
    found = violations(rules.versions_pinned, broken(release, change))
    assert len(found) == 1 and "version" in found[0] and repr(version) in found[0]


def test_helm_values_image_tags_pinned(dev):
    release = dev.one(rules.HELM_RELEASES[0], "gpu-operator-release")
    found = violations(rules.versions_pinned, broken(
        release, lambda i: i["values"].setdefault("driver", {}).update(version="latest")))
    assert len(found) == 1 and "values.driver.version" in found[0]
    found = violations(rules.versions_pinned, broken(
        release, lambda i: i["values"].update(toolkit={"image": "nvcr.io/nvidia/k8s/container-toolkit:latest"})))
    assert len(found) == 1 and "values.toolkit.image" in found[0]


@pytest.mark.parametrize("version", ["latest", "", None])
def test_nic_cluster_policy_images_pinned(dev, version):
    policy = dev.one(rules.NIC_CLUSTER_POLICY)
    components = [k for k, v in policy.inputs["spec"].items() if isinstance(v, dict) and "image" in v]
    assert components, "the NicClusterPolicy has no image components"
    for comp in components:
        def change(i, comp=comp):
            if version is None:
                i["spec"][comp].pop("version")
            else:
                i["spec"][comp]["version"] = version
        found = violations(rules.versions_pinned, broken(policy, change))
        assert len(found) == 1 and f"spec.{comp}" in found[0]


@pytest.mark.parametrize("image", ["ghcr.io/coreweave/nccl-tests", "ghcr.io/coreweave/nccl-tests:latest",
                                   "registry.example:5000/nccl-tests", ""])
def test_job_images_pinned(dev, image):
    job = dev.one(rules.VOLCANO_JOB)
    found = violations(rules.versions_pinned, broken(job, lambda i: worker(i).update(image=image)))
    assert len(found) == 1 and repr(image) in found[0]


def test_job_image_by_digest_is_pinned(dev):
    job = dev.one(rules.VOLCANO_JOB)
    digest = "ghcr.io/coreweave/nccl-tests@sha256:" + "0" * 64
    assert violations(rules.versions_pinned, broken(job, lambda i: worker(i).update(image=digest))) == []


@pytest.mark.parametrize("ref", ["master", "main", "latest"])
def test_a_manifest_from_a_url_is_refused_and_a_branch_named_too(dev, ref):
    """The stack applies Volcano from checked content; a ConfigFile (or ConfigGroup `files`) of a URL
    is read at deploy time: refused, and a branch in it is named as well."""
    group = dev.one(rules.CONFIG_GROUPS[0], "volcano-manifest")
    assert violations(rules.versions_pinned, as_args(group)) == []
    tagged = volcano.manifest_url(pins.component("volcano").version)
    url = tagged.replace(f"/{pins.component('volcano').version}/", f"/{ref}/")
    as_file = dataclasses.replace(group, type=rules.MANIFEST_FILES[0], inputs={"file": tagged})
    (found,) = violations(rules.versions_pinned, as_args(as_file))
    assert "fetched at deploy time" in found and tagged in found
    found = violations(rules.versions_pinned, broken(group, lambda i: i.update(files=[url])))
    assert len(found) == 2 and all(url in f for f in found) and "does not name a release tag" in found[1]


def test_a_tag_only_image_is_flagged_advisory_and_a_digest_is_not(dev):
    """Advisory (it does not stop `pulumi up`) until the digests are filled (docs/upgrading-pins.md)."""
    (rule,) = [p for p in rules.POLICIES if p.name == "images-pinned-by-digest"]
    assert rule.enforcement == rules.ADVISORY
    found = [v for v in all_violations(dev, rules.ADVISORY) if v.startswith(DIGEST_RULE)]
    image = stack_config.DEFAULT_NCCL_TESTS_IMAGE
    flagged = {re.search(r"image '([^']+)' is pinned by tag only", f)[1] for f in found}
    # exactly the pin table's images that have no digest yet (the pause image has one)
    tag_only = {c.version for c in pins.COMPONENTS if c.pin is pins.IMAGE_REF and not pins.is_digest_pinned(c.version)}
    assert flagged == tag_only
    assert image in flagged and pins.component("pauseImage").version not in flagged
    job = dev.one(rules.VOLCANO_JOB)
    digest = image + "@sha256:" + "0" * 64
    pinned = broken(job, lambda i: [c.update(image=digest) for t in i["spec"]["tasks"]
                                    for c in t["template"]["spec"]["containers"]])
    assert violations(rule.validate, pinned) == []


def test_no_public_ip_on_the_ib_pool(dev):
    pool = dev.one(rules.AGENT_POOL)
    found = violations(rules.no_public_node_ips, broken(pool, lambda i: i.update(enableNodePublicIP=True)))
    assert len(found) == 1 and "enableNodePublicIP" in found[0]


def test_no_public_ip_on_the_system_pool(dev):
    cluster = dev.one(rules.MANAGED_CLUSTER)
    found = violations(rules.no_public_node_ips, broken(
        cluster, lambda i: i["agentPoolProfiles"][0].update(enableNodePublicIP=True)))
    assert len(found) == 1 and "agentPoolProfiles[0]" in found[0]


def test_job_not_privileged(dev):
    job = dev.one(rules.VOLCANO_JOB)
    found = violations(rules.job_pods_unprivileged_with_rdma, broken(
        job, lambda i: worker(i).setdefault("securityContext", {}).update(privileged=True)))
    assert len(found) == 1 and "privileged" in found[0]


@pytest.mark.parametrize("cap", ["SYS_ADMIN", "ALL"])
def test_job_without_privileged_capabilities(dev, cap):
    job = dev.one(rules.VOLCANO_JOB)
    found = violations(rules.job_pods_unprivileged_with_rdma, broken(
        job, lambda i: worker(i).setdefault("securityContext", {}).setdefault("capabilities", {})
        .setdefault("add", []).append(cap)))
    assert len(found) == 1 and cap in found[0]


def test_job_ipc_lock_is_allowed(dev):
    """IPC_LOCK (RDMA memory registration) is what the job needs and must not be flagged."""
    job = dev.one(rules.VOLCANO_JOB)
    caps = worker(copy.deepcopy(job.inputs)).get("securityContext", {}).get("capabilities", {}).get("add", [])
    assert "IPC_LOCK" in caps
    assert violations(rules.job_pods_unprivileged_with_rdma, as_args(job)) == []


def test_gpu_containers_request_rdma(dev):
    job = dev.one(rules.VOLCANO_JOB)

    def drop_rdma(i):
        limits = worker(i)["resources"]["limits"]
        for k in [k for k in limits if k.startswith(fabric.RDMA_RESOURCE_PREFIX + "/")]:
            del limits[k]
    found = violations(rules.job_pods_unprivileged_with_rdma, broken(job, drop_rdma))
    # the GPU container without RDMA, and the job without any RDMA request
    assert len(found) == 2 and any(fabric.GPU_RESOURCE in m for m in found)


def test_a_dra_worker_counts_by_its_claim_and_not_without_it(render_kubernetes):
    job = render_kubernetes(rdmaMode="dra").one(rules.VOLCANO_JOB)
    assert violations(rules.job_pods_unprivileged_with_rdma, as_args(job)) == []

    def drop_claims(i):
        task = next(t for t in i["spec"]["tasks"] if t["name"] == "mpiworker")
        del task["template"]["spec"]["containers"][0]["resources"]["claims"]
    (found,) = violations(rules.job_pods_unprivileged_with_rdma, broken(job, drop_claims))
    assert "no container requests an RDMA resource" in found and "DRA claim" in found


def test_gpu_pool_driver_none(dev):
    pool = dev.one(rules.AGENT_POOL)
    assert catalog.lookup(pool.inputs["vmSize"]).has_gpus
    for change in (lambda i: i.pop("gpuProfile"), lambda i: i.update(gpuProfile={"driver": "Install"})):
        found = violations(rules.gpu_pool_driver_none, broken(pool, change))
        assert len(found) == 1 and "gpuProfile.driver" in found[0]


def test_gpu_pool_without_the_managed_gpu_stack(dev):
    pool = dev.one(rules.AGENT_POOL)
    found = violations(rules.gpu_pool_driver_none, broken(
        pool, lambda i: i.update(gpuProfile={"driver": "None", "nvidia": {"managementMode": "Managed"}})))
    assert len(found) == 1 and "managementMode" in found[0]
    unmanaged = {"driver": "None", "nvidia": {"managementMode": "Unmanaged"}}
    explicit_off = broken(pool, lambda i: i.update(gpuProfile=unmanaged))
    assert violations(rules.gpu_pool_driver_none, explicit_off) == []


def test_cpu_pool_needs_no_gpu_profile(render_azure):
    pool = render_azure(ibPool={"vmSize": "Standard_HB120rs_v3"}).one(rules.AGENT_POOL)
    assert "gpuProfile" not in pool.inputs
    assert violations(rules.gpu_pool_driver_none, as_args(pool)) == []


# --- the pack itself ----------------------------------------------------------------------------
def test_every_rule_is_in_the_pack():
    names = [p.name for p in rules.POLICIES]
    assert len(set(names)) == len(names)
    assert all(n.replace("-", "").isalnum() and n == n.lower() for n in names)
    functions = {rules.ib_size_in_catalog, rules.versions_pinned, rules.no_public_node_ips,
                 rules.job_pods_unprivileged_with_rdma, rules.gpu_pool_driver_none, rules.api_server_restricted,
                 rules.local_accounts_disabled, rules.images_by_digest}
    assert {p.validate for p in rules.POLICIES} == functions
    assert {p.enforcement for p in rules.POLICIES} == {rules.MANDATORY, rules.ADVISORY}


def test_pack_files():
    project = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    pins = [line for line in (POLICY_DIR / "requirements.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert "pulumi-policy==1.21.0" in pins
    program_pins = (ROOT / "requirements.txt").read_text().splitlines()
    for pin in pins:
        name = pin.split("==")[0]
        same = [p for p in program_pins if p.startswith(name + "==")]
        assert not same or same == [pin], f"policy/requirements.txt pins {pin}, the program {same}"


def test_pack_entry_point_imports_the_rules_from_its_own_directory():
    """Run policy/__main__.py as the analyzer would - from policy/, without the project on PYTHONPATH -
    with PolicyPack replaced by a recorder (no pack is constructed): the import path works and every
    rule is handed over as a ResourceValidationPolicy."""
    probe = (
        "import runpy, pulumi_policy\n"
        "pulumi_policy.PolicyPack = lambda **kw: print(kw['name'], kw['enforcement_level'].value,"
        " *[p.name for p in kw['policies']])\n"
        "runpy.run_path('__main__.py', run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=POLICY_DIR, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    words = done.stdout.split()
    assert words[:2] == ["aks-infiniband", "mandatory"]
    assert words[2:] == [p.name for p in rules.POLICIES]


# --- the same rules on the offline render: `python -m offline policy` (make policy, offline.yml) ----
def test_the_offline_policy_command_reports_each_violation(dev, monkeypatch, capsys):
    from offline import __main__ as cli
    from offline import policy_check

    assert [v for v in policy_check.violations(dev) if v.mandatory] == []
    broken_render = copy.deepcopy(dev)
    broken_render.one(rules.AGENT_POOL).inputs["enableNodePublicIP"] = True
    found = [v for v in policy_check.violations(broken_render) if v.mandatory]
    assert [(v.policy, v.resource) for v in found] == [("no-public-node-ips", "ib-pool")]
    assert "**1 mandatory violation(s)**" in policy_check.report("dev", found)
    monkeypatch.setattr(engine, "render", lambda stack: broken_render if stack == "broken" else dev)
    assert cli.main(["policy", "--stack", "dev"]) == 0
    assert cli.main(["policy", "--stack", "dev", "--stack", "broken"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"`dev`: no mandatory violation, \d+ advisory", out)  # advice fails nothing
    assert "`no-public-node-ips` (mandatory) on `ib-pool`" in out
    assert "`api-server-restricted-advisory` (advisory) on `cluster-aks`" in out


# --- the access guardrails: advisory on dev stacks, mandatory on production ones -------------------
def _cluster(rendering: engine.Rendering) -> engine.Resource:
    return rendering.one(rules.MANAGED_CLUSTER)


# The access rules judge the ManagedCluster alone (the guard below): the tests of them render the Azure half,
# which declares the cluster as the whole stack does (tests/stack/test_stack_parts.py).
ACCESS_RULES = (rules.api_server_restricted, rules.local_accounts_disabled)


def test_the_access_rules_judge_the_cluster_alone(dev):
    """Both report on the dev cluster (public, local accounts) and pass every other resource of the stack."""
    others = [r for r in dev.resources if r.type != rules.MANAGED_CLUSTER]
    assert others and all(violations(rule, as_args(r)) == [] for rule in ACCESS_RULES for r in others)
    assert all(violations(rule, as_args(_cluster(dev))) for rule in ACCESS_RULES)


@pytest.mark.parametrize("production", [False, True], ids=["dev", "production"])
def test_a_public_api_server_without_authorized_ranges_is_flagged(render_azure, production):
    stack = render_azure(production=production)
    found = all_violations(stack, rules.MANDATORY if production else rules.ADVISORY)
    flagged = [v for v in found if v.startswith("api-server-restricted")]
    assert len(flagged) == 1 and "no authorized IP ranges" in flagged[0]
    assert (fabric.PRODUCTION_TAG in _cluster(stack).inputs["tags"]) is production


@pytest.mark.parametrize("overrides", [
    {"apiServer": {"authorizedIpRanges": ["203.0.113.0/24"]}},
    {"apiServer": {"private": True}},
], ids=["authorized-ranges", "private"])
def test_a_restricted_api_server_passes(render_azure, overrides):
    stack = render_azure(production=True, **overrides)
    assert not [v for v in all_violations(stack) if v.startswith("api-server-restricted")]


def test_local_accounts_are_mandatory_off_on_production_clusters(render_azure):
    assert any(v.startswith("local-accounts-disabled:") for v in all_violations(render_azure(production=True)))
    kept = render_azure(production=True, entraId={"enabled": True, "localAccounts": True})
    assert [v for v in all_violations(kept) if v.startswith("local-accounts")] == [
        "local-accounts-disabled: ManagedCluster 'cluster-aks': Entra ID is on but local accounts are enabled; "
        "remove entraId.localAccounts: true"]
    assert not [v for v in all_violations(render_azure(production=True, entraId={"enabled": True}))
                if v.startswith("local-accounts")]


@pytest.mark.parametrize("stack", ["private", "private-azure"])
def test_the_private_example_passes_every_rule_as_production(stack):
    from conftest import rendered

    rendering = rendered(stack)
    assert rules.is_production(as_args(_cluster(rendering)).props)
    advice = [v for v in all_violations(rendering, rules.ADVISORY) if not v.startswith(DIGEST_RULE)]
    assert all_violations(rendering) == [] and advice == []  # only the digests Renovate fills are advised


def test_the_guardrails_table_lists_every_policy_with_its_level():
    """docs/guardrails.md's table is the one list a reviewer reads: every rule of the pack is in it, and
    an advisory rule is called advisory there (the digest rule was missing)."""
    text = (ROOT / "docs" / "guardrails.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for policy in rules.POLICIES:
        row = next((r for r in rows if f"`{policy.name}`" in r.split(" | ")[0]), None)
        assert row is not None, f"{policy.name} is not in docs/guardrails.md's policy table"
        cell = row.split(" | ")[0]
        after = cell.split(f"`{policy.name}`", 1)[1].split("·")[0]
        assert ("advisory" in after) == (policy.enforcement == rules.ADVISORY), (policy.name, cell)
