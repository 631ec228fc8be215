"""Docs a reader finishes: no sentence of the README's or docs/' prose runs past MAX_WORDS words.
Prose is what is left without code blocks, tables, headings and HTML comments; inline code counts
as one word and a link as its text. A sentence ends at . ! or ? followed by a capital, a quote or a
bracket; a list item or a paragraph ends one too."""

from __future__ import annotations

import re

from tests.paths import ROOT

MAX_WORDS = 50


def prose(text: str) -> str:
    kept, code = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            code = not code
            continue
        if code or line.lstrip().startswith(("|", "<!--", "#")):
            kept.append("")
            continue
        kept.append(line)
    return "\n".join(kept)


def sentences(text: str) -> list[str]:
    flat = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", re.sub(r"`[^`]*`", "CODE", prose(text)))
    out = []
    for block in re.split(r"\n\s*\n|\n\s*(?:[-*]|\d+\.) ", flat):
        block = re.sub(r"^(?:[-*]|\d+\.) ", "", " ".join(block.split()))
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(\"*])", block) if s]
    return out


def test_no_sentence_in_the_docs_runs_past_the_limit():
    long = [f"{p.relative_to(ROOT)} ({len(s.split())} words): {s[:90]}…"
            for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
            for s in sentences(p.read_text()) if len(s.split()) > MAX_WORDS]
    assert not long, f"{len(long)} sentences over {MAX_WORDS} words; split them:\n" + "\n".join(long)


def test_the_splitter_sees_sentences_lists_and_skips_code_and_tables():
    text = "One two. Three `a b c` four.\n\n- item one\n- item two\n\n```\nnot. prose. here\n```\n| a. | B. |\n"
    assert sentences(text) == ["One two.", "Three CODE four.", "item one", "item two"]
