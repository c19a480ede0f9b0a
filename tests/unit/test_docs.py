"""The front door (issue 41): the README is short and keeps the two commands, the docs site builds
strict with every internal link and picture resolving, and every picture the README and the docs
show is one `python3 dev.py shots` makes (docs/shots.py's SHOTS), committed.

The build runs as `python3 dev.py docs` runs it (dev.py's docs_command), into a temporary folder.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
pytestmark = pytest.mark.timeout(300)


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    dev = load("dev_for_docs", ROOT / "dev.py")
    command = dev.docs_command(Path(sys.executable), source, out)
    # Strict: a warning fails (-W), nitpicky (-n), every page read again (-E).
    assert {"-W", "-n", "-E"} <= set(command)
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


class Page(HTMLParser):
    """A built page's ids, and the links and pictures it points at."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for name in ("href", "src") if tag in ("a", "img", "link", "script") else ():
            if found.get(name):
                self.targets.append(str(found[name]))


def read_site(site: Path) -> dict[Path, Page]:
    pages = {}
    for html in site.rglob("*.html"):
        if html.relative_to(site).parts[0] == "_static":  # the theme's templates, not pages
            continue
        page = Page()
        page.feed(html.read_text(encoding="utf-8"))
        pages[html] = page
    return pages


def broken_in_site(site: Path) -> list[str]:
    """Each internal link or picture of the built site that names no file, or no id there."""
    pages = read_site(site)
    broken = []
    for html, page in pages.items():
        for target in page.targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("mailto:", "data:")):
                continue
            where = (html.parent / unquote(parts.path)).resolve() if parts.path else html
            if where.is_dir():
                where = where / "index.html"
            if not where.exists():
                broken.append(f"{html.relative_to(site)}: {target} (no such file)")
            elif (
                parts.fragment
                and where.suffix == ".html"
                and unquote(parts.fragment) not in pages[where].ids
            ):
                broken.append(f"{html.relative_to(site)}: {target} (no such heading)")
    return broken


def test_the_docs_site_builds_strict_and_every_link_and_picture_resolves(tmp_path: Path) -> None:
    site = tmp_path / "html"
    built = build(DOCS, site)
    assert built.returncode == 0, built.stdout + built.stderr
    assert not broken_in_site(site)
    # Every topic of the user guide is a page of the site, one click below its index.
    guide = (site / "guide" / "index.html").read_text(encoding="utf-8")
    for page in GUIDE:
        assert (site / "guide" / f"{page}.html").exists(), page
        assert f'href="{page}.html"' in guide, page
    assert (site / "_static" / "shots" / "round-light.png").exists()


def test_the_site_check_finds_a_link_to_no_heading_and_a_missing_picture(tmp_path: Path) -> None:
    (tmp_path / "a.html").write_text(
        '<h1 id="top">A</h1><a href="b.html#gone">b</a><a href="#top">up</a>'
        '<img src="_images/none.png"><a href="https://example.org/">out</a>'
    )
    (tmp_path / "b.html").write_text('<h2 id="here">B</h2><a href="a.html#top">a</a>')
    assert broken_in_site(tmp_path) == [
        "a.html: b.html#gone (no such heading)",
        "a.html: _images/none.png (no such file)",
    ]


# The user guide's pages, by these names (other branches write sections into them).
GUIDE = (
    "rounds",
    "modes",
    "cost",
    "notebook-tools",
    "mcp-tools",
    "coding-agents",
    "outside-agents",
    "door",
    "jupyter-chat",
    "settings",
)


def test_a_stale_anchor_or_a_missing_picture_fails_the_build(tmp_path: Path) -> None:
    """The build the suite trusts says no: a link to a heading renumbered since (as the README's
    `#7-coding-agents-over-acp` once was), a link to a page that is gone, a missing picture."""
    source = tmp_path / "docs"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    (source / "_static").mkdir()
    (source / "security.md").write_text("# Threats\n\n## 8. Coding agents over ACP\n\nWords.\n")
    (source / "index.md").write_text(
        "# Home\n\n[it](security.md#7-coding-agents-over-acp) [gone](gone.md)\n\n"
        "![a picture](_static/nothing.png)\n\n```{toctree}\nsecurity\n```\n"
    )
    built = build(source, tmp_path / "html")
    said = built.stdout + built.stderr
    assert built.returncode != 0, said
    assert "7-coding-agents-over-acp" in said, said
    assert "gone" in said, said
    assert "nothing.png" in said, said


def slug(heading: str) -> str:
    """A heading's anchor as GitHub (and MyST, with myst_heading_anchors) makes it."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    found = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(heading.group(1)))
    return found


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def broken_in_markdown(page: Path) -> list[str]:
    """Each relative link or picture of a Markdown page that names no file, or no heading."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc:
            continue
        where = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not where.exists():
            broken.append(f"{target} (no such file)")
        elif (
            parts.fragment
            and where.suffix == ".md"
            and parts.fragment not in anchors(where.read_text(encoding="utf-8"))
        ):
            broken.append(f"{target} (no such heading)")
    return broken


def test_the_readmes_links_and_pictures_resolve(tmp_path: Path) -> None:
    """The README is no page of the site (GitHub and PyPI show it): its links are checked here,
    files and headings alike, as GitHub resolves them."""
    assert broken_in_markdown(README) == []
    assert "docs/security.md#8-coding-agents-over-acp" in README.read_text()
    # The check itself says no to a stale anchor and to a missing file.
    (tmp_path / "docs").mkdir()
    shutil.copy(DOCS / "security.md", tmp_path / "docs" / "security.md")
    stale = tmp_path / "README.md"
    stale.write_text("[a](docs/security.md#7-coding-agents-over-acp) [b](docs/gone.md)\n")
    assert broken_in_markdown(stale) == [
        "docs/security.md#7-coding-agents-over-acp (no such heading)",
        "docs/gone.md (no such file)",
    ]


# A picture in Markdown, in MyST's image and figure directives, or as HTML.
PICTURE = re.compile(
    r"!\[[^\]]*\]\(([^)\s]+)\)|[`:]{3}\{(?:image|figure)\} *(\S+)"
    r"|<(?:img|source) [^>]*?\bsrc(?:set)?=\"([^\"]+)\""
)


def pictures_named() -> dict[str, list[str]]:
    """Every picture the README and the docs' pages show: its path in the repository → where."""
    named: dict[str, list[str]] = {}
    for page in [README, *sorted(DOCS.rglob("*.md"))]:
        if "_build" in page.parts:
            continue
        for forms in PICTURE.findall(page.read_text(encoding="utf-8")):
            target = next(part for part in forms if part)
            path = (page.parent / target).resolve().relative_to(ROOT).as_posix()
            named.setdefault(path, []).append(page.relative_to(ROOT).as_posix())
    return named


def test_shots_writes_each_picture_of_its_list() -> None:
    """docs/shots.py takes each picture of SHOTS (and only those: shot_path refuses another
    name), and copies them all into docs/_static/shots/ only once every one was taken."""
    shots = load("docs_shots", DOCS / "shots.py")
    taken = re.findall(r'shot_path\(out, "([\w-]+)"\)', (DOCS / "shots.py").read_text())
    assert sorted(taken) == sorted(shots.SHOTS)
    with pytest.raises(KeyError):
        shots.shot_path(DOCS, "a-picture-it-does-not-take")


def test_a_picture_is_seen_in_each_form_a_page_can_show_it() -> None:
    page = (
        "![a](one.png) [not a picture](two.png)\n```{image} three.png\n```\n"
        ':::{figure} ../four.png\n:::\n<img alt="x" src="five.png">\n'
        '<picture><source media="(prefers-color-scheme: dark)" srcset="six.png"></picture>\n'
    )
    found = [next(part for part in forms if part) for forms in PICTURE.findall(page)]
    assert found == ["one.png", "three.png", "../four.png", "five.png", "six.png"]


def test_every_picture_shown_is_one_dev_py_shots_makes_and_is_committed() -> None:
    shots = load("docs_shots", DOCS / "shots.py")
    made = {
        (DOCS / "_static" / "shots" / f"{name}.png").relative_to(ROOT).as_posix()
        for name in shots.SHOTS
    }
    named = pictures_named()
    assert set(named) <= made, {p: w for p, w in named.items() if p not in made}
    assert made <= set(named), f"made but shown nowhere: {made - set(named)}"
    listed = subprocess.run(
        ["git", "ls-files", "--", *sorted(made)], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert sorted(listed) == sorted(made), "a picture is not committed: run `python3 dev.py shots`"
    for path in made:
        assert (ROOT / path).stat().st_size < 400_000, f"{path} is too big to commit"
    # The README's first screen: a round in a notebook, and Jupyter Chat.
    assert "docs/_static/shots/round-light.png" in named
    assert "docs/_static/shots/chat-light.png" in named


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text) <= 15_000
    block = (
        "```bash\n"
        "python3 dev.py lab      # JupyterLab with Conch on a copy of the demo notebook, on the "
        "offline agents\n"
        "python3 dev.py test     # the whole test suite (installs what it needs, Chromium "
        "included)\n"
        "```\n"
    )
    assert block in text
    # CI runs the README's test command word for word.
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("python3 dev.py test")
    assert "pip install conch-jupyter\n" in text
    assert "%load_ext conch_jupyter\n%conch @Researcher" in text


def declared_extras() -> dict[str, str]:
    """pyproject's extras, by name, each with its list as written (tomllib is 3.11's)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r"^([\w-]+) = \[(.*?)\]\n(?=\S|$)", section, re.MULTILINE | re.DOTALL))


def test_every_extra_the_docs_name_is_one_pyproject_declares() -> None:
    extras = declared_extras()
    for page in (README, DOCS / "install.md"):
        named = set(re.findall(r"conch-jupyter\[([\w,]+)\]", page.read_text(encoding="utf-8")))
        for extra in {e for group in named for e in group.split(",")}:
            assert extra in extras, f"{page.name} names conch-jupyter[{extra}]"
    assert {"lab", "chat", "live", "docs", "test"} <= set(extras)
    # The suite builds the docs: the test extra brings their tools.
    assert re.search(r'"conch-jupyter\[[\w,]*docs[\w,]*\]"', extras["test"])
