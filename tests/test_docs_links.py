"""Every relative Markdown link in README.md and docs/**/*.md points at a file or folder that exists, and a link's
``#anchor`` at a heading of the page it names (or of its own page, for ``[..](#anchor)``).

The docs are split into guides (docs/*.md) and dated reports (docs/reports/*.md) that link to each other and to
their raw JSON in benchmarks/results/; a page moved or renamed, or a section retitled, without its links would
leave a reader at a dead end, which nothing else would notice. Anchors follow GitHub's rule for a heading's id
(``slug``). Links to the web (``http:``, ``https:``, ``mailto:``) are not checked. Fenced code is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

# [text](target) and ![alt](target), the target up to the first space (an optional "title" may follow).
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def relative_links(text: str, anchors: bool = False) -> list[tuple[int, str]]:
    """(line number, target) of every relative link outside fenced code blocks and inline code spans; with
    ``anchors``, in-page ``#anchor`` links too."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "``", line)):
            target = match.group(1)
            if not EXTERNAL.match(target) and (anchors or not target.startswith("#")):
                out.append((number, target))
    return out


def broken_links(page: Path) -> list[str]:
    return [f"{page.relative_to(ROOT)}:{number}: {target}" for number, target in relative_links(page.read_text())
            if not (page.parent / target.split("#", 1)[0]).exists()]


def slug(heading: str) -> str:
    """GitHub's id for a heading: its text (a link's text kept, its target dropped), lower-cased, every character
    but letters, digits, ``_``, ``-`` and spaces removed (backticks, dots, commas, colons, parentheses, ...), each
    space a ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def heading_ids(text: str) -> set[str]:
    """The ids of a page's headings outside fenced code; a repeated id gets ``-1``, ``-2``, ... as on GitHub."""
    ids, seen, fenced = set(), {}, False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        heading = None if fenced else re.match(r"#{1,6} +(.*?)(?: +#+)? *$", line)
        if heading:
            base = slug(heading.group(1))
            ids.add(f"{base}-{seen[base]}" if base in seen else base)
            seen[base] = seen.get(base, 0) + 1
    return ids


def missing_anchors(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of the links whose ``#anchor`` names no heading of the Markdown page they point at."""
    out = []
    for number, target in relative_links(page.read_text(), anchors=True):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path) if path else page
        if anchor and linked.suffix == ".md" and linked.is_file() and anchor not in heading_ids(linked.read_text()):
            out.append((number, target))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_anchors_name_a_heading(page: Path):
    missing = [f"{page.relative_to(ROOT)}:{number}: {target}" for number, target in missing_anchors(page)]
    assert not missing, "links to missing sections:\n" + "\n".join(missing)


def test_anchors_follow_github(tmp_path: Path):
    """The check itself: GitHub's ids for headings with code, punctuation and repeats; a missing one is caught."""
    assert slug("The answer: `new`, `known` or `tie`") == "the-answer-new-known-or-tie"
    assert slug("Growing to a chosen depth, by width (`--depth-at-target`)") == \
        "growing-to-a-chosen-depth-by-width---depth-at-target"
    assert slug("Reading [the report](x.md) again") == "reading-the-report-again"
    assert heading_ids("# A\n## A\n```\n# not a heading\n```\n### B: c_d\n") == {"a", "a-1", "b-c_d"}
    (tmp_path / "there.md").write_text("# Part one\n")
    page = tmp_path / "page.md"
    page.write_text("## Here\n[ok](there.md#part-one) [in](#here) [gone](there.md#part-two) [lost](#nowhere)\n")
    assert missing_anchors(page) == [(2, "there.md#part-two"), (2, "#nowhere")]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    assert not broken_links(page), "links to missing files:\n" + "\n".join(broken_links(page))


def test_a_missing_target_is_reported(tmp_path: Path):
    """The check itself: a link to a missing file is caught, one to an existing file, the web, an anchor or inside
    code is not."""
    (tmp_path / "there.md").write_text("x")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#part) [web](https://x.org/a) [anchor](#top) `[code](gone.md)`\n"
                    "```\n[fenced](gone.md)\n```\n![img](missing.png) [bad](nowhere/else.md)\n")
    assert relative_links(page.read_text()) == [(1, "there.md#part"), (5, "missing.png"), (5, "nowhere/else.md")]
    assert [target for _, target in relative_links(page.read_text())
            if not (page.parent / target.split("#", 1)[0]).exists()] == ["missing.png", "nowhere/else.md"]


def test_the_docs_are_found():
    assert ROOT / "README.md" in PAGES and ROOT / "docs" / "reports" / "README.md" in PAGES
