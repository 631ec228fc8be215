"""The feature wait script, run for real against a fake `az` on PATH."""

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "wait-feature-registered.sh"
SYSTEM_PATH = "/usr/bin:/bin"


@pytest.fixture
def run(tmp_path):
    if shutil.which("az", path=SYSTEM_PATH):
        pytest.skip("a real az is installed in /usr/bin or /bin; these tests need a PATH without it")

    def _run(fake_az: str | None, timeout_s: int = 5):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        if fake_az is not None:
            az = bin_dir / "az"
            az.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(fake_az))
            az.chmod(0o755)
        env = {
            "PATH": f"{bin_dir}:{SYSTEM_PATH}",
            "FEATURE_NAMESPACE": "Microsoft.ContainerService",
            "FEATURE_NAME": "AKSInfinibandSupport",
            "TIMEOUT_SECONDS": str(timeout_s),
            "POLL_SECONDS": "0",
            "STATE_DIR": str(tmp_path),
        }
        return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)

    return _run


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_missing_az_is_a_clear_error(run):
    result = run(None)
    assert result.returncode == 2
    assert "Azure CLI (az) is not on PATH" in result.stderr
    assert result.stdout == ""


def test_not_logged_in_is_a_clear_error(run):
    result = run('[ "$1 $2" = "account show" ] && exit 1\necho Registered\n')
    assert result.returncode == 3
    assert "az login" in result.stderr


def test_waits_until_registered_then_reregisters_the_provider(run):
    fake = """
    case "$1 $2" in
      "account show") exit 0 ;;
      "feature show")
        n=$(cat "$STATE_DIR/polls" 2>/dev/null || echo 0); echo $((n+1)) > "$STATE_DIR/polls"
        if [ "$n" -lt 2 ]; then echo Registering; else echo Registered; fi ;;
      "provider register") echo "$@" > "$STATE_DIR/provider"; exit 0 ;;
    esac
    """
    result = run(fake)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Registered"
    assert result.stderr.count(": Registering after") == 2  # progress, one line per poll


def test_provider_is_reregistered_with_its_namespace(run, tmp_path):
    fake = """
    case "$1 $2" in
      "account show") exit 0 ;;
      "feature show") echo Registered ;;
      "provider register") echo "$@" > "$STATE_DIR/provider" ;;
    esac
    """
    assert run(fake).returncode == 0
    assert "--namespace Microsoft.ContainerService" in (tmp_path / "provider").read_text()


def test_the_wait_is_bounded(run):
    fake = """
    case "$1 $2" in
      "account show") exit 0 ;;
      "feature show") echo Registering ;;
    esac
    """
    result = run(fake, timeout_s=1)
    assert result.returncode == 4
    assert "still 'Registering' after 1s" in result.stderr
    assert result.stdout == ""


def test_environment_contract_matches_the_component():
    from components import feature_registration

    text = SCRIPT.read_text()
    for var in ("FEATURE_NAMESPACE", "FEATURE_NAME", "TIMEOUT_SECONDS"):
        assert var in text
    assert os.path.basename(feature_registration.WAIT_SCRIPT) == SCRIPT.name
