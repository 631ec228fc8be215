"""Draw Mermaid files as PNG with Debian's Chromium, headless, at the README's width: to look at the
render's pictures as a reader will (`make pictures`). Not part of the tests: it needs a browser.

    python tools/mermaid/png.py build/graph.mmd build/timeline.mmd --out build/pictures [--width 830]

Mermaid comes from tools/mermaid/node_modules (npm ci --prefix tools/mermaid; pinned in its lock).
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MERMAID_JS = HERE / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: {background}; font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }}
.markdown-body {{ width: {width}px; padding: 16px; box-sizing: border-box; }}
</style></head><body><div class="markdown-body"><pre class="mermaid">{text}</pre></div>
<script src="{js}"></script>
<script>mermaid.initialize({{startOnLoad: true, securityLevel: "strict", theme: "{theme}"}});</script>
</body></html>"""


def _crop(png: Path, background: str) -> None:
    from PIL import Image, ImageChops

    image = Image.open(png).convert("RGB")
    box = ImageChops.difference(image, Image.new("RGB", image.size, background)).getbbox()
    if box:
        image.crop((0, 0, image.width, min(image.height, box[3] + 16))).save(png)


def draw(source: Path, out: Path, width: int, theme: str, chromium: str) -> Path:
    background = "#0d1117" if theme == "dark" else "#ffffff"  # GitHub's page colours
    page = PAGE.format(width=width, text=html.escape(source.read_text()), js=MERMAID_JS.as_uri(), theme=theme,
                       background=background)
    with tempfile.TemporaryDirectory() as tmp:
        page_file = Path(tmp) / "page.html"
        page_file.write_text(page)
        target = out / f"{source.stem}.png"
        subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size={width},4000",
                        "--virtual-time-budget=15000", f"--screenshot={target}", page_file.as_uri()],
                       check=True, capture_output=True, timeout=120)
    _crop(target, background)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("build/pictures"))
    parser.add_argument("--width", type=int, default=830, help="GitHub's README column, in CSS pixels")
    parser.add_argument("--theme", default="default", help="Mermaid theme (GitHub: default, or dark)")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium or not MERMAID_JS.is_file():
        print("error: needs chromium (apt-get install chromium) and Mermaid (npm ci --prefix tools/mermaid)",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for source in args.sources:
        print(draw(source, args.out, args.width, args.theme, chromium))
    return 0


if __name__ == "__main__":
    sys.exit(main())
