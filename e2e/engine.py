"""`python -m e2e.engine [pulumi args]` (`make e2e-pulumi ARGS="..."`): the real Pulumi CLI on this repository's
program, beside the control plane of `make cluster-up`, with the engine tier's environment.

The CLI, its Python language host and the Kubernetes provider are the ones e2e/tools/build.sh builds
(docs/real-control-plane.md, "The Pulumi engine"). Here they run with nothing reaching out: no update
check, no automatic plugin download, only the plugins installed below (PULUMI_IGNORE_AMBIENT_PLUGINS), a
file backend and the CLI's home under build/e2e/, and a passphrase secrets provider whose passphrase is
this tier's own. Volcano's manifest is read from the reference material, never fetched. The language
host ignores Pulumi.yaml's `virtualenv` option, so .venv is put first on PATH and in VIRTUAL_ENV.
KUBECONFIG passes through (the control plane's when unset).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from components.platform import volcano
from e2e import cluster
from offline import reference

ROOT = cluster.ROOT
STACKS = ROOT / "e2e" / "stacks"  # the tier's stack files (Pulumi.<stack>.yaml), committed
# The project the CLI runs: Pulumi.yaml as the repository has it, with `main` at the repository root (the
# program runs there, so the stack files' paths are the root's), and a working copy of each stack file
# (the passphrase provider writes its salt into it, and `pulumi config set` its changes).
PROJECT = cluster.STATE / "project"
HOME = cluster.STATE / "pulumi-home"  # PULUMI_HOME: the CLI's plugins and workspace settings
BACKEND = cluster.STATE / "pulumi-state"  # the file backend: one folder per stack
# Not a secret: it guards the test stacks' state in build/e2e only.
PASSPHRASE = "aks-infiniband-e2e"
ENGINE_TOOLS = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-kubernetes")


def sdk_version(package: str, requirements: Path = ROOT / "requirements.txt") -> str:
    """The version `requirements.txt` pins for `package` (the provider is installed as the SDK's version, which
    is the one the SDK asks the engine for)."""
    m = re.search(rf"^{re.escape(package)}==([0-9][^\s#]*)", requirements.read_text(), re.MULTILINE)
    if not m:
        raise cluster.ClusterError(f"{requirements}: no pin of {package}")
    return m.group(1)


def environment(bin_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the CLI runs in (see the module's docstring)."""
    env = dict(os.environ if base is None else base)
    venv = ROOT / ".venv"
    env.update({
        "PATH": os.pathsep.join([str(venv / "bin"), str(bin_dir), env.get("PATH", "")]),
        "VIRTUAL_ENV": str(venv),
        "PULUMI_HOME": str(HOME),
        "PULUMI_BACKEND_URL": f"file://{BACKEND}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
        "PULUMI_SKIP_CONFIRMATIONS": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        "KUBECONFIG": env.get("KUBECONFIG") or str(cluster.KUBECONFIG),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PULUMI_DIY_BACKEND_GZIP": "false",
        # Volcano's release manifest from the reference copy (checked against its pin), never fetched
        volcano.CACHE_ENV: str(reference.reference_dir() / "examples"),
        volcano.NO_FETCH_ENV: "the engine tier reads Volcano's manifest from the reference material: "
                              + reference.HOW_TO_GET,
    })
    env.pop("PULUMI_ACCESS_TOKEN", None)  # never the Pulumi Cloud
    env.pop("PULUMI_API", None)
    return env


def prepare(bin_dir: Path, env: Mapping[str, str]) -> None:
    """The file backend's folder, and the Kubernetes provider installed as the SDK's version (once)."""
    lacking = [t for t in ENGINE_TOOLS if not (bin_dir / t).is_file()]
    if lacking:
        raise cluster.ClusterError(f"not built: {', '.join(lacking)} (make e2e-tools)")
    BACKEND.mkdir(parents=True, exist_ok=True)
    version = sdk_version("pulumi-kubernetes")
    if not (HOME / "plugins" / f"resource-kubernetes-v{version}").is_dir():
        subprocess.run([str(bin_dir / "pulumi"), "plugin", "install", "resource", "kubernetes", f"v{version}",
                        "--file", str(bin_dir / "pulumi-resource-kubernetes")], env=env, check=True, cwd=ROOT)


def project() -> Path:
    """build/e2e/project: Pulumi.yaml with `main` at the root, and each committed stack file not copied yet."""
    PROJECT.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "Pulumi.yaml").read_text()
    (PROJECT / "Pulumi.yaml").write_text(f"{text.rstrip()}\nmain: {os.path.relpath(ROOT, PROJECT)}\n")
    for stack_file in STACKS.glob("Pulumi.*.yaml"):
        if not (PROJECT / stack_file.name).exists():
            (PROJECT / stack_file.name).write_text(stack_file.read_text())
    return PROJECT


def reset(stack: str) -> None:
    """Forget `stack`: its state in the file backend and its working stack file (a fresh copy comes next)."""
    import shutil
    for path in BACKEND.glob(f".pulumi/stacks/*/{stack}.json*"):
        path.unlink()
    for kind in ("history", "backups", "locks"):
        shutil.rmtree(BACKEND / ".pulumi" / kind / "aks-infiniband" / stack, ignore_errors=True)
    (PROJECT / f"Pulumi.{stack}.yaml").unlink(missing_ok=True)


def command(args: Sequence[str], bin_dir: Path) -> list[str]:
    """The argv that runs `pulumi ARGS` beside the control plane (in its namespace, unless already there)."""
    argv = [str(bin_dir / "pulumi"), *args]
    return argv if cluster.in_netns() else [*cluster.prefix(), *argv]


def run(args: Sequence[str], bin_dir: Path, *, capture: bool = False, timeout: float | None = None,
        extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**environment(bin_dir), **(extra_env or {})}
    prepare(bin_dir, env)
    return subprocess.run(command(args, bin_dir), env=env, cwd=project(), text=True, timeout=timeout,
                          capture_output=capture)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    bin_dir = Path(os.environ["E2E_BIN"]) if os.environ.get("E2E_BIN") else cluster.tools()
    try:
        return run(args, bin_dir).returncode
    except cluster.ClusterError as exc:
        print(f"e2e-pulumi: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
