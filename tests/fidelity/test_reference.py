"""How a clone gets the upstream reference material (`make reference`, offline/reference.py): the lock
file pins every file the tests read, with the real hashes; the fetcher checks each before writing it;
without the material the tests skip, saying how to get it.

The download itself needs the network, which the test suite does not have: here it is replaced by a
function that serves the shared copy's bytes (what the pinned URLs hold, by the hashes checked below).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offline import reference as ref

# Descriptions written for this project, not upstream files: not fetched, not needed by any test.
NOT_UPSTREAM = {"README.md", "charts/README.md", "azure-ai-infrastructure-on-azure/README.md",
                "nccl-tests/coreweave-images.md"}


def test_the_lock_pins_every_file_with_a_hash_and_a_source():
    entries = ref.entries()
    assert len({e.path for e in entries}) == len(entries) >= 80
    for e in entries:
        if e.helm_pull:
            assert e.path.startswith("charts/") and e.path.endswith(".tgz") and not e.pinned
            continue
        assert e.pinned and len(e.sha256 or "") == 64, e.path
        assert bool(e.url) != bool(e.copy), e.path
        if e.url:  # a raw file at a full commit id, never a branch or a tag that can move
            owner_repo_commit = e.url.removeprefix("https://raw.githubusercontent.com/").split("/")
            assert len(owner_repo_commit[2]) == 40 and int(owner_repo_commit[2], 16) >= 0, e.url
        if e.copy:
            assert (ref.ROOT / e.copy).is_file(), e.copy
        if e.lines:
            assert e.header.startswith("# SOURCE: ") and e.header.endswith("\n") and e.lines[0] <= e.lines[1]


def test_the_lock_holds_the_volcano_manifest_the_render_applies():
    """`make synth` reads Volcano's release manifest from the reference material only (offline/engine.py): the
    lock fetches the pinned tag's file under the name the render reads, with the sha256 the pin table gives."""
    from components.platform import volcano
    from core import pins

    pin = pins.component("volcano")
    name = volcano.cached_path(pin.version, Path("examples"))
    (entry,) = [e for e in ref.entries() if e.path == name.as_posix()]
    assert entry.sha256 == pin.sha256 and entry.url and entry.url.endswith("/installer/volcano-development.yaml")
    assert entry.url.startswith("https://raw.githubusercontent.com/volcano-sh/volcano/")


def test_the_reference_copy_matches_every_pinned_hash(reference: Path):
    """Every file the lock lists; the chart archives where the copy has a charts/ (CI fetches the pinned files
    into .cache/reference and pulls the stack's charts into AKS_IB_CHARTS instead: .github/workflows/offline.yml)."""
    charts = (reference / "charts").is_dir()
    assert [p for p in ref.problems(reference) if charts or not p.startswith("charts/")] == []
    on_disk = {str(p.relative_to(reference)) for p in reference.rglob("*") if p.is_file()}
    listed = {e.path for e in ref.entries() if charts or not e.helm_pull}
    assert on_disk - NOT_UPSTREAM == listed, "a reference file the lock does not list"


def _serve(reference: Path):
    """A stand-in for the network: each pinned URL gives the upstream bytes (for an excerpt, the excerpt's
    lines at their upstream line numbers, between lines the excerpt leaves out)."""
    by_url = {e.url: (reference / e.path).read_bytes() for e in ref.entries() if e.url and not e.lines}
    for e in ref.entries():
        if e.lines and e.url not in by_url:  # else the whole upstream file is in the reference too
            body = (reference / e.path).read_text()[len(e.header):]
            by_url[e.url] = ("left out\n" * (e.lines[0] - 1) + body + "after the excerpt\n").encode()
    return by_url.__getitem__


def test_fetch_writes_every_pinned_file_and_checks_it(reference: Path, tmp_path: Path):
    out = tmp_path / "cache"
    assert ref.fetch(out, download=_serve(reference)) == []
    assert [p for p in ref.problems(out)] == [f"{e.path}: missing" for e in ref.entries() if e.helm_pull]
    assert ref.fetch(out, download=lambda url: pytest.fail(f"{url} fetched again")) == []  # intact files stay


def test_a_download_with_other_bytes_is_refused_and_not_written(reference: Path, tmp_path: Path):
    serve = _serve(reference)
    excerpt = next(e for e in ref.entries() if e.lines)
    victim = next(e for e in ref.entries() if e.url and e.url != excerpt.url)

    def tampered(url: str) -> bytes:
        if url in (victim.url, excerpt.url):
            return serve(url).replace(b"e", b"E")
        return serve(url)

    failures = ref.fetch(tmp_path, download=tampered)
    assert {f.split(":")[0] for f in failures} == {e.path for e in ref.entries() if e.url in (victim.url, excerpt.url)}
    assert all("expected" in f for f in failures)
    assert not (tmp_path / victim.path).exists() and not (tmp_path / excerpt.path).exists()


def test_without_network_make_reference_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]):
    def offline(url: str) -> bytes:
        raise OSError(f"<urlopen error [Errno -3] Temporary failure in name resolution> ({url})")

    monkeypatch.setattr(ref, "_download", offline)
    assert ref.main(["fetch", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no network?" in err and "skip, saying why" in err
    # what needs no network (the logs kept in this repository) is there all the same
    assert all((tmp_path / e.path).is_file() for e in ref.entries() if e.copy)


def test_the_tests_skip_saying_how_to_get_the_material(reference: Path, tmp_path: Path):
    assert ref.unavailable_reason(reference) is None
    absent = ref.unavailable_reason(tmp_path / "nowhere")
    assert absent and "not found" in absent and "make reference" in absent
    (tmp_path / "crds").mkdir()
    partial = ref.unavailable_reason(tmp_path)
    assert partial and "incomplete" in partial and "make reference" in partial


def test_check_reports_a_changed_file(reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    ref.fetch(tmp_path, download=_serve(reference))
    changed = next(e for e in ref.entries() if e.pinned)
    (tmp_path / changed.path).write_text("edited by hand\n")
    assert ref.main(["check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{changed.path}: sha256" in err and "charts/gpu-operator-v26.7.0.tgz: missing" in err


def _render_inputs(monkeypatch, cache: Path, download) -> int:
    """`python -m offline render-inputs` (what `make synth` runs first) in a clone whose material would be
    .cache/reference (`cache`), the network replaced by `download`."""
    from offline import __main__ as offline_cli

    monkeypatch.delenv("AKS_IB_REFERENCE", raising=False)
    monkeypatch.setattr(ref, "SHARED", cache.parent / "no-shared-copy")
    monkeypatch.setattr(ref, "CACHE", cache)
    monkeypatch.setattr(ref, "_download", download)
    return offline_cli.main(["render-inputs"])


def test_make_synth_in_a_fresh_clone_fetches_the_manifest_it_applies_and_only_that(reference, tmp_path,
                                                                                    monkeypatch, capsys):
    from components.platform import volcano
    from core import pins

    name = volcano.cached_path(pins.component("volcano").version, Path("examples")).as_posix()
    fetched: list[str] = []

    def serve(url: str) -> bytes:
        fetched.append(url)
        return _serve(reference)(url)

    cache = tmp_path / "cache"
    assert _render_inputs(monkeypatch, cache, serve) == 0
    assert [p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file()] == [name]
    assert len(fetched) == 1
    assert _render_inputs(monkeypatch, cache, lambda url: pytest.fail(f"{url} fetched again")) == 0


def test_without_the_network_make_synth_stops_on_one_line_saying_what_to_do(tmp_path, monkeypatch, capsys):
    def offline(url: str) -> bytes:
        raise OSError("no network")

    assert _render_inputs(monkeypatch, tmp_path / "cache", offline) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "volcano-development" in err and "make reference" in err, err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.yaml"))


def test_an_air_gapped_site_fetches_from_its_mirror_and_still_checks_every_hash(
        reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """$AKS_IB_REFERENCE_MIRROR: each pinned URL is read from <mirror>/<host>/<path> (a file:// folder or an
    http(s) server laid out as the URLs are), and the sha256 is checked as for the upstream URL."""
    serve = _serve(reference)
    mirror = tmp_path / "mirror"
    for e in ref.entries():
        if e.url:
            target = mirror / e.url.split("://", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(serve(e.url))
    monkeypatch.setenv(ref.MIRROR_ENV, mirror.as_uri())
    monkeypatch.setattr(ref, "_download", lambda url: (
        Path(url.removeprefix("file://")).read_bytes() if url.startswith(mirror.as_uri())
        else pytest.fail(f"{url}: not the mirror")))
    out = tmp_path / "cache"
    assert ref.fetch(out) == []
    assert not ref.problems(out, hashes=True) or all(p.endswith(": missing") for p in ref.problems(out))
    victim = next(e for e in ref.entries() if e.url and not e.lines)
    (mirror / victim.url.split("://", 1)[1]).write_bytes(b"not what was pinned")
    (out / victim.path).unlink()
    (failure,) = ref.fetch(out)
    assert failure.startswith(f"{victim.path}: ") and "expected" in failure and str(mirror) in failure
