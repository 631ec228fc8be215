"""scripts/feature-registration.sh, run for real against a fake `az` on PATH that records its argv."""

import shlex
import shutil
import subprocess
import textwrap

import pytest

from tests.paths import ROOT

SCRIPT = ROOT / "scripts" / "feature-registration.sh"
SYSTEM_PATH = "/usr/bin:/bin"
SUB = "11111111-2222-3333-4444-555555555555"

# Every fake records its argv (one call a line) before doing what the test says.
RECORD = 'printf "%s\\n" "$*" >> "$STATE_DIR/calls"\n'
# `feature show` answers the states listed in $STATE_DIR/states, one per call; the last one sticks.
# (bash's own read and mapfile: no cat, wc or sed started per call)
SHOW_FROM_STATES = """
    show_state() {
      n=0; if [ -e "$STATE_DIR/shows" ]; then read -r n < "$STATE_DIR/shows"; fi; echo $((n+1)) > "$STATE_DIR/shows"
      mapfile -t states < "$STATE_DIR/states"
      total=${#states[@]}
      if [ "$n" -ge "$total" ]; then n=$((total-1)); fi
      printf '%s\\n' "${states[n]}"
    }
"""
# bash itself, not /usr/bin/env's search of PATH for it
BASH = shutil.which("bash", path=SYSTEM_PATH) or "/bin/bash"


@pytest.fixture
def run(tmp_path):
    if shutil.which("az", path=SYSTEM_PATH):
        pytest.skip("a real az is installed in /usr/bin or /bin; these tests need a PATH without it")

    def _run(fake_az: str | None, timeout_s: int = 5, states: list[str] | None = None, **env_overrides):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        if fake_az is not None:
            az = bin_dir / "az"
            az.write_text(f"#!{BASH}\n" + RECORD + textwrap.dedent(SHOW_FROM_STATES + fake_az))
            az.chmod(0o755)
        if states is not None:
            (tmp_path / "states").write_text("\n".join(states) + "\n")
        env = {
            "PATH": f"{bin_dir}:{SYSTEM_PATH}",
            "SUBSCRIPTION_ID": SUB,
            "FEATURE_NAMESPACE": "Microsoft.ContainerService",
            "FEATURE_NAME": "AKSInfinibandSupport",
            "FEATURE_MODE": "register",
            "TIMEOUT_SECONDS": str(timeout_s),
            "POLL_SECONDS": "0",
            "AZ_RETRY_SECONDS": "0",
            "STATE_DIR": str(tmp_path),
            **env_overrides,
        }
        return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)

    return _run


def calls(tmp_path) -> list[list[str]]:
    path = tmp_path / "calls"
    return [shlex.split(line) for line in path.read_text().splitlines()] if path.exists() else []


def commands(tmp_path) -> list[str]:
    return [" ".join(argv[:2]) for argv in calls(tmp_path)]


# A well-behaved az: logged in, `feature show` from the states file, register/provider succeed.
HEALTHY = """
case "$1 $2" in
  "account show") exit 0 ;;
  "feature show") show_state ;;
  "feature register") exit 0 ;;
  "provider register") exit 0 ;;
  *) echo "fake az: unexpected call: $*" >&2; exit 99 ;;
esac
"""


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_missing_az_is_a_clear_error(run):
    result = run(None)
    assert result.returncode == 2
    assert "Azure CLI (az) is not on PATH" in result.stderr
    assert result.stdout == ""


def test_not_logged_in_is_a_clear_error(run, tmp_path):
    result = run('[ "$1 $2" = "account show" ] && exit 1\necho Registered\n')
    assert result.returncode == 3
    assert "az login" in result.stderr and SUB in result.stderr
    assert commands(tmp_path) == ["account show"]


def test_registers_when_not_registered_then_waits_then_reregisters_the_provider(run, tmp_path):
    result = run(HEALTHY, states=["NotRegistered", "Registering", "Registering", "Registered"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Registered\n"
    assert commands(tmp_path) == [
        "account show",
        "feature show",
        "feature register",  # once, only while the feature was NotRegistered
        "feature show",
        "feature show",
        "feature show",
        "provider register",
    ]
    assert result.stderr.count(": Registering after") == 2  # progress, one line per poll
    register = calls(tmp_path)[2]
    assert register[register.index("--name") + 1] == "AKSInfinibandSupport"
    assert register[register.index("--namespace") + 1] == "Microsoft.ContainerService"
    provider = calls(tmp_path)[-1]
    assert provider[provider.index("--namespace") + 1] == "Microsoft.ContainerService"
    assert "--wait" in provider


def test_an_unregistered_feature_is_registered_again(run, tmp_path):
    result = run(HEALTHY, states=["Unregistered", "Registered"])
    assert result.returncode == 0, result.stderr
    assert commands(tmp_path).count("feature register") == 1


@pytest.mark.parametrize("state", ["Registered", "Registering", "Pending"])
def test_register_is_not_called_when_already_registered_or_registering(run, tmp_path, state):
    """Idempotent: a second stack, an `up` after `destroy`, another team's registration."""
    result = run(HEALTHY, states=[state, "Registered"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Registered\n"
    assert "feature register" not in commands(tmp_path)
    assert commands(tmp_path)[-1] == "provider register"


@pytest.mark.parametrize("mode,states", [("register", ["NotRegistered", "Registered"]),
                                         ("require-unregistered", ["NotRegistered"]),
                                         ("require-unregistered", ["Registered"])])
def test_every_az_call_names_the_deploying_subscription(run, tmp_path, mode, states):
    """Not whichever subscription `az account set` last chose: the one Pulumi deploys to."""
    run(HEALTHY, states=states, FEATURE_MODE=mode)
    recorded = calls(tmp_path)
    assert len(recorded) >= 2
    for argv in recorded:
        assert "--subscription" in argv, argv
        assert argv[argv.index("--subscription") + 1] == SUB, argv


def test_a_transient_az_failure_is_retried(run, tmp_path):
    fake = """
    case "$1 $2" in
      "account show") exit 0 ;;
      "feature show")
        f=$(cat "$STATE_DIR/fails" 2>/dev/null || echo 0); echo $((f+1)) > "$STATE_DIR/fails"
        if [ "$f" -lt 2 ]; then echo "ERROR: (ServiceUnavailable) try again later" >&2; exit 1; fi
        show_state ;;
      "provider register") exit 0 ;;
    esac
    """
    result = run(fake, states=["Registered"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Registered\n"
    assert commands(tmp_path).count("feature show") == 3
    assert result.stderr.count("retrying") == 2
    assert "ServiceUnavailable" in result.stderr  # az's own message is passed on


def test_a_persistent_az_failure_is_a_clear_error(run, tmp_path):
    fake = """
    case "$1 $2" in
      "account show") exit 0 ;;
      "feature show") echo "ERROR: (AuthorizationFailed) no read permission" >&2; exit 1 ;;
    esac
    """
    result = run(fake, AZ_ATTEMPTS="3")
    assert result.returncode == 5
    assert commands(tmp_path).count("feature show") == 3
    assert "failed 3 times in a row" in result.stderr
    assert "AuthorizationFailed" in result.stderr
    assert result.stdout == ""


def test_a_failing_provider_registration_is_retried_then_reported(run, tmp_path):
    fake = """
    case "$1 $2" in
      "account show") exit 0 ;;
      "feature show") show_state ;;
      "provider register") exit 1 ;;
    esac
    """
    result = run(fake, states=["Registered"], AZ_ATTEMPTS="2")
    assert result.returncode == 5
    assert commands(tmp_path).count("provider register") == 2
    assert "az provider register" in result.stderr
    assert result.stdout == ""


# A fake clock for the script: `date +%s` answers 1000, 1010, 1020, ... (ten seconds per call).
FAKE_DATE = f"""#!{BASH}
n=1000; if [ -e "$STATE_DIR/clock" ]; then read -r n < "$STATE_DIR/clock"; fi
echo $((n + 10)) > "$STATE_DIR/clock"; echo "$n"
"""


def test_the_wait_is_bounded(run, tmp_path):
    """Still Registering after the limit: exit 4. On a fake clock (no real waiting), each poll reads the
    clock once: 10, 20, then 30 s after the start, and there it stops."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "date").write_text(FAKE_DATE)
    (tmp_path / "bin" / "date").chmod(0o755)
    result = run(HEALTHY, timeout_s=30, states=["Registering"])
    assert result.returncode == 4
    assert "still 'Registering' after 30s" in result.stderr
    assert commands(tmp_path).count("feature show") == 3
    assert result.stdout == ""
    assert "provider register" not in commands(tmp_path)


# --- sizes that must not have the feature (ND GB200 v6) --------------------------------------------
@pytest.mark.parametrize("state", ["Registered", "Registering", "Pending"])
def test_gb200_mode_refuses_a_registered_feature(run, tmp_path, state):
    result = run(HEALTHY, states=[state], FEATURE_MODE="require-unregistered")
    assert result.returncode == 6
    assert "ND GB200 v6 needs AKSInfinibandSupport unregistered" in result.stderr
    assert f"az feature unregister --namespace Microsoft.ContainerService --name AKSInfinibandSupport " \
           f"--subscription {SUB}" in result.stderr
    assert "az provider register" in result.stderr
    assert "subscription-wide" in result.stderr
    assert result.stdout == ""
    assert commands(tmp_path) == ["account show", "feature show"]  # read-only: it changes nothing


@pytest.mark.parametrize("state", ["NotRegistered", "Unregistered"])
def test_gb200_mode_passes_an_unregistered_feature(run, tmp_path, state):
    result = run(HEALTHY, states=[state], FEATURE_MODE="require-unregistered")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{state}\n"
    assert commands(tmp_path) == ["account show", "feature show"]


def test_gb200_mode_waits_out_an_unregistration_in_progress(run, tmp_path):
    result = run(HEALTHY, states=["Unregistering", "Unregistered"], FEATURE_MODE="require-unregistered")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Unregistered\n"


def test_an_unknown_mode_is_refused(run, tmp_path):
    result = run(HEALTHY, states=["Registered"], FEATURE_MODE="unregister")
    assert result.returncode == 64
    assert "FEATURE_MODE" in result.stderr
    assert calls(tmp_path) == []


def test_environment_contract_matches_the_component():
    from components.platform import feature_registration

    text = SCRIPT.read_text()
    for var in ("SUBSCRIPTION_ID", "FEATURE_MODE", "FEATURE_NAMESPACE", "FEATURE_NAME", "TIMEOUT_SECONDS"):
        assert f"${{{var}" in text, var
    for mode in (feature_registration.MODE_REGISTER, feature_registration.MODE_REQUIRE_UNREGISTERED):
        assert mode in text
    assert feature_registration.SCRIPT == f"scripts/{SCRIPT.name}"


@pytest.mark.parametrize("name", ["FEATURE_MODE", "TIMEOUT_SECONDS"])
def test_what_the_component_sets_has_no_default_here(run, tmp_path, name):
    """featureWaitTimeoutMinutes' 30 is the configuration's alone (the script had its own 1800 s), and the
    mode is the component's: unset, the script stops on one line and calls nothing."""
    result = run(HEALTHY, states=["Registered"], **{name: ""})
    assert result.returncode != 0 and f"{name} is not set" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and calls(tmp_path) == []
