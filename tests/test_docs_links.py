"""Every relative Markdown link in README.md and docs/**/*.md points at a file or folder that exists.

The docs are split into guides (docs/*.md) and dated reports (docs/reports/*.md) that link to each other and to
their raw JSON in benchmarks/results/; a page moved or renamed without its links would leave a reader at a dead
end, which nothing else would notice. Links to the web (``http:``, ``https:``, ``mailto:``) and in-page anchors
are not checked; a link's own ``#anchor`` is dropped before the file is looked up. Fenced code is skipped.
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


def relative_links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every relative link outside fenced code blocks and inline code spans."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "``", line)):
            target = match.group(1)
            if not EXTERNAL.match(target) and not target.startswith("#"):
                out.append((number, target))
    return out


def broken_links(page: Path) -> list[str]:
    return [f"{page.relative_to(ROOT)}:{number}: {target}" for number, target in relative_links(page.read_text())
            if not (page.parent / target.split("#", 1)[0]).exists()]


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
