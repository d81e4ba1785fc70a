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


# The RPC tables of services/<name>/README.md: a newcomer follows them from an RPC to its handler file, its stores
# and the migrations of their tables, so every name in them must lead to something that exists.
SERVICE_READMES = sorted((ROOT / "services").glob("*/README.md"))
CODE = re.compile(r"`([^`]+)`")


def rpc_tables(readme: pathlib.Path) -> list:
    """The rows of the tables under the README's `## RPCs` heading, as {column: cell} dicts."""
    text = readme.read_text()
    match = re.search(r"^## RPCs\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    if not match:
        return []
    rows, header = [], None
    for line in match.group(1).splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = [cell.lower() for cell in cells]
        elif not set(cells[0]) <= set("-: "):
            rows.append(dict(zip(header, cells)))
    return rows


def module_of(readme: pathlib.Path) -> pathlib.Path:
    """The service's library folder: the first `Sources/Kindred…/` the README names."""
    match = re.search(r"`(Sources/Kindred\w+)/`", readme.read_text())
    assert match, f"{readme.relative_to(ROOT)} names no Sources/Kindred…/ folder"
    return ROOT / match.group(1)


def declares(folder: pathlib.Path, name: str) -> bool:
    pattern = re.compile(rf"^(?:public |final |package )*(?:struct|class|enum|actor|protocol) {name}\b", re.MULTILINE)
    return any(pattern.search(path.read_text()) for path in folder.rglob("*.swift"))


def broken_names(readme: pathlib.Path) -> list:
    """Handler files, stores, migrations and tables named in the README's RPC tables that do not exist."""
    module, migrations = module_of(readme), readme.parent / "migrations"
    created = {}
    for migration in sorted(migrations.glob("*.sql")):
        for table in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(?:\w+\.)?(\w+)", migration.read_text()):
            created.setdefault(migration.name, set()).add(table)
    broken = []
    for row in rpc_tables(readme):
        for column, cell in row.items():
            names = CODE.findall(cell)
            if column == "handler":
                # `+Concern.swift` after `Type+Main.swift` is short for `Type+Concern.swift`.
                base = names[0].split("+")[0] if names else ""
                names = [base + name if name.startswith("+") else name for name in names]
                broken += [f"handler {name}" for name in names if not list(module.rglob(name))]
            elif column in ("store", "stores"):
                kit = "the kit's" in cell
                for name in (name for name in names if name.endswith("Store") or kit):
                    folder = ROOT / "Sources/KindredServiceKit" if f"the kit's `{name}`" in cell else module
                    if not declares(folder, name):
                        broken.append(f"store {name}")
                broken += [f"store file {path}" for path in re.findall(r"\(`([\w+/]+\.swift)`\)", cell)
                           if not (module / path).exists()]
        files = CODE.findall(row.get("migration", ""))
        broken += [f"migration {name}" for name in files if not (migrations / name).exists()]
        for table in CODE.findall(row.get("tables", "")):
            if files and not any(table in created.get(name, ()) for name in files):
                broken.append(f"table {table} (not created by {', '.join(files)})")
    return broken


def test_every_service_readme_has_an_rpc_table():
    missing = [str(readme.relative_to(ROOT)) for readme in SERVICE_READMES if not rpc_tables(readme)]
    assert len(SERVICE_READMES) >= 7 and not missing, f"no `## RPCs` table in {missing}"


@pytest.mark.parametrize("readme", SERVICE_READMES, ids=lambda readme: readme.parent.name)
def test_rpc_tables_name_files_and_stores_that_exist(readme):
    broken = broken_names(readme)
    assert not broken, f"{readme.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_rpc_table_check_finds_a_wrong_name(tmp_path):
    service = tmp_path / "services" / "demo"
    (service / "migrations").mkdir(parents=True)
    (service / "migrations" / "0001_a.sql").write_text("CREATE TABLE things (id int);\n")
    readme = service / "README.md"
    readme.write_text(
        "Code: `Sources/KindredAuth/`.\n\n## RPCs\n\n| RPC | handler | stores |\n|---|---|---|\n"
        "| `SignUp` | `AuthService+SignUp.swift` | `AccountStore`, `NoSuchStore` |\n"
        "| `Gone` | `AuthService+Gone.swift` | — |\n\n"
        "| store | tables | migration |\n|---|---|---|\n"
        "| `AccountStore` (`AccountStore.swift`) | `things`, `others` | `0001_a.sql`, `0009_b.sql` |\n\n## Next\n"
    )
    assert broken_names(readme) == [
        "store NoSuchStore", "handler AuthService+Gone.swift", "migration 0009_b.sql",
        "table others (not created by 0001_a.sql, 0009_b.sql)",
    ]
