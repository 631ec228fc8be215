"""No secret leaks. The kubeconfig (under the mocks: offline.mocks.FAKE_KUBECONFIG, whose token is
`offline-render-not-a-credential`) is a secret output, a secret input only where it must be used
(the Kubernetes provider), and appears nowhere else: not in another input (the result-collection
command fetches its own credentials with az, so that a rotation does not re-run it), not in a plain
output, not in the offline render, not in the logs. And the repository holds no credentials."""

from __future__ import annotations

import base64
import logging
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from offline.mocks import FAKE_KUBECONFIG
from tests.paths import ROOT

TOKEN = "offline-render-not-a-credential"
# Everything that would give the kubeconfig away: the token, the YAML, and AKS's base64 of it.
NEEDLES = (TOKEN, FAKE_KUBECONFIG.strip(), base64.b64encode(FAKE_KUBECONFIG.encode()).decode()[:40])
# Where the kubeconfig may go, as a secret: (resource type, input key).
SECRET_SINKS = {
    ("pulumi:providers:kubernetes", "kubeconfig"),
}


def leaks(value: Any) -> list[str]:
    text = value if isinstance(value, str) else repr(value)
    return [n[:30] for n in NEEDLES if n in text]


def test_kubeconfig_is_a_secret_output(dev):
    assert "kubeconfig" in dev.secret_outputs
    assert TOKEN in dev.outputs["kubeconfig"], "the output is the cluster's kubeconfig"
    for key, value in dev.outputs.items():
        if key not in dev.secret_outputs:
            assert not leaks(value), f"plain output {key} holds the kubeconfig"


def test_kubeconfig_only_in_secret_inputs_where_it_is_needed(dev):
    sinks_used = set()
    for r in dev.resources:
        for key, value in r.inputs.items():
            if not leaks(value):
                continue
            assert key in r.secret_inputs, f"{r.type} {r.name}: input {key} holds the kubeconfig in clear"
            assert (r.type, key) in SECRET_SINKS, f"{r.type} {r.name}: kubeconfig handed to {key}"
            sinks_used.add((r.type, key))
    # The provider must get it (as a secret), or nothing could be applied to the cluster.
    assert ("pulumi:providers:kubernetes", "kubeconfig") in sinks_used


def test_no_command_is_handed_the_kubeconfig(dev):
    """Stronger than "only as a secret": no pulumi-command step gets the kubeconfig in any input, secret
    or not, since every new kubeconfig would re-run the step; the day-0 certifier (a Job in the cluster)
    uses its ServiceAccount and gets nothing secret either."""
    commands = dev.of_type("command:local:Command")
    certify = dev.one("kubernetes:batch/v1:Job", "fabric-check-certify")
    assert certify.secret_inputs == [] and not leaks(certify.inputs)
    for c in commands:
        assert not [k for k, v in c.inputs.items() if leaks(v)], f"{c.name} is handed the kubeconfig"


def test_nothing_secret_in_the_logs_or_the_offline_render(volcano_manifest, tmp_path, caplog, capfd):
    """`make synth` output (run here into a temporary directory), its console output and its log: the
    command's own main() in this process (a fresh interpreter added a second to this test; the
    program's logging then reaches caplog rather than stderr, so both are read). The command renders
    the dev stack afresh (engine.render), so this is also everything the program logs through Pulumi
    (the mock engine logs to Python logging, read here at DEBUG) and prints."""
    from offline import __main__ as offline_cli

    out = tmp_path / "build"
    with caplog.at_level(logging.DEBUG):
        code = offline_cli.main(["synth", "--out", str(out), "--no-images"])
    stdout, stderr = capfd.readouterr()
    assert code == 0, stderr[-2000:]
    for where, text in (("stdout", stdout), ("stderr", stderr), ("log", caplog.text)):
        assert not leaks(text), f"the kubeconfig appears in the render's {where}"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.parent.name == "manifests" for p in files), "the render wrote no manifests"
    for p in files:
        assert not leaks(p.read_text(errors="replace")), f"{p.relative_to(out)} holds the kubeconfig"


def test_nothing_secret_in_an_existing_build_directory():
    """If `make synth` has been run in this checkout, its build/ must be clean too."""
    build = ROOT / "build"
    if not build.is_dir():
        pytest.skip("no build/ here (run `make synth`); the render is checked in a temporary directory above")
    for p in build.rglob("*"):
        if p.is_file() and p.suffix in (".md", ".yaml", ".yml", ".json", ".svg", ".txt"):
            assert not leaks(p.read_text(errors="replace")), f"build/{p.relative_to(build)}"


# --- no credentials in the code ----------------------------------------------------------------------
CREDENTIAL_PATTERNS = {
    "private key": r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----",
    "AWS access key id": r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
    "GitHub token": r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
    "Pulumi access token": r"\bpul-[0-9a-f]{40}\b",
    "Slack token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    "Azure storage key": r"AccountKey=[A-Za-z0-9+/]{40,}={0,2}",
    "Azure SAS signature": r"[?&]sig=[A-Za-z0-9%+/]{30,}",
    "JSON web token": r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    "secret assigned a literal": (
        r"(?i)\b(client[_-]?secret|password|passwd|api[_-]?key|access[_-]?token|secret[_-]?key)\b"
        r"\s*[:=]\s*['\"][^'\"\s$<{]{8,}['\"]"
    ),
}


# Text a pattern cannot match without one of these (its literal start), tested before the regex: a
# pattern that starts with \b is otherwise tried at every position of the repository's 3.5 MB.
NEEDS_ONE_OF = {
    "AWS access key id": ("AKIA", "ASIA"),
    "GitHub token": tuple(f"gh{c}_" for c in "pousr"),
    "Pulumi access token": ("pul-",),
    "Slack token": tuple(f"xox{c}-" for c in "abprs"),
    "JSON web token": ("eyJ",),
}


def scan(text: str) -> list[str]:
    return [name for name, rx in CREDENTIAL_PATTERNS.items()
            if any(literal in text for literal in NEEDS_ONE_OF.get(name, ("",))) and re.search(rx, text)]


def repository_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in listed.split("\0") if f and (ROOT / f).is_file()]


def test_no_credentials_in_the_repository():
    files = repository_files()
    assert len(files) > 20
    found = []
    for p in files:
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{p.relative_to(ROOT)}: {name}" for name in scan(text)]
    assert found == []


@pytest.mark.parametrize("planted, kind", [
    ("-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n", "private key"),
    ("aws_key = 'AKIA" + "ABCDEFGHIJKLMNOP'", "AWS access key id"),
    ("token: ghp_" + "a" * 36, "GitHub token"),
    ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + "A" * 86 + "==", "Azure storage key"),
    ('client_secret = "' + "s3cr3t-value-123" + '"', "secret assigned a literal"),
    ("PULUMI_ACCESS_TOKEN=pul-" + "0123456789abcdef" * 2 + "01234567", "Pulumi access token"),
    ("SLACK=xox" + "b-1234567890-abcdef", "Slack token"),
    ("Authorization: Bearer eyJ" + "hbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f", "JSON web token"),
    ("see https://x.blob.core.windows.net/c?sv=2022&sig=" + "A" * 32, "Azure SAS signature"),
])
def test_the_scan_finds_planted_credentials(planted, kind):
    assert kind in scan(planted)


@pytest.mark.parametrize("harmless", [
    'password = os.environ["ARM_CLIENT_SECRET"]',
    "api_key: ${API_KEY}",
    'client_secret = "<your secret>"',
    "user: {token: offline-render-not-a-credential}",
])
def test_the_scan_lets_references_and_placeholders_pass(harmless):
    assert scan(harmless) == []
