#!/usr/bin/env bash
# Puts OSU `osu_bw` and `osu_latency` into OSU_BIN_DIR for the CPU-only fabric test (HB / HX sizes).
# Runs as the `osu-build` initContainer of each `mpiworker` pod, in the worker's own image; OSU_BIN_DIR
# is on an emptyDir that the worker container mounts at the same path, so mpirun (started from the
# `mpimaster` pod) finds the binaries there. Mounted from the `<job>-osu-build` ConfigMap.
#
# Why: the default image (CoreWeave nccl-tests) deletes HPC-X's Open MPI tree, OSU included, and
# rebuilds Open MPI without it. So, unless the image has OSU at OSU_PREBUILT_DIR already (then that
# is linked and nothing is downloaded: the path for air-gapped clusters), OSU is built from the
# official tarball: downloaded with curl or wget (bounded attempts and timeouts), its sha256 checked
# before anything is unpacked, configured with the image's MPI compiler wrappers, built, installed
# under OSU_PREFIX; the two binaries are then found under the prefix (7.x installs them under
# libexec/osu-micro-benchmarks/mpi/pt2pt/standard) and linked into OSU_BIN_DIR.
#
# Inputs (environment; the job sets them - the pins live in components/fabric/p2p_job.py only):
#   OSU_URL, OSU_SHA256   the tarball and its sha256 (64 hex digits)
#   OSU_BIN_DIR           where osu_bw and osu_latency end up (on the shared emptyDir)
#   OSU_PREFIX            install prefix (on the same emptyDir)
#   OSU_PREBUILT_DIR      optional: an image directory that may already hold osu_bw and osu_latency
#   MPI_HOME              optional: Open MPI's prefix; its bin/mpicc (else mpicc on PATH) is CC
#   OSU_DOWNLOAD_ATTEMPTS tries of the download (each: 30 s to connect, 600 s at most)
# Progress goes to stderr; the configure/make output only when a step fails (its last 60 lines).
#
# Exit status: 0 both binaries are in OSU_BIN_DIR; 2 a missing or malformed input, or no MPI
# compiler; 3 neither curl nor wget in the image; 4 download failed after every attempt; 5 checksum
# mismatch (nothing is unpacked or installed); 6 configure, make or make install failed; 7 the
# install has no (or more than one candidate) osu_bw / osu_latency.
set -euo pipefail

log() { echo "[build-osu $(date -u +%H:%M:%S)] $*" >&2; }
die() { local code=$1; shift; log "error: $*"; exit "$code"; }
BENCHES=(osu_bw osu_latency)

[ -n "${OSU_BIN_DIR:-}" ] || die 2 "OSU_BIN_DIR is not set"

link_into_bin_dir() {  # link_into_bin_dir <dir of osu_bw> <dir of osu_latency>
  mkdir -p "$OSU_BIN_DIR"
  ln -sfn "$1/osu_bw" "$OSU_BIN_DIR/osu_bw"
  ln -sfn "$2/osu_latency" "$OSU_BIN_DIR/osu_latency"
  for b in "${BENCHES[@]}"; do [ -x "$OSU_BIN_DIR/$b" ] || die 7 "$OSU_BIN_DIR/$b is not executable"; done
  log "ready: $OSU_BIN_DIR/osu_bw -> $(readlink "$OSU_BIN_DIR/osu_bw"), $OSU_BIN_DIR/osu_latency -> $(readlink "$OSU_BIN_DIR/osu_latency")"
}

# 1. An image that ships OSU is used as is.
prebuilt="${OSU_PREBUILT_DIR:-}"
if [ -n "$prebuilt" ] && [ -x "$prebuilt/osu_bw" ] && [ -x "$prebuilt/osu_latency" ]; then
  log "the image has OSU at $prebuilt: linking it, nothing downloaded or built"
  link_into_bin_dir "$prebuilt" "$prebuilt"
  exit 0
fi
log "no osu_bw/osu_latency at ${prebuilt:-(OSU_PREBUILT_DIR unset)}: building OSU from source"

# 2. Inputs of the build, checked before any network traffic.
url="${OSU_URL:-}"; sha="${OSU_SHA256:-}"; prefix="${OSU_PREFIX:-}"
[ -n "$url" ] || die 2 "OSU_URL is not set"
[[ "$sha" =~ ^[0-9a-fA-F]{64}$ ]] || die 2 "OSU_SHA256 must be 64 hex digits, got '${sha}'"
[ -n "$prefix" ] || die 2 "OSU_PREFIX is not set"
attempts="${OSU_DOWNLOAD_ATTEMPTS:-}"
[ -n "$attempts" ] || die 2 "OSU_DOWNLOAD_ATTEMPTS is not set"
[[ "$attempts" =~ ^[1-9][0-9]*$ ]] || die 2 "OSU_DOWNLOAD_ATTEMPTS must be a positive integer, got '$attempts'"

mpicc="" mpicxx=""
if [ -n "${MPI_HOME:-}" ] && [ -x "$MPI_HOME/bin/mpicc" ]; then
  mpicc="$MPI_HOME/bin/mpicc"
  if [ -x "$MPI_HOME/bin/mpicxx" ]; then mpicxx="$MPI_HOME/bin/mpicxx"; fi
elif command -v mpicc >/dev/null 2>&1; then
  mpicc="$(command -v mpicc)"
  mpicxx="$(command -v mpicxx 2>/dev/null || true)"
fi
[ -n "$mpicc" ] || die 2 "no mpicc in ${MPI_HOME:-(MPI_HOME unset)}/bin or on PATH: the image needs an MPI with its compiler wrappers"

if command -v curl >/dev/null 2>&1; then
  fetch() { curl -fsSL --connect-timeout 30 --max-time 600 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget -q --timeout=30 --tries=1 -O "$2" "$1"; }
else
  die 3 "neither curl nor wget in this image: cannot download $url (use an image with OSU at OSU_PREBUILT_DIR)"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/osu-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tarball="$work/$(basename "$url")"

# 3. Download, bounded.
n=1
until fetch "$url" "$tarball"; do
  [ "$n" -lt "$attempts" ] || die 4 "download of $url failed $attempts times (does the pod have egress to that host?)"
  log "download attempt $n of $attempts failed; retrying in $((5 * n)) s"
  sleep $((5 * n))
  n=$((n + 1))
done
log "downloaded $url ($(wc -c <"$tarball") bytes)"

# 4. Verify before unpacking: a mismatch leaves nothing behind.
if ! echo "$sha  $tarball" | sha256sum -c --status -; then
  got="$(sha256sum "$tarball" | cut -d' ' -f1)"
  rm -f "$tarball"
  die 5 "sha256 mismatch for $url: expected $sha, got $got; not unpacked, nothing installed"
fi
log "sha256 verified: $sha"

# 5. Build and install.
src="$work/src"; buildlog="$work/build.log"
mkdir -p "$src"
tar -xzf "$tarball" -C "$src" --strip-components=1
step() {  # step <name> <command...>: output to the build log; on failure its tail and exit 6
  local name=$1; shift
  log "$name"
  if ! (cd "$src" && "$@") >>"$buildlog" 2>&1; then
    tail -n 60 "$buildlog" >&2 || true
    die 6 "$name failed (last lines of its output above)"
  fi
}
configure_args=(--prefix="$prefix" CC="$mpicc")
if [ -n "$mpicxx" ]; then configure_args+=(CXX="$mpicxx"); fi
step "configure (CC=$mpicc${mpicxx:+ CXX=$mpicxx})" ./configure "${configure_args[@]}"
step "make -j$(nproc)" make -j"$(nproc)"
step "make install" make install

# 6. Find the binaries under the prefix (their subdirectory differs between OSU releases).
find_installed() {  # find_installed <name>: the one installed executable of that name (pt2pt/standard preferred)
  local found
  mapfile -t found < <(find "$prefix" -type f -name "$1" -perm -u+x | sort)
  if [ "${#found[@]}" -gt 1 ]; then
    mapfile -t found < <(printf '%s\n' "${found[@]}" | grep '/pt2pt/standard/' || true)
  fi
  [ "${#found[@]}" -eq 1 ] || die 7 "expected one installed $1 under $prefix, found ${#found[@]}: $(find "$prefix" -type f -name "$1" | tr '\n' ' ')"
  dirname "${found[0]}"
}
bw_dir="$(find_installed osu_bw)"
lat_dir="$(find_installed osu_latency)"
link_into_bin_dir "$bw_dir" "$lat_dir"
