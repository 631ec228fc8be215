"""The upstream reference material the fidelity tests read (CRDs, chart values, schemas, example jobs,
Azure's configs, real nccl-tests outputs): where it is, and how a clone of this repository gets it.

`reference.lock.json` (next to this file) lists every file with where it comes from and its sha256:

    {"path": ..., "url": raw file at a pinned commit, "sha256": ...}            a byte-identical copy
    {"path": ..., "url": ..., "lines": [first, last], "header": ..., "sha256": ...}
                                        an excerpt: those lines of the upstream file under a SOURCE line
    {"path": ..., "copy": "tests/data/reference/...", "sha256": ...}
                                        a log with no fetchable upstream, kept in this repository
    {"path": ..., "helm_pull": true}    a chart archive: `python -m offline pull-charts` (`helm pull` from
                                        the chart's repository; not pinned by hash: docs/ci-and-previews.md)

`python -m offline.reference fetch --out DIR` (`make reference`) downloads what is missing or wrong
into DIR (default `.cache/reference`) and checks each sha256 before writing it; `check --dir DIR`
checks a folder without the network. `reference_dir()` is where the tests and the chart render look,
and where the offline render reads Volcano's release manifest (it fetches nothing; without that file
`make synth` stops): $AKS_IB_REFERENCE, else ../shared/reference (the project's shared copy), else
`.cache/reference`. An air-gapped site fetches from its own mirror: $AKS_IB_REFERENCE_MIRROR (`mirrored`),
with every sha256 checked as for the upstream URLs (docs/ci-and-previews.md, "Air-gapped").
Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = Path(__file__).with_name("reference.lock.json")
CACHE = ROOT / ".cache" / "reference"
SHARED = ROOT.parent / "shared" / "reference"
HOW_TO_GET = "run `make reference` (downloads the pinned upstream files, about 5 MB; needs network) " \
             "or set AKS_IB_REFERENCE to a copy"


def reference_dir() -> Path:
    """Where the reference material is looked for: $AKS_IB_REFERENCE, ../shared/reference, .cache/reference."""
    if os.environ.get("AKS_IB_REFERENCE"):
        return Path(os.environ["AKS_IB_REFERENCE"])
    return SHARED if SHARED.is_dir() else CACHE


@dataclass(frozen=True)
class Entry:
    path: str
    sha256: str | None = None
    url: str | None = None
    lines: tuple[int, int] | None = None  # an excerpt: 1-based, inclusive
    header: str = ""  # the SOURCE line written above an excerpt
    copy: str | None = None  # a file of this repository
    helm_pull: bool = False

    @property
    def pinned(self) -> bool:
        return self.sha256 is not None


def entries(lock: Path = LOCK) -> list[Entry]:
    data = json.loads(lock.read_text())
    return [Entry(**{**e, "lines": tuple(e["lines"]) if "lines" in e else None}) for e in data["entries"]]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def problems(folder: Path, lock: Path = LOCK, hashes: bool = True) -> list[str]:
    """What is missing or differs in `folder`, one line per file (empty: complete and intact). Chart
    archives are only required to exist (their hash is not pinned); `hashes=False` only looks for files."""
    out: list[str] = []
    for e in entries(lock):
        target = folder / e.path
        if not target.is_file():
            out.append(f"{e.path}: missing")
        elif hashes and e.pinned and _sha256(target.read_bytes()) != e.sha256:
            out.append(f"{e.path}: sha256 {_sha256(target.read_bytes())}, expected {e.sha256}")
    return out


def unavailable_reason(folder: Path) -> str | None:
    """Why the tests cannot use `folder` (absent, or files missing), with how to get it; None when they can.
    Only looks for the files (hashes: `check`); chart archives are the chart tests' own business."""
    if not folder.is_dir():
        return f"upstream reference material not found at {folder}: {HOW_TO_GET}"
    missing = [p for p in problems(folder, hashes=False) if not p.startswith("charts/")]
    if missing:
        return (f"upstream reference material at {folder} is incomplete ({len(missing)} files missing, e.g. "
                f"{missing[0]}): {HOW_TO_GET}")
    return None


MIRROR_ENV = "AKS_IB_REFERENCE_MIRROR"


def mirrored(url: str) -> str:
    """Where a pinned URL is read from: <mirror>/<host>/<path> under $AKS_IB_REFERENCE_MIRROR (an http(s)
    server or a file:// folder laid out as the URLs are), else the URL itself. The hash is the same either way."""
    mirror = os.environ.get(MIRROR_ENV, "").rstrip("/")
    return f"{mirror}/{url.split('://', 1)[1]}" if mirror and "://" in url else url


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (https URLs from the lock file)
        return response.read()


def content(e: Entry, download: Callable[[str], bytes] | None = None, root: Path = ROOT) -> bytes:
    """The file's bytes as the lock file says to make them; raises ValueError on a hash mismatch."""
    download = download or _download
    url = mirrored(e.url or "")
    if e.copy:
        data = (root / e.copy).read_bytes()
    elif e.lines:
        upstream = download(url).decode("utf-8").splitlines(keepends=True)
        first, last = e.lines
        data = (e.header + "".join(upstream[first - 1:last])).encode("utf-8")
    else:
        data = download(url)
    if _sha256(data) != e.sha256:
        raise ValueError(f"what {url if e.url else e.copy} gave has sha256 {_sha256(data)}, expected {e.sha256}")
    return data


def fetch(folder: Path, download: Callable[[str], bytes] | None = None, lock: Path = LOCK,
          only: frozenset[str] | None = None) -> list[str]:
    """Write every pinned file that is missing or wrong under `folder` (of `only`'s paths, where given),
    each checked before it is written. Returns the failures, one line each (chart archives are left to
    `offline pull-charts`)."""
    failures: list[str] = []
    for e in entries(lock):
        target = folder / e.path
        if only is not None and e.path not in only:
            continue
        if not e.pinned or (target.is_file() and _sha256(target.read_bytes()) == e.sha256):
            continue
        try:
            data = content(e, download)
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            failures.append(f"{e.path}: {exc}")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, target)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline.reference", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download the pinned files that are missing or wrong, checking each sha256")
    f.add_argument("--out", type=Path, default=CACHE, help=f"folder (default {CACHE.relative_to(ROOT)})")
    c = sub.add_parser("check", help="check a folder against the lock file, without the network")
    c.add_argument("--dir", type=Path, default=None, help="folder (default: where the tests look)")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        failures = fetch(args.out)
        for line in failures:
            print(f"error: {line}", file=sys.stderr)
        if failures:
            print(f"{len(failures)} files not fetched into {args.out} (no network? a proxy?); the tests that need "
                  "them skip, saying why (and without Volcano's manifest `make synth` stops)", file=sys.stderr)
            return 1
        print(f"reference material in {args.out}: every pinned file present, sha256 checked")
        return 0
    folder = args.dir or reference_dir()
    found = problems(folder)
    for line in found:
        print(f"{folder}/{line}", file=sys.stderr)
    print(f"{folder}: " + (f"{len(found)} problems" if found else "complete, every sha256 as pinned"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
