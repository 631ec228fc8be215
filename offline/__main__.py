"""`python -m offline synth [--stack NAME] [--out DIR] [--no-images] [--no-charts]`: render a stack
offline; `python -m offline policy [--stack NAME ...]`: run the policy pack's rules on the render;
`python -m offline pull-charts --out DIR [--stack NAME]`: download the stack's pinned charts (CI);
`python -m offline docs`: rewrite every generated copy, Pulumi.yaml and the blocks of README.md and docs/
(offline/docblocks.py; `make golden` runs it);
`python -m offline render-inputs`: what the render reads from the reference material (Volcano's release
manifest), fetched into .cache/reference where it is missing there (`make synth` runs it first);
`python -m offline scan-inputs --out DIR`: what checkov scans, the dev and hb renders' objects with each
Volcano Job as its pods (offline/scan.py; `make scan`);
`python -m offline urns --out DIR`: every example stack's resource identities, one file each (offline/urns.py).

`synth` runs the real program under Pulumi's mock engine (no cloud, no CLI, no credentials) and
writes plan.md, manifests/, helm/, timeline.json and the pictures under DIR (default build/), and,
where the pinned Helm and the chart archives are at hand, charts/ (offline/charts.py).
`policy` exits 1 when any stack breaks a mandatory rule (advisory ones are reported); by default it
checks every Pulumi.<stack>.yaml.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pulumi

from components.platform import volcano
from core import pins
from offline import charts, config_groups, engine, reference, scan, synth, urns
from stack_config.stackfile import StackFileError


def _stacks() -> list[str]:
    return sorted(f.name[len("Pulumi."):-len(".yaml")] for f in engine.ROOT.glob("Pulumi.*.yaml"))


def _render(stack: str) -> engine.Rendering | None:
    """The stack's render, or None after saying why on stderr: a missing stack file, or the program's own
    RunError (a bad configuration: its lines name each bad key), printed as is, without a traceback."""
    try:
        return engine.render(stack)
    except FileNotFoundError as e:
        print(f"error: {e}; stacks here: {', '.join(_stacks()) or 'none'}", file=sys.stderr)
        return None
    except StackFileError as e:  # YAML the CLI would refuse too: file, line, column, what to do
        print(f"error: {e}", file=sys.stderr)
        return None
    except pulumi.RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def synth_command(args: argparse.Namespace) -> int:
    began = time.monotonic()
    rendering = _render(args.stack)
    if rendering is None:
        return 2
    files = synth.synthesize(rendering, images=not args.no_images)
    if args.index_groups:
        files = config_groups.as_index(files, config_groups.group_dirs(files))
    note = "charts/ not rendered (--no-charts)"
    if not args.no_charts:
        try:
            rendered = charts.render_all(rendering)
        except charts.Unavailable as e:
            note = f"charts/ not rendered: {e}"
        except charts.HelmFailed as e:  # nothing is written: the render is incomplete
            print(f"error: {_helm_failure(e, rendering)}", file=sys.stderr)
            return 2
        else:
            files.update(charts.files(rendered, charts.kube_version(rendering)))
            note = f"charts/ holds {len(rendered)} Helm releases rendered by Helm {charts.HELM_VERSION}"
    synth.write(files, args.out)
    print(f"rendered stack {args.stack} into {args.out}/: {synth.summary(files)} "
          f"({time.monotonic() - began:.1f} s; nothing deployed); {note}")
    return 0


def _helm_failure(e: charts.HelmFailed, rendering: engine.Rendering) -> str:
    """One line for a chart Helm refused: the config key behind it, when it is the Kubernetes version."""
    if e.kube_version_required:
        return (f"aks-infiniband:kubernetesVersion: got {charts.kube_version(rendering)!r}; a pinned chart requires "
                f"Kubernetes {e.kube_version_required} ({str(e).split(' failed:')[0]}): set a version inside "
                f"that range")
    return str(e).splitlines()[0]


def policy_command(args: argparse.Namespace) -> int:
    from offline import policy_check  # pulumi_policy is a dev requirement, not needed to synth

    failed = False
    print("### Policy pack (policy/rules.py) on the offline render\n")
    for stack in args.stack or _stacks():
        rendering = _render(stack)
        if rendering is None:
            return 2
        found = policy_check.violations(rendering)
        failed = failed or any(v.mandatory for v in found)
        print(policy_check.report(stack, found))
    return 1 if failed else 0


def pull_charts_command(args: argparse.Namespace) -> int:
    rendering = _render(args.stack)
    if rendering is None:
        return 2
    try:
        paths = charts.pull(rendering, args.out)
    except charts.Unavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("\n".join(str(p) for p in paths))
    return 0


def docs_command(args: argparse.Namespace) -> int:
    """Every generated copy (offline/docblocks.py): the files and tables from the code, then the pictures and
    samples from the dev stack's render."""
    from offline import docblocks, reference

    changed = docblocks.sync_files(engine.ROOT) + docblocks.sync(docblocks.tables(), engine.ROOT)
    rendering = _render("dev")
    if rendering is None:
        return 2
    why = reference.unavailable_reason(reference.reference_dir())
    if why:
        print(f"samples left as they are: {why}", file=sys.stderr)
    blocks = docblocks.generated(synth.synthesize(rendering), None if why else reference.reference_dir())
    changed += docblocks.sync(blocks, engine.ROOT)
    print("\n".join(f"updated {p.relative_to(engine.ROOT)}" for p in dict.fromkeys(changed))
          or "generated copies are current")
    return 0


def render_inputs_command(args: argparse.Namespace) -> int:
    """The offline render reads Volcano's release manifest from the reference material and fetches nothing
    itself; a fresh clone has no material yet, so `make synth` gets that one file first (sha256 checked)."""
    needed = frozenset({volcano.cached_path(pins.component("volcano").version, Path("examples")).as_posix()})
    folder = reference.reference_dir()
    missing = sorted(p for p in needed if not (folder / p).is_file())
    if not missing:
        return 0
    if folder != reference.CACHE:  # a copy someone pointed us at: not ours to add to
        print(f"error: {folder} lacks {', '.join(missing)}, which the render applies: {reference.HOW_TO_GET}",
              file=sys.stderr)
        return 2
    failures = reference.fetch(folder, only=frozenset(missing))
    for line in failures:
        print(f"error: {line}; the render applies this file: {reference.HOW_TO_GET}", file=sys.stderr)
    if failures:
        return 1
    print(f"fetched {', '.join(missing)} into {folder} (sha256 checked)")
    return 0


def scan_inputs_command(args: argparse.Namespace) -> int:
    if args.out.exists():
        print(f"error: {args.out} exists; remove it first (checkov would scan what is left there)", file=sys.stderr)
        return 2
    renderings = {}
    for stack in scan.STACKS:
        rendering = _render(stack)
        if rendering is None:
            return 2
        renderings[stack] = rendering
    jobs = scan.write_manifests(args.out, renderings)
    print(f"wrote {args.out}: the objects of {', '.join(scan.STACKS)}, {jobs} Volcano Jobs as their pods")
    return 0


def urns_command(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    for stack in _stacks():
        rendering = _render(stack)
        if rendering is None:
            return 2
        urns.golden_path(args.out, stack).write_text(urns.identity_text(rendering))
    print(f"wrote {args.out}: the resource identities of {', '.join(_stacks())}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("synth", help="render a stack offline into files")
    p.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    p.add_argument("--out", default="build", type=Path, help="output directory (default: build)")
    p.add_argument("--no-images", action="store_true", help="skip graph.mmd and timeline.mmd (the pictures)")
    p.add_argument("--no-charts", action="store_true", help="skip charts/ (helm template of the pinned charts)")
    p.add_argument("--index-groups", action="store_true",
                   help="each ConfigGroup's objects as one sha256 index (the golden render: no copy of upstream)")
    p.set_defaults(run=synth_command)
    q = sub.add_parser("policy", help="run the policy pack's rules on the offline render")
    q.add_argument("--stack", action="append", help="stack name (repeatable; default: every Pulumi.<stack>.yaml)")
    q.set_defaults(run=policy_command)
    c = sub.add_parser("pull-charts", help="download the stack's pinned charts with helm pull (CI; needs network)")
    c.add_argument("--stack", default="dev", help="stack name (default: dev)")
    c.add_argument("--out", required=True, type=Path, help="directory for <chart>-<version>.tgz (AKS_IB_CHARTS)")
    c.set_defaults(run=pull_charts_command)
    d = sub.add_parser("docs", help="rewrite every generated copy: Pulumi.yaml, the tables, pictures and samples "
                       "of README.md and docs/")
    d.set_defaults(run=docs_command)
    r = sub.add_parser("render-inputs", help="fetch what the render reads from the reference material, if missing")
    r.set_defaults(run=render_inputs_command)
    s = sub.add_parser("scan-inputs", help="write what checkov scans: the dev and hb objects, Volcano Jobs as pods")
    s.add_argument("--out", required=True, type=Path, help="directory to create")
    s.set_defaults(run=scan_inputs_command)
    u = sub.add_parser("urns", help="write every example stack's resource identities (URN and parent), one file each")
    u.add_argument("--out", required=True, type=Path, help="directory for <stack>.txt")
    u.set_defaults(run=urns_command)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
