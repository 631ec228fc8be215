"""Typed configuration: defaults, validation messages, and the generated project file."""

import dataclasses
import json

import jsonschema
import pulumi
import pytest
import yaml
from conftest import dev_config

import stack_config
from core import modes, pins
from offline import engine
from tests.paths import ROOT

P = stack_config.PROJECT


def parse(**overrides):
    return stack_config.parse(engine.as_cli_config(dev_config(**overrides)), "dev")


def problems(**overrides) -> list[str]:
    with pytest.raises(stack_config.ConfigError) as err:
        parse(**overrides)
    return err.value.problems


def test_dev_stack_parses_to_the_documented_defaults():
    cfg = parse()
    assert cfg.ib_pool.vm_size == "Standard_ND96isr_H100_v5" and cfg.ib_pool.node_count == 2
    assert cfg.rdma_mode is modes.SHARED
    assert cfg.location == "eastus"
    assert cfg.resource_group_name == "aks-infiniband-dev" and cfg.cluster_name == "aks-ib-dev"
    assert cfg.kubernetes_version == stack_config.DEFAULT_KUBERNETES_VERSION
    assert cfg.versions.gpu_operator == stack_config.DEFAULT_VERSIONS["gpuOperator"]
    assert cfg.ib_pool.os_disk_size_gb == 256 and cfg.ib_pool.name == "ibpool"
    assert cfg.fabric_test.enabled and not cfg.fabric_test.fail_on_low_bandwidth
    assert cfg.protect is False


def test_typed_yaml_values_and_cli_strings_parse_the_same():
    typed = stack_config.parse(dev_config(), "dev")
    as_cli = stack_config.parse(engine.as_cli_config(dev_config()), "dev")
    assert typed == as_cli


def test_object_fields_fall_back_to_defaults_one_by_one():
    cfg = parse(versions={"volcano": "v1.14.0@sha256:" + "0" * 64}, allowUntestedVersions=True)
    assert cfg.versions.volcano == "v1.14.0@sha256:" + "0" * 64
    assert cfg.versions.network_operator == stack_config.DEFAULT_VERSIONS["networkOperator"]


@pytest.mark.parametrize(
    "overrides, key, value_shown, allowed",
    [
        ({"rdmaMode": "sr-iov"}, f"{P}:rdmaMode", "'sr-iov'", "shared, sriov"),
        ({"ibPool": {"vmSize": "Standard_D8s_v5"}}, f"{P}:ibPool.vmSize", "'Standard_D8s_v5'", "Standard_HB120rs_v3"),
        ({"ibPool": {"nodeCount": 0}}, f"{P}:ibPool.nodeCount", "0", "from 1 to"),
        ({"ibPool": {"nodeCount": "two"}}, f"{P}:ibPool.nodeCount", "'two'", "integer"),
        ({"versions": {"volcano": "master"}}, f"{P}:versions.volcano", "'master'", "pinned"),
        ({"fabricTest": {"image": "ghcr.io/x/nccl:latest"}}, f"{P}:fabricTest.image", "latest", "pinned"),
        ({"kubernetesVersion": "latest"}, f"{P}:kubernetesVersion", "'latest'", "MAJOR.MINOR"),
    ],
)
def test_a_bad_value_names_the_key_the_value_and_what_is_allowed(overrides, key, value_shown, allowed):
    found = problems(**overrides)
    assert len(found) == 1, found
    assert found[0].startswith(key + ":")
    assert value_shown in found[0] and allowed in found[0]


def test_unknown_keys_are_errors_at_top_level_and_inside_objects():
    found = problems(rdmaMod="shared", ibPool={"nodeCont": 2})
    assert any(p.startswith(f"{P}:rdmaMod: unknown key") and "rdmaMode" in p for p in found)
    assert any(p.startswith(f"{P}:ibPool.nodeCont: unknown key") and "nodeCount" in p for p in found)


@pytest.mark.parametrize("overrides, line", [
    ({"ibPool": {"nodeCout": 2}}, f"{P}:ibPool.nodeCout: unknown key; did you mean nodeCount? ibPool takes: "),
    ({"ibPool": {"NodeCount": 2}}, f"{P}:ibPool.NodeCount: unknown key; did you mean nodeCount? "),
    ({"fabricTest": {"enable": False}}, f"{P}:fabricTest.enable: unknown key; did you mean enabled? "),
    ({"versions": {"gpuOpertor": "v1.0.0"}}, f"{P}:versions.gpuOpertor: unknown key; did you mean gpuOperator? "),
    ({"rdmaMod": "shared"}, f"{P}:rdmaMod: unknown key; did you mean rdmaMode? allowed keys: "),
])
def test_a_misspelt_key_gets_the_closest_name_at_any_depth(overrides, line):
    found = [p for p in problems(**overrides) if "unknown key" in p]
    assert len(found) == 1 and found[0].startswith(line), found


def test_an_unknown_key_like_no_other_gets_no_guess():
    (found,) = problems(versions={"zzz": "1"})
    assert "did you mean" not in found and "versions takes: docaDriver, draDriver, dranet, gpuOperator" in found


def test_the_node_count_range_says_one_node_needs_the_fabric_test_off():
    (found,) = problems(ibPool={"nodeCount": 0})
    assert found == (f"{P}:ibPool.nodeCount: got 0; expected an integer from 1 to 1000 (1 only with "
                     "fabricTest.enabled: false: the fabric test needs 2 or more nodes)")
    assert parse(ibPool={"nodeCount": 1}, fabricTest={"enabled": False}).ib_pool.node_count == 1


def test_a_misspelt_project_namespace_is_an_error_not_silently_ignored():
    cfg = engine.as_cli_config(dev_config())
    cfg["aks-infinband:rdmaMode"] = "sriov"
    with pytest.raises(stack_config.ConfigError) as err:
        stack_config.parse(cfg, "dev")
    assert err.value.problems == [
        "aks-infinband:rdmaMode: unknown namespace 'aks-infinband'; did you mean aks-infiniband:rdmaMode?"
    ]
    cfg.pop("aks-infinband:rdmaMode")
    cfg["kubernetes:enableServerSideApply"] = "true"  # other namespaces are not ours to judge
    stack_config.parse(cfg, "dev")


def test_every_problem_is_reported_at_once():
    assert len(problems(rdmaMode="x", ibPool={"nodeCount": -1}, protect="maybe")) == 3


def test_required_ib_pool_and_location():
    found = problems(ibPool=None, **{"azure-native:location": None})
    assert any(p.startswith(f"{P}:ibPool: is required") for p in found)
    assert any(p.startswith("azure-native:location:") and "pulumi config set" in p for p in found)


def test_one_node_cannot_test_the_fabric_unless_the_test_is_off():
    assert any("2 or more nodes" in p for p in problems(ibPool={"nodeCount": 1}))
    assert parse(ibPool={"nodeCount": 1}, fabricTest={"enabled": False}).ib_pool.node_count == 1


@pytest.mark.parametrize("overrides", [
    {"ibPool": {"vmSize": "Standard_ND128isr_NDR_GB200_v6"}},  # the DRA driver's ComputeDomain
    {"rdmaMode": "dra"},  # DRANET and the DRA driver on H100
], ids=["gb200", "dra"])
def test_dra_needs_kubernetes_1_34(overrides):
    """resource.k8s.io/v1 is served from 1.34 (the pinned kubernetes-validate ships it from v1.34.0);
    Azure asks for 1.34.2 or newer for the DRA driver: a pinned older patch is refused too."""
    for old in ("1.33", "1.34.1"):
        (found,) = problems(kubernetesVersion=old, **overrides)
        assert found.startswith(f"{P}:kubernetesVersion: got {old!r}; ") and "needs Kubernetes 1.34" in found
        assert "resource.k8s.io/v1" in found
    for ok in ("1.35",):
        assert parse(kubernetesVersion=ok, **overrides).kubernetes_version == ok
    # 1.34 serves the API, but AKS's osSKU Ubuntu is 22.04 there, and both need 24.04
    (found,) = problems(kubernetesVersion="1.34.2", **overrides)
    assert "needs Ubuntu 24.04" in found and "use 1.35 or newer" in found
    # outside the matrix only with the override; the floor is the API's, so the override keeps it
    assert parse(kubernetesVersion="1.36", allowUntestedVersions=True, **overrides).kubernetes_version == "1.36"
    (found,) = problems(kubernetesVersion="1.33", allowUntestedVersions=True, **overrides)
    assert "needs Kubernetes 1.34" in found
    # no DRA: no such floor
    assert parse(kubernetesVersion="1.33", allowUntestedVersions=True).kubernetes_version == "1.33"


def test_gb_sizes_keep_sharp_off_and_dra_needs_a_gpu_size_with_a_published_layout():
    (found,) = problems(ibPool={"vmSize": "Standard_ND128isr_GB300_v6"}, fabricTest={"sharp": True})
    assert found.startswith(f"{P}:fabricTest.sharp: got true; ") and "no SHARP" in found
    (found,) = problems(ibPool={"vmSize": "Standard_HB176rs_v4"}, rdmaMode="dra")
    assert found.startswith(f"{P}:rdmaMode: got 'dra'; Standard_HB176rs_v4 has no GPUs")
    (found,) = problems(ibPool={"vmSize": "Standard_ND128isr_NDR_GB200_v6"}, rdmaMode="dra")
    assert found.startswith(f"{P}:rdmaMode: got 'dra'; no published source says which HCA")
    assert "shared or sriov" in found
    for size in ("Standard_ND128isr_GB300_v6", "Standard_ND96isr_H100_v5", "Standard_ND96asr_v4"):
        assert parse(ibPool={"vmSize": size}, rdmaMode="dra").rdma_mode is modes.DRA


def test_all_reduce_size_fits_the_gpus_memory_by_default_and_is_checked_when_set():
    assert parse().fabric_test.all_reduce_args == "-b 8 -e 16G -f 2 -g 1"  # H100 80 GB: 3 x 16 + 4 <= 80
    a100_40 = {"ibPool": {"vmSize": "Standard_ND96asr_v4"}}
    assert parse(**a100_40).fabric_test.all_reduce_args == "-b 8 -e 8G -f 2 -g 1"
    (problem,) = problems(fabricTest={"allReduceArgs": "-b 8 -e 16G -f 2 -g 1"}, **a100_40)
    assert problem.startswith(f"{P}:fabricTest.allReduceArgs: got '-b 8 -e 16G -f 2 -g 1'; its buffers need 52 GB")
    assert "has 40 GB" in problem and "-e 8G" in problem
    # without the data check (-c 0, as Azure's own job runs it) two buffers fit
    assert parse(fabricTest={"allReduceArgs": "-b 8 -e 16G -f 2 -g 1 -c 0"}, **a100_40).fabric_test.enabled


def test_arm64_sizes_need_an_arm64_test_image(monkeypatch):
    gb200 = {"ibPool": {"vmSize": "Standard_ND128isr_NDR_GB200_v6"}}
    # the default image is multi-arch (pins.COMPONENTS), so an arm64 size takes it ...
    assert "arm64" in pins.component("ncclTestsImage").platforms
    assert parse(**gb200).fabric_test.image == stack_config.DEFAULT_NCCL_TESTS_IMAGE
    # ... and a default built for amd64 only would be refused there
    amd64_only = dataclasses.replace(pins.component("ncclTestsImage"), platforms=("amd64",))
    monkeypatch.setitem(pins.BY_KEY, "ncclTestsImage", amd64_only)
    assert any("fabricTest.image" in p and "amd64 only" in p and "arm64" in p for p in problems(**gb200))


def test_the_program_stops_with_a_run_error_before_any_resource():
    cfg = dev_config(rdmaMode="infiniband")
    with pytest.raises(pulumi.RunError) as err:
        engine.render("dev", config=cfg)
    message = str(err.value)
    assert "nothing was created" in message and f"{P}:rdmaMode" in message and "'infiniband'" in message


# --- Pulumi.yaml and the stack files -------------------------------------------------------------
def test_pulumi_yaml_is_generated_from_the_schema():
    assert (ROOT / "Pulumi.yaml").read_text() == stack_config.pulumi_yaml(), (
        "Pulumi.yaml is out of date: run `make golden`"
    )


def test_pulumi_yaml_validates_against_pulumis_project_schema(reference):
    schema = json.loads((reference / "schemas" / "pulumi-project.schema.json").read_text())
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    jsonschema.validate(project, schema)
    assert project["name"] == "aks-infiniband"
    assert project["runtime"]["options"]["virtualenv"]
    assert all(set(v) >= {"type", "description"} for v in project["config"].values())


def test_the_project_schema_check_catches_a_bad_type(reference):
    schema = json.loads((reference / "schemas" / "pulumi-project.schema.json").read_text())
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    project["config"]["rdmaMode"]["type"] = "enum"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(project, schema)


def test_every_stack_sets_each_key_that_has_no_default():
    """The CLI refuses a stack that leaves a project key without a default unset."""
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    required = {name for name, decl in declared.items() if "default" not in decl}
    assert required == {k.name for k in stack_config.SCHEMA if k.required}
    for stack_file in sorted(ROOT.glob("Pulumi.*.yaml")):
        config = yaml.safe_load(stack_file.read_text())["config"]
        missing = {name for name in required if f"{P}:{name}" not in config}
        assert not missing, f"{stack_file.name} must set {sorted(missing)} (no default in Pulumi.yaml)"


def test_pulumi_yaml_defaults_parse_to_the_documented_defaults():
    """What the CLI hands the program for unset keys means the same as the keys being absent."""
    only_required = {k: v for k, v in dev_config().items() if not k.startswith(P) or k.endswith(":ibPool")}
    with_defaults = {**engine.project_defaults(), **only_required}
    assert stack_config.parse(engine.as_cli_config(with_defaults), "dev") == stack_config.parse(
        engine.as_cli_config(only_required), "dev")


_PY_TYPES = {"string": str, "integer": int, "boolean": bool, "object": dict}


@pytest.mark.parametrize("stack_file", sorted(ROOT.glob("Pulumi.*.yaml")), ids=lambda p: p.name)
def test_stack_file_values_have_the_declared_types_and_parse(stack_file):
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    config = yaml.safe_load(stack_file.read_text())["config"]
    for key, value in config.items():
        namespace, _, name = key.partition(":")
        if namespace != P:
            continue
        expected = _PY_TYPES[declared[name]["type"]]
        assert isinstance(value, expected) and not (expected is int and isinstance(value, bool)), (
            f"{stack_file.name}: {key} is {type(value).__name__}, Pulumi.yaml declares {declared[name]['type']}"
        )
    stack = stack_file.name.split(".")[1]
    stack_config.parse(engine.as_cli_config(config), stack)


def test_the_configuration_reference_is_generated_from_the_schema():
    doc = (ROOT / stack_config.docs.DOC).read_text()
    table = doc.split(stack_config.TABLE_START, 1)[1].split(stack_config.TABLE_END, 1)[0]
    assert table == stack_config.markdown_table(), f"{stack_config.docs.DOC} is out of date: run `make golden`"


# --- the newcomer's findings (issue 52): limits as Azure documents them, names as Azure reads them ---------
@pytest.mark.parametrize("overrides, check", [
    ({"ibPool": {"nodeCount": 1000}}, lambda c: c.ib_pool.node_count == 1000),  # AKS: 1,000 nodes in a pool
    ({"ibPool": {"nodeCount": 1000, "minNodeCount": 1000}}, lambda c: c.ib_pool.min_node_count == 1000),
    ({"systemPool": {"nodeCount": 1000}}, lambda c: c.system_pool.node_count == 1000),
    ({"ibPool": {"osDiskSizeGb": 2048}}, lambda c: c.ib_pool.os_disk_size_gb == 2048),  # the API's maximum
    ({"ibPool": {"osDiskSizeGb": 30}}, lambda c: c.ib_pool.os_disk_size_gb == 30),  # AKS images' minimum
    ({"network": {"serviceCidr": "10.64.0.0/12", "dnsServiceIp": "10.64.0.10"}},
     lambda c: c.network.service_cidr == "10.64.0.0/12"),  # kube-apiserver's widest IPv4 range
    ({"systemPool": {"vmSize": "standard_d4s_v5"}}, lambda c: c.system_pool.vm_size == "Standard_D4s_v5"),
    ({"systemPool": {"vmSize": "STANDARD_D8ADS_V5"}}, lambda c: c.system_pool.vm_size == "Standard_D8ads_v5"),
    ({"ibPool": {"vmSize": "standard_nd96isr_h100_v5"}}, lambda c: c.sku.vm_size == "Standard_ND96isr_H100_v5"),
    ({"azure-native:location": "EastUS"}, lambda c: c.location == "eastus"),  # ARM reads names without case
    ({"azure-native:location": "WestUS3"}, lambda c: c.location == "westus3"),
], ids=["ib-1000", "min-1000", "system-1000", "disk-2048", "disk-30", "service-12", "system-size-lower",
        "system-size-upper", "ib-size-lower", "EastUS", "WestUS3"])
def test_what_azure_accepts_is_accepted_and_written_as_azure_names_it(overrides, check):
    assert check(parse(**overrides))


@pytest.mark.parametrize("overrides, key, shown", [
    ({"clusterName": "a" * 1_000_000}, f"{P}:clusterName", "'aaaa"),
    ({"ibPool": {"vmSize": "Standard_" + "X" * 1_000_000}}, f"{P}:ibPool.vmSize", "'Standard_XXX"),
    ({"azure-native:location": "e" * 1_000_000}, "azure-native:location", "'eee"),
    ({"tags": {"k" * 1_000_000: "v"}}, f"{P}:tags", "kkk"),
    ({"network": {"serviceCidr": "1" * 1_000_000}}, f"{P}:network.serviceCidr", "'111"),
])
def test_a_huge_value_is_shown_cut_to_a_readable_length(overrides, key, shown):
    """A 1 MB name printed a 1 MB line: a value echoed in a message is cut, and says how long it was."""
    found = [p for p in problems(**overrides) if p.startswith(key)]
    assert found, problems(**overrides)
    assert all(len(p) < 1500 for p in found), [len(p) for p in found]
    assert shown in found[0] and "1000" in found[0].replace(",", ""), found[0][:300]


def test_a_typo_in_a_providers_namespace_is_named_as_such():
    cfg = engine.as_cli_config(dev_config())
    cfg["azure-natve:location"] = "westus3"
    with pytest.raises(stack_config.ConfigError) as err:
        stack_config.parse(cfg, "dev")
    assert err.value.problems == [
        "azure-natve:location: unknown namespace 'azure-natve'; did you mean azure-native:location? "
        "(a provider's keys are read only under its own name)"]


@pytest.mark.parametrize("size", ["Standard_ND128isr_NDR_GB200_v6", "Standard_ND128isr_GB300_v6"])
def test_grace_blackwell_stays_on_the_kubernetes_versions_known_to_give_ubuntu_24_04(size):
    """osSKU Ubuntu is 24.04 on 1.35-1.37 and 26.04 from 1.38 (AKS release notes of 2026-10-25, core/dra.py);
    Azure's GB images need 24.04, so a GB pool past 1.37 is refused, even with allowUntestedVersions."""
    gb = {"ibPool": {"vmSize": size}, "rdmaMode": "sriov", "allowUntestedVersions": True}
    for ok in ("1.35", "1.36", "1.37", "1.37.4"):
        assert parse(kubernetesVersion=ok, **gb).kubernetes_version == ok
    for past in ("1.38", "1.38.1", "1.40"):
        (found,) = problems(kubernetesVersion=past, **gb)
        assert found.startswith(f"{P}:kubernetesVersion: got {past!r}; {size} needs Ubuntu 24.04"), found
        assert "26.04" in found and "1.37" in found
    # not a GB size: DRANET's containerd 2 is in 26.04 too, so no ceiling
    assert parse(kubernetesVersion="1.38", rdmaMode="dra", allowUntestedVersions=True).kubernetes_version == "1.38"


def test_the_matrix_has_no_minor_past_its_end_of_life():
    """1.34 reached its end of life in November 2026 (upstream 2026-10-27): no longer a tested row."""
    assert "1.34" not in pins.SUPPORTED_KUBERNETES
    (found,) = problems(kubernetesVersion="1.34")
    assert "compatibility matrix" in found
