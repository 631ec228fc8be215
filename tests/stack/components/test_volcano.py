"""Volcano from its release manifest, visible: pinned by sha256 beside its URL (pins.COMPONENTS),
fetched once into a local cache, checked, and applied from the checked content, so the render holds
every Volcano object and a checksum mismatch stops the program before any resource exists."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pulumi
import pytest
from conftest import dev_config

from components.platform import volcano
from core import pins
from offline import config_groups, engine, synth

TAG = pins.component("volcano").version


@pytest.fixture
def upstream(reference: Path) -> bytes:
    """The reference's copy of the pinned tag's manifest (the same bytes as the release URL)."""
    return volcano.cached_path(TAG, reference / "examples").read_bytes()


def test_the_pin_is_the_sha256_of_the_release_manifest(upstream):
    assert hashlib.sha256(upstream).hexdigest() == pins.component("volcano").sha256
    assert volcano.manifest_url(TAG).endswith(f"/volcano-sh/volcano/{TAG}/installer/volcano-development.yaml")


def test_the_manifest_is_fetched_once_into_the_cache_and_then_read_from_it(upstream, tmp_path):
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return upstream

    first = volcano.checked_manifest(TAG, cache=tmp_path, fetch=fetch)
    second = volcano.checked_manifest(TAG, cache=tmp_path, fetch=fetch)
    assert first == second == upstream.decode() and fetched == [volcano.manifest_url(TAG)]
    assert volcano.cached_path(TAG, tmp_path).read_bytes() == upstream


def test_a_tampered_copy_is_refused_with_one_clear_line(upstream, tmp_path):
    tampered = upstream.replace(b"volcano-scheduler", b"volcano-schedulor", 1)
    volcano.cached_path(TAG, tmp_path).write_bytes(tampered)
    with pytest.raises(volcano.ManifestError) as err:
        volcano.checked_manifest(TAG, cache=tmp_path, fetch=lambda url: pytest.fail("must not fetch"))
    message = str(err.value)
    assert "\n" not in message and hashlib.sha256(tampered).hexdigest() in message
    assert pins.component("volcano").sha256 in message and "refusing to apply" in message


def test_a_download_that_does_not_match_is_not_cached(upstream, tmp_path):
    with pytest.raises(volcano.ManifestError, match="refusing to apply"):
        volcano.checked_manifest(TAG, cache=tmp_path, fetch=lambda url: upstream + b"\n# changed upstream\n")
    assert not volcano.cached_path(TAG, tmp_path).exists()


def test_the_program_stops_on_a_tampered_copy_before_any_resource(upstream, tmp_path, monkeypatch):
    volcano.cached_path(TAG, tmp_path).write_bytes(upstream + b"# one more line\n")
    monkeypatch.setenv(volcano.CACHE_ENV, str(tmp_path))
    monitor = engine.RecordingMonitor(engine.OfflineMocks())
    with pytest.raises(pulumi.RunError) as err:
        engine.render("dev", config=dev_config(), monitor=monitor)
    assert "refusing to apply" in str(err.value) and "nothing was created" in str(err.value)
    assert monitor.registrations == []


def test_the_render_holds_every_volcano_object(dev, upstream, tmp_path):
    """`make synth` writes each object of the manifest under manifests/volcano-manifest/, so the plan
    shows them and a bump of the pin shows as a diff of those files."""
    from tests import schema_checks as sc

    expected = [d for d in sc.load_yaml_all(upstream.decode()) if d]
    group = dev.one(config_groups.CONFIG_GROUP, "volcano-manifest")
    # the checked content with the stack's two ConfigMaps (components/platform/volcano_topology.py), no URL, no path
    assert group.inputs == {"yaml": volcano.configured(upstream.decode(), False)}
    files = synth.synthesize(dev, images=False)
    written = sorted(p for p in files if p.startswith("manifests/volcano-manifest/"))
    assert len(written) == len(expected) == len(config_groups.objects(group))
    kinds = {p.split("/")[-1].split(".")[0] for p in written}
    assert {"customresourcedefinition", "deployment", "namespace", "mutatingwebhookconfiguration"} <= kinds
    assert "`manifests/volcano-manifest/ (" in files["plan.md"].decode()


@pytest.mark.parametrize("dra", [False, True])
def test_only_the_documents_the_stack_configures_are_written_again(upstream, dra):
    """The applied text is the release's, document for document: each one the configuration leaves alone
    (the 1 MB of CRDs among them) is the release's own text, and each one it changes holds exactly the
    configured object (components/platform/volcano_topology.py, with DRA
    components/platform/volcano_dra.py, and the admission webhook's readiness probe)."""
    from components.platform import volcano_dra, volcano_topology
    from tests import schema_checks as sc

    text = upstream.decode()
    objects = [d for d in sc.load_yaml_all(text) if d]
    expected = volcano_topology.configure(objects)
    expected = volcano.with_admission_readiness(volcano_dra.configure(expected) if dra else expected)
    expected = iter(volcano.with_pinned_images(expected))
    release_objects = iter(objects)
    marker = re.compile(r"^---[ \t]*\n", re.MULTILINE)
    released, applied = marker.split(text), marker.split(volcano.configured(text, dra))
    assert len(applied) == len(released) > len(objects) / 2
    rewritten = 0
    for piece, applied_piece in zip(released, applied, strict=True):
        if all(not line.strip() or line.lstrip().startswith("#") for line in piece.splitlines()):
            assert applied_piece == piece  # no object: a comment or nothing
            continue
        before, after = next(release_objects), next(expected)
        if after == before:
            assert applied_piece == piece
        else:
            assert sc.load_yaml(applied_piece) == after
            rewritten += 1
    assert next(expected, None) is None and next(release_objects, None) is None
    # the two ConfigMaps, and each workload for its image's digest: the webhook's Deployment and Job, the
    # controllers' and the scheduler's Deployments
    assert rewritten == 6


def test_no_resource_reads_a_manifest_from_a_url_at_deploy_time(dev):
    for r in dev.resources:
        if r.type.startswith("kubernetes:yaml"):
            assert "file" not in r.inputs and not r.inputs.get("files"), r.name


def test_without_a_cache_and_without_network_the_message_says_what_to_do(tmp_path):
    def offline(url: str) -> bytes:
        raise OSError("network unreachable")

    with pytest.raises(volcano.ManifestError, match=f"not cached.*{volcano.CACHE_ENV}"):
        volcano.checked_manifest(TAG, cache=tmp_path / "empty", fetch=offline)
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_dra_stack_applies_volcano_with_dra_on_and_the_others_without(dev, upstream):
    """GB sizes and rdmaMode dra claim devices: Volcano's scheduler must allocate them
    (components/platform/volcano_dra.py), composed with the topology configuration; a device-plugin stack
    keeps the scheduler as it was."""
    from conftest import rendered

    from components.platform import volcano_dra
    from tests import schema_checks as sc

    def scheduler_args(stack) -> list[str]:
        """The scheduler container's args. Of the group's documents (the text components/platform/volcano.py applies,
        split at its `---` lines) only those with the lines `kind: Deployment` and `name:` the
        scheduler are parsed, then held to both: the other 42 documents of Volcano's 1 MB need no parse here."""
        group = stack.one(config_groups.CONFIG_GROUP, "volcano-manifest")
        named = [text for text in group.inputs["yaml"].split("\n---\n")
                 if "kind: Deployment\n" in text and f"name: {volcano_dra.SCHEDULER}\n" in text]
        (deploy,) = [d for d in map(sc.load_yaml, named) if d and d["kind"] == "Deployment"
                     and d["metadata"]["name"] == volcano_dra.SCHEDULER]
        containers = deploy["spec"]["template"]["spec"]["containers"]
        (container,) = [c for c in containers if c["name"] == volcano_dra.SCHEDULER]
        return container["args"]

    gb300 = rendered("gb300")
    text = upstream.decode()
    # configured(text, dra) as components/platform/volcano.py calls it: the same cache entry, not a second rewrite
    assert gb300.one(config_groups.CONFIG_GROUP, "volcano-manifest").inputs == {"yaml": volcano.configured(text, True)}
    assert volcano_dra.FEATURE_GATE in scheduler_args(gb300)
    assert volcano_dra.PREDICATE_ARGUMENT in volcano.configured(text, True)
    assert volcano_dra.FEATURE_GATE not in scheduler_args(dev)
    assert volcano_dra.PREDICATE_ARGUMENT not in volcano.configured(text, False)
    dra_h100 = rendered("dev", dev_config(rdmaMode="dra"))
    assert volcano_dra.FEATURE_GATE in scheduler_args(dra_h100)


def test_the_admission_webhook_is_ready_only_once_it_listens(upstream):
    """The release's webhook Deployment has no readiness probe: Ready at start, listening only after its
    informers sync, with failurePolicy Fail. The stack adds a probe on its TLS port (the one it serves)."""
    volcano_mod = volcano
    text = volcano_mod.configured(upstream.decode())
    (deployment,) = [d for d in _workloads(text) if d.get("kind") == "Deployment"
                     and d["metadata"]["name"] == volcano_mod.ADMISSION_DEPLOYMENT]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert f"--port={volcano_mod.ADMISSION_PORT}" in container["args"]
    assert container["readinessProbe"]["tcpSocket"]["port"] == volcano_mod.ADMISSION_PORT


def _workloads(text: str) -> list[dict]:
    """The manifest's objects but its CRDs (most of its megabytes, and no containers), skipped unparsed as
    the component skips them, the rest read with libyaml: parsing all of it took seconds."""
    import yaml

    from components.platform.volcano import CRD_DOCUMENT, DOCUMENT_MARKER

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    pieces = [p for p in DOCUMENT_MARKER.split(text)[::2] if not CRD_DOCUMENT.search(p)]
    return [d for d in (yaml.load(p, Loader=loader) for p in pieces) if d]  # noqa: S506 (a safe loader)


def _containers(text: str) -> list[dict]:
    """Every container of the manifest's workloads."""
    out = []
    for d in _workloads(text):
        spec = (d.get("spec") or {}).get("template", {}).get("spec") or {}
        out += [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return out


def test_every_volcano_image_is_applied_by_its_pinned_digest(upstream):
    """The release names its images by tag with `Always`; the stack applies each by the pin table's digest,
    and so pulls it only where the node lacks it."""
    released = _containers(upstream.decode())
    applied = _containers(volcano.configured(upstream.decode()))
    assert len(applied) == len(released) == 4  # the webhook (Deployment, init Job), controllers, scheduler
    assert {c["image"] for c in released} == set(pins.volcano_images())
    assert {c["image"] for c in applied} == set(pins.volcano_images().values())
    assert all(pins.is_digest_pinned(c["image"]) and c["imagePullPolicy"] == "IfNotPresent" for c in applied)


def test_the_image_pins_move_with_the_volcano_pin():
    """A Volcano bump that leaves its images behind would apply the new manifest's images by tag (nothing
    matches the old ones): the images' tags are the manifest's."""
    for key in pins.VOLCANO_IMAGE_KEYS:
        name, _, tag = pins.component(key).version.partition("@")[0].rpartition(":")
        assert tag == TAG and name.startswith("docker.io/volcanosh/vc-"), (key, name, tag)


def test_an_image_of_another_tag_is_left_as_the_release_names_it():
    other = {"kind": "Deployment", "metadata": {"name": "x"}, "spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "docker.io/volcanosh/vc-scheduler:v0.0.1", "imagePullPolicy": "Always"}]}}}}
    assert volcano.with_pinned_images([other]) == [other]


def test_without_the_reference_material_the_offline_render_stops_with_one_line(tmp_path, monkeypatch):
    """The offline render applies the reference material's copy and fetches nothing: without it, the program
    stops before any resource, on one line that says to run `make reference` (engine.ReferenceMissing, which
    the tests skip on); the Azure half, which applies no Volcano, still renders."""
    monkeypatch.setenv("AKS_IB_REFERENCE", str(tmp_path / "none"))
    monkeypatch.delenv(volcano.CACHE_ENV, raising=False)
    monitor = engine.RecordingMonitor(engine.OfflineMocks())
    with pytest.raises(engine.ReferenceMissing) as err:
        engine.render("dev", config=dev_config(), monitor=monitor)
    message = str(err.value)
    assert "\n" not in message and "`make reference`" in message and "could not be fetched" not in message
    assert str(volcano.cached_path(TAG, tmp_path / "none" / "examples")) in message
    assert monitor.registrations == [] and not (tmp_path / "none").exists()
    assert volcano.CACHE_ENV not in os.environ and volcano.NO_FETCH_ENV not in os.environ
    assert engine.render("dev", config=dev_config(stackPart="azure")).resources
