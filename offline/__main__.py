"""`python -m offline synth [--stack NAME] [--out DIR] [--no-images]`: render a stack offline.

Runs the real program under Pulumi's mock engine (no cloud, no CLI, no credentials) and writes
plan.md, manifests/, helm/, timeline.json and the pictures under DIR (default build/).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from offline import engine, synth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("synth", help="render a stack offline into files")
    p.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    p.add_argument("--out", default="build", type=Path, help="output directory (default: build)")
    p.add_argument("--no-images", action="store_true", help="skip graph.svg and timeline.svg")
    args = parser.parse_args(argv)

    began = time.monotonic()
    try:
        rendering = engine.render(args.stack)
    except FileNotFoundError as e:
        stacks = sorted(f.name[len("Pulumi."):-len(".yaml")] for f in engine.ROOT.glob("Pulumi.*.yaml"))
        print(f"error: {e}; stacks here: {', '.join(stacks) or 'none'}", file=sys.stderr)
        return 2
    files = synth.synthesize(rendering, images=not args.no_images)
    synth.write(files, args.out)
    print(f"rendered stack {args.stack} into {args.out}/: {synth.summary(files)} "
          f"({time.monotonic() - began:.1f} s; nothing deployed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
