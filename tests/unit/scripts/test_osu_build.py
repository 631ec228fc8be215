"""The CPU-only fabric test gets its OSU binaries from the workers' `osu-build` initContainer
(scripts/build-osu.sh): the default image has none (coreweave/nccl-tests deletes HPC-X's Open MPI
tree, OSU included). Here the script runs for real, against a fake tarball served by a stub curl or
wget. The launcher is run too, with stub ssh and mpirun, to show it finds the binaries where they end up.
The wiring in the render (Pulumi.hb.yaml: the initContainer with the pinned URL and sha256, the shared
emptyDir mounted in both containers): tests/stack/components/test_p2p_job.py."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from components.fabric import mpi_job
from components.fabric import p2p_job as p2p

BENCHES = ("osu_bw", "osu_latency")
# what the script needs from the image besides a downloader (curl / wget are added per test)
TOOLS = ("bash", "mktemp", "sha256sum", "tar", "gzip", "find", "sort", "grep", "dirname", "basename", "mkdir",
         "ln", "readlink", "rm", "date", "cat", "cut", "tail", "wc", "nproc", "make", "sh", "cp", "chmod", "tr",
         "install", "test")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("make") is None,
                                reason="bash and make are needed to run the build script")


# --- the script, run for real ------------------------------------------------------------------
def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


FAKE_CONFIGURE = r"""#!/bin/sh
# a stand-in for OSU's configure: records its arguments, writes a Makefile that "builds" two scripts
# and installs them where OSU 7.x does
prefix=
for a in "$@"; do case "$a" in --prefix=*) prefix="${a#--prefix=}";; esac; done
[ -n "$prefix" ] || { echo "configure: error: no --prefix" >&2; exit 1; }
printf '%s\n' "$@" > configure.args
for b in osu_bw osu_latency; do printf '#!/bin/sh\necho "# OSU MPI %s fake v7.5"\n' "$b" > "$b.in"; done
dest="$prefix/libexec/osu-micro-benchmarks/mpi/pt2pt/standard"
T=$(printf '\t')
cat > Makefile <<EOF
all: osu_bw osu_latency
osu_bw osu_latency:
${T}cp \$@.in \$@ && chmod +x \$@
install: all
${T}mkdir -p $dest $prefix/share
${T}cp osu_bw osu_latency $dest/
${T}cp configure.args $prefix/share/
EOF
"""


def fake_tarball(tmp_path: Path, configure: str = FAKE_CONFIGURE) -> Path:
    """osu-micro-benchmarks-7.5/ with a configure that writes a Makefile making fake osu_bw/osu_latency."""
    out = tmp_path / "osu-micro-benchmarks-7.5.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for name, text in {"configure": configure, "README": "fake OSU\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"osu-micro-benchmarks-7.5/{name}")
            info.size, info.mode = len(data), 0o755 if name == "configure" else 0o644
            tar.addfile(info, io.BytesIO(data))
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


STUB_DOWNLOADER = """#!/bin/sh
# stub {name}: logs the URL, "downloads" $FAKE_TARBALL to the -o / -O file (or fails with $FAKE_FAIL)
out=; url=
while [ $# -gt 0 ]; do
  case "$1" in -o|-O) out="$2"; shift;; -*) ;; *) url="$1";; esac
  shift
done
echo "{name} $url" >> "$CALLS"
[ -z "${{FAKE_FAIL:-}}" ] || exit 22
cp "$FAKE_TARBALL" "$out"
"""


class Env:
    """A sandbox: a bin dir with only the tools named (so curl or wget can be absent), a fake MPI,
    a stub downloader, the shared emptyDir's stand-in."""

    def __init__(self, tmp_path: Path, downloaders: tuple[str, ...] = ("curl",)):
        self.root = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        for tool in TOOLS:
            if found := shutil.which(tool):
                (self.bin / tool).symlink_to(found)
        _executable(self.bin / "sleep", "#!/bin/sh\nexit 0\n")  # backoff without waiting
        for d in downloaders:
            _executable(self.bin / d, STUB_DOWNLOADER.format(name=d))
        self.mpi_home = tmp_path / "mpi"
        for wrapper in ("mpicc", "mpicxx"):
            _executable(self.mpi_home / "bin" / wrapper, "#!/bin/sh\nexit 0\n")
        self.calls = tmp_path / "downloads.log"
        self.calls.touch()
        self.shared = tmp_path / "opt-osu"  # the emptyDir
        self.bin_dir, self.prefix = self.shared / "bin", self.shared / "install"
        self.tarball = fake_tarball(tmp_path)

    def run(self, **overrides: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": str(self.bin), "HOME": str(self.root), "TMPDIR": str(self.root),
            "OSU_URL": p2p.OSU_URL, "OSU_SHA256": sha256(self.tarball),
            "OSU_DOWNLOAD_ATTEMPTS": str(p2p.OSU_DOWNLOAD_ATTEMPTS),
            "OSU_PREBUILT_DIR": str(self.root / "image" / "hpcx-osu"),
            "OSU_PREFIX": str(self.prefix), "OSU_BIN_DIR": str(self.bin_dir), "MPI_HOME": str(self.mpi_home),
            "CALLS": str(self.calls), "FAKE_TARBALL": str(self.tarball), **overrides,
        }
        return subprocess.run([str(self.bin / "bash"), str(p2p.BUILD_SCRIPT)], env=env, capture_output=True,
                              text=True, timeout=120, cwd=self.root)

    def downloads(self) -> list[str]:
        return self.calls.read_text().splitlines()


def test_build_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(p2p.BUILD_SCRIPT)], check=True)


@pytest.mark.parametrize("downloader", ["curl", "wget"])
def test_builds_from_the_verified_tarball_into_the_fixed_directory(tmp_path, downloader):
    env = Env(tmp_path, downloaders=(downloader,))
    done = env.run()
    assert done.returncode == 0, done.stderr
    assert env.downloads() == [f"{downloader} {p2p.OSU_URL}"]
    assert "sha256 verified" in done.stderr
    standard = env.prefix / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt" / "standard"
    for bench in BENCHES:
        installed = env.bin_dir / bench
        assert os.access(installed, os.X_OK), bench
        assert installed.resolve() == (standard / bench).resolve()
        assert f"OSU MPI {bench}" in subprocess.run([str(installed)], capture_output=True, text=True).stdout
    # built with the image's MPI compiler wrappers, installed under the prefix on the emptyDir
    args = (env.prefix / "share" / "configure.args").read_text().splitlines()
    assert f"--prefix={env.prefix}" in args
    assert f"CC={env.mpi_home}/bin/mpicc" in args and f"CXX={env.mpi_home}/bin/mpicxx" in args
    # the build tree is gone; only the emptyDir keeps something
    assert not list(tmp_path.glob("osu-build.*"))


def test_a_wrong_checksum_fails_loudly_and_installs_nothing(tmp_path):
    env = Env(tmp_path)
    wrong = "0" * 64
    done = env.run(OSU_SHA256=wrong)
    assert done.returncode == 5, done.stderr
    assert "sha256 mismatch" in done.stderr and wrong in done.stderr and sha256(env.tarball) in done.stderr
    assert env.downloads() == [f"curl {p2p.OSU_URL}"]  # it did download: the check is what refused
    assert not env.shared.exists()  # neither the prefix nor the bin dir was created
    assert not list(tmp_path.glob("osu-build.*"))


def test_an_image_with_osu_is_used_as_is_without_download(tmp_path):
    env = Env(tmp_path, downloaders=())  # no curl, no wget: an air-gapped image of your own
    prebuilt = tmp_path / "image" / "hpcx-osu"
    for bench in BENCHES:
        _executable(prebuilt / bench, "#!/bin/sh\necho prebuilt\n")
    done = env.run()
    assert done.returncode == 0, done.stderr
    assert env.downloads() == []
    for bench in BENCHES:
        assert (env.bin_dir / bench).resolve() == (prebuilt / bench).resolve()
    assert not env.prefix.exists()


def test_a_partial_prebuilt_directory_is_not_used(tmp_path):
    env = Env(tmp_path)
    _executable(tmp_path / "image" / "hpcx-osu" / "osu_bw", "#!/bin/sh\n")  # osu_latency missing
    done = env.run()
    assert done.returncode == 0, done.stderr
    assert env.downloads() == [f"curl {p2p.OSU_URL}"]
    assert (env.bin_dir / "osu_latency").resolve().is_relative_to(env.prefix.resolve())


@pytest.mark.parametrize(("overrides", "downloaders", "code", "message"), [
    ({"OSU_SHA256": "1cf84ac5"}, ("curl",), 2, "64 hex digits"),
    ({"OSU_BIN_DIR": ""}, ("curl",), 2, "OSU_BIN_DIR is not set"),
    ({"OSU_DOWNLOAD_ATTEMPTS": ""}, ("curl",), 2, "OSU_DOWNLOAD_ATTEMPTS is not set"),  # the job's, no default
    ({"MPI_HOME": "/nonexistent"}, ("curl",), 2, "no mpicc"),
    ({}, (), 3, "neither curl nor wget"),
    ({"FAKE_FAIL": "1", "OSU_DOWNLOAD_ATTEMPTS": "3"}, ("wget",), 4, "failed 3 times"),
])
def test_failures_have_their_documented_exit_status(tmp_path, overrides, downloaders, code, message):
    env = Env(tmp_path, downloaders=downloaders)
    done = env.run(**overrides)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert not (env.bin_dir / "osu_bw").exists()
    expected_downloads = 3 if "FAKE_FAIL" in overrides else 0
    assert len(env.downloads()) == expected_downloads


def test_a_failing_build_shows_its_output_and_exits_6(tmp_path):
    env = Env(tmp_path)
    broken = "#!/bin/sh\necho 'configure: error: C compiler cannot create executables'\nexit 1\n"
    env.tarball = fake_tarball(tmp_path, broken)
    done = env.run()
    assert done.returncode == 6, done.stderr
    assert "C compiler cannot create executables" in done.stderr and "configure" in done.stderr
    assert not (env.bin_dir / "osu_bw").exists()


def test_the_pins_live_in_the_component_not_the_script():
    text = p2p.BUILD_SCRIPT.read_text()
    assert p2p.OSU_SHA256 not in text and p2p.OSU_URL not in text and "mvapich" not in text
    assert p2p.OSU_URL.startswith("https://") and p2p.OSU_URL.endswith(f"-{p2p.OSU_VERSION}.tar.gz")
    assert len(p2p.OSU_SHA256) == 64 and int(p2p.OSU_SHA256, 16) >= 0


# --- the launcher finds the binaries on the workers ----------------------------------------------
STUB_SSH = """#!/bin/bash
# stub ssh: `ssh [opts] HOST CMD...` runs CMD here, with the worker's view of OSU_DIR ($WORKERS/HOST)
while [[ "$1" == -* ]]; do shift 2; done
host=$1; shift
echo "ssh $host $*" >> "$CALLS"
args=("${@//$OSU_DIR/$WORKERS/$host$OSU_DIR}")
"${args[@]}"
"""
STUB_MPIRUN = """#!/bin/bash
echo "mpirun $*" >> "$CALLS"
echo "# OSU MPI ${@: -1} fake"
"""


def _launcher_env(tmp_path: Path, workers_with_osu: tuple[str, ...]) -> tuple[dict[str, str], Path]:
    bindir = tmp_path / "bin"
    _executable(bindir / "ssh", STUB_SSH)
    _executable(bindir / "mpirun", STUB_MPIRUN)
    hostfile = tmp_path / "mpiworker.host"
    hostfile.write_text("w-0\nw-1\n")
    for host in workers_with_osu:
        for bench in BENCHES:
            _executable(tmp_path / "workers" / host / p2p.OSU_DIR.lstrip("/") / bench, "#!/bin/sh\n")
    calls = tmp_path / "calls.log"
    calls.touch()
    # what the job sets (components/fabric/p2p_job.py, mpi_job.launcher_env), with this fake cluster's hostfile
    env = {**mpi_job.launcher_env(), "OSU_DIR": p2p.OSU_DIR, "OSU_BW_ARGS": "", "OSU_LATENCY_ARGS": "",
           "PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path), "CALLS": str(calls),
           "WORKERS": str(tmp_path / "workers"), "HOSTFILE": str(hostfile),
           "SSH_WAIT_SECONDS": "5", "SSH_POLL_SECONDS": "0", "UCX_TLS": "rc,self"}
    return env, calls


def test_launcher_checks_the_workers_and_runs_the_binaries_there(tmp_path):
    env, calls = _launcher_env(tmp_path, ("w-0", "w-1"))
    done = subprocess.run(["bash", str(p2p.LAUNCHER_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    runs = [line for line in calls.read_text().splitlines() if line.startswith("mpirun")]
    assert [r.split()[-1] for r in runs] == [f"{p2p.OSU_DIR}/osu_bw", f"{p2p.OSU_DIR}/osu_latency"]


@pytest.mark.parametrize("name", ["HOSTFILE", "MPI_HOME", "SSH_POLL_SECONDS", "POD_IFNAME", "OSU_BW_ARGS"])
def test_launcher_has_no_defaults_of_its_own_and_names_a_missing_input(tmp_path, name):
    env, calls = _launcher_env(tmp_path, ("w-0", "w-1"))
    del env[name]
    done = subprocess.run(["bash", str(p2p.LAUNCHER_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"error: {name} is not set" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "mpirun" not in calls.read_text()


def test_launcher_refuses_a_worker_without_the_binaries(tmp_path):
    env, calls = _launcher_env(tmp_path, ("w-0",))
    done = subprocess.run(["bash", str(p2p.LAUNCHER_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "worker w-1" in done.stderr and "osu-build" in done.stderr
    assert "mpirun" not in calls.read_text()
