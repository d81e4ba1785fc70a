"""The docs hold together without a cluster: every relative link in README.md, docs/**/*.md and services/**/README.md
points at a file that exists (and, for a `#fragment` into a Markdown file, at one of its headings), the README
stays one page, and it links every page of docs/."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "services").rglob("README.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def links(page: pathlib.Path) -> list:
    """Relative link targets of a page, code blocks left out."""
    text = FENCE.sub("", page.read_text())
    return [target for target in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def anchors(page: pathlib.Path) -> set:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen, result = {}, set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def test_the_pages_are_found():
    assert ROOT / "README.md" in PAGES and len(PAGES) >= 10, PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading #{fragment} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_is_one_page_and_links_every_doc():
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 250
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(readme)}
    missing = [doc.name for doc in (ROOT / "docs").glob("*.md") if doc.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


def test_the_link_check_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n[ok](page.md#title) [gone](nope.md) [web](https://example.com)\n```\n[code](x.md)\n```\n")
    assert links(page) == ["page.md#title", "nope.md"]
    assert anchors(page) == {"title"}
