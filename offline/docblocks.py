"""Every generated copy of a fact, so that none can drift from the code: the blocks of README.md and
docs/ (the render's pictures, the samples of what a run gives back, the tables of the configuration, the
NCCL settings and the compatibility matrix) and the generated files (Pulumi.yaml). One generator:
`python -m offline docs`, run by `make golden`; the tests compare each copy with what it would write
(tests/tooling/test_generated_copies.py, and the tests beside each source).

A block sits between `<!-- generated:NAME start -->` and `<!-- generated:NAME end -->` and holds a
fenced block (```mermaid for `.mmd`, ```text for `.txt`) or, for `.md`, the Markdown itself.

- `graph.mmd`, `timeline.mmd`: the dev stack's pictures (offline/mermaid.py).
- `stack-output.txt`: `pulumi stack output` as the CLI prints it, for a stack of 2 × ND96asr_v4 whose
  collect step read Azure's published 2-node A100 log (reference material, Azure/aks-rdma-infiniband
  tests/expected-output.md): rendered offline, with the mocks' placeholders for what only Azure knows.
- `verdict.txt`: `python -m verify report` on that log, from its figures on.
- `config-table.md` (docs/configuration.md): every configuration key, from `stack_config.SCHEMA`.
- `nccl-settings.md` (docs/fabric-test.md): the job's NCCL environment, from components/fabric/nccl_settings.py.
- `compatibility-matrix.md` (docs/upgrading-pins.md): `pins.MATRIX` and where upstream states support.
- `egress-table.md` (docs/enterprise-deployment.md): the firewall's allow-list, from core/egress.py.
- the file Pulumi.yaml: its `config:` block declares every key of `stack_config.SCHEMA`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verify.result import FabricResult

BLOCK = re.compile(r"(<!-- generated:(?P<name>[a-z.-]+) start -->\n)(?P<body>.*?)(<!-- generated:(?P=name) end -->)",
                   re.S)
SAMPLE_SKU = "Standard_ND96asr_v4"
SAMPLE_LOG = "nccl-tests/sample-output_azure-aks-rdma-infiniband_expected-output.txt"


def fenced(name: str, content: str) -> str:
    """A block's text: Markdown as it is, anything else fenced."""
    if name.endswith(".md"):
        return content
    return f"```{'mermaid' if name.endswith('.mmd') else 'text'}\n{content}```\n"


def tables() -> dict[str, str]:
    """The Markdown blocks generated from the code's tables (no render needed)."""
    from components.fabric import nccl_settings
    from core import egress, pins
    from stack_config import docs

    return {"config-table.md": docs.markdown_table(), "nccl-settings.md": nccl_settings.markdown_table(),
            "compatibility-matrix.md": pins.matrix_markdown() + "\n", "egress-table.md": egress.markdown_table()}


def files() -> dict[str, str]:
    """The generated files, by their path from the repository's root, and their content."""
    from stack_config import docs

    return {"Pulumi.yaml": docs.pulumi_yaml()}


def stale_files(root: Path) -> list[str]:
    """The generated files under `root` that differ from what `files()` would write."""
    return [name for name, text in files().items() if (root / name).read_text() != text]


def sync_files(root: Path) -> list[Path]:
    """Rewrite the generated files under `root`; returns those that changed."""
    changed = []
    for name, text in files().items():
        if (root / name).read_text() != text:
            (root / name).write_text(text)
            changed.append(root / name)
    return changed


def embedded(text: str, blocks: Mapping[str, str]) -> str:
    """`text` with each marked block whose name is in `blocks` holding that content (others unchanged)."""
    def put(m: re.Match[str]) -> str:
        name = m.group("name")
        return m.group(0) if name not in blocks else f"{m.group(1)}{fenced(name, blocks[name])}{m.group(4)}"

    return BLOCK.sub(put, text)


def names(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


def documents(root: Path) -> list[Path]:
    """The Markdown files that may hold generated blocks: the README and docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def sync(blocks: Mapping[str, str], root: Path) -> list[Path]:
    """Rewrite the blocks under `root`; returns the files that changed."""
    changed = []
    for path in documents(root):
        text = path.read_text()
        new = embedded(text, blocks)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def pictures(files: Mapping[str, bytes]) -> dict[str, str]:
    """The pictures of a render (offline.synth.synthesize's files)."""
    return {name: files[name].decode() for name in ("graph.mmd", "timeline.mmd")}


def _report(log: str) -> tuple[FabricResult, str]:
    from verify.nccl import parse
    from verify.report import summary, table
    from verify.verdict import judge

    result = parse(log)
    judgement = judge(result, sku=SAMPLE_SKU)
    return summary(result, judgement), table(result, judgement)


def verdict_sample(reference: Path) -> str:
    """`python -m verify report <Azure's A100 log> --sku ND96asr_v4`, from the figures on (the rows are left out)."""
    _, text = _report((reference / SAMPLE_LOG).read_text())
    return text[text.index("ranks:"):]


def _cli_value(value: Any) -> str:
    """A stack output as `pulumi stack output` shows it: strings bare, everything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def stack_output_sample(reference: Path) -> str:
    """`pulumi stack output` of a 2 × ND96asr_v4 stack whose certifier judged Azure's published log:
    the dev stack's configuration with that size, rendered offline (engine.render), the read of the
    certifier's result ConfigMap answering with the report's JSON. Secret values as the CLI shows them,
    `[secret]`."""
    from offline import engine
    from offline.mocks import OfflineMocks

    result, _ = _report((reference / SAMPLE_LOG).read_text())

    class Collected(OfflineMocks):
        def new_resource(self, args):  # type: ignore[no-untyped-def]
            rid, state = super().new_resource(args)
            if args.typ == "kubernetes:core/v1:ConfigMap" and args.name == "fabric-check-result":
                state["data"] = {"result.json": json.dumps(result.to_json())}
            return rid, state

    config = engine.stack_file_config("dev")
    config["aks-infiniband:ibPool"] = {**config["aks-infiniband:ibPool"], "vmSize": SAMPLE_SKU}
    rendering = engine.render("dev", config=config, monitor=engine.RecordingMonitor(Collected()))
    rows = [(k, "[secret]" if k in rendering.secret_outputs else _cli_value(v))
            for k, v in sorted(rendering.outputs.items())]
    width = max(len(k) for k, _ in rows)
    lines = [f"Current stack outputs ({len(rows)}):", f"    {'OUTPUT':<{width}}  VALUE"]
    lines += [f"    {k:<{width}}  {v}" for k, v in rows]
    return "\n".join(lines) + "\n"


def generated(files: Mapping[str, bytes], reference: Path | None) -> dict[str, str]:
    """Every block's content: the pictures from `files` (the dev stack's render), and the samples when
    the reference material (Azure's log) is at hand."""
    blocks = pictures(files)
    if reference is not None:
        blocks["stack-output.txt"] = stack_output_sample(reference)
        blocks["verdict.txt"] = verdict_sample(reference)
    return blocks
