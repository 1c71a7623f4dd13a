"""Documentation as tests, the bookkeeping: every shell and Python block of README.md, docs/ and examples/
is run by the test its page is registered with (doc_commands.EXECUTED_PAGES) or marked illustrative;
every fence names its language; every relative link outside the docs site leads to a file.

The blocks themselves run in test_readme.py and test_doc_commands.py; the docs site's own links are
checked by `make docs` (mkdocs --strict)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import doc_commands
import harness

REPO = harness.REPO
LINK = re.compile(r"\]\(([^)\s]+)\)")


def where(page: Path, block: doc_commands.Block) -> str:
    return f"{page.relative_to(REPO)}:{block.line}"


def test_every_fence_names_its_language() -> None:
    bare = [where(page, b) for page in doc_commands.doc_pages() for b in doc_commands.page_blocks(page) if not b.language]
    assert not bare, f"fences without a language (bash, python, text for output, ...): {bare}"


def test_every_runnable_block_is_run_by_a_test_or_marked_illustrative() -> None:
    unrun = [where(page, b) for page in doc_commands.doc_pages() for b in doc_commands.page_blocks(page)
             if b.runnable and str(page.relative_to(REPO)) not in doc_commands.EXECUTED_PAGES]
    assert not unrun, ("these blocks run on no test: add their page to doc_commands.EXECUTED_PAGES with a test "
                       f"that runs it, or put <!-- illustrative: why --> on the line above the fence: {unrun}")


def test_each_registered_page_exists_and_its_test_does() -> None:
    for page, test in doc_commands.EXECUTED_PAGES.items():
        assert (REPO / page).is_file(), page
        path, name = test.split("::")
        tree = ast.parse((REPO / path).read_text())
        assert name in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, test
        assert any(b.runnable for b in doc_commands.page_blocks(REPO / page)), f"{page} has nothing to run"


def test_a_block_run_by_other_pages_shows_only_commands_they_run() -> None:
    checked, strays = 0, []
    for page in doc_commands.doc_pages():
        for block in doc_commands.page_blocks(page):
            pages = doc_commands.run_by(page, block)
            if not pages:
                continue
            for other in pages:
                assert str(other.relative_to(REPO)) in doc_commands.EXECUTED_PAGES, f"{where(page, block)}: {other} runs on no test"
            theirs = {line for other in pages for language, text in doc_commands.blocks(other) for line in doc_commands.command_lines(text)}
            strays += [f"{where(page, block)}: {line}" for line in doc_commands.command_lines(block.text) if line not in theirs]
            checked += 1
    assert checked >= 4, "the large-model overview's blocks and the README's torchrun path are run by example pages"
    assert not strays, f"commands no page named in 'run by' runs (run them there, or mark the block otherwise): {strays}"


def test_a_run_by_mark_names_pages_relative_to_its_own(tmp_path: Path) -> None:
    page = tmp_path / "sub" / "page.md"
    page.parent.mkdir()
    page.write_text("<!-- illustrative: run by a/README.md, b.md (why) -->\n```bash\necho 1 # x\n```\n"
                    "<!-- illustrative: a cluster -->\n```bash\nkubectl get pods\n```\n")
    first, second = doc_commands.page_blocks(page)
    assert doc_commands.run_by(page, first) == [page.parent / "a/README.md", page.parent / "b.md"]
    assert doc_commands.run_by(page, second) == [] and second.reason == "a cluster"
    assert doc_commands.command_lines(first.text) == ["echo 1"]


def test_an_illustrative_mark_counts_only_for_the_fence_right_below_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- illustrative: a cluster -->\n```bash\nkubectl get pods\n```\n\n<!-- illustrative -->\n\n"
                    "text\n```bash\necho run\n```\n```text\noutput\n```\n```\nbare\n```\n")
    found = doc_commands.page_blocks(page)
    assert [(b.language, b.illustrative, b.runnable, b.line) for b in found] == [
        ("bash", True, False, 2), ("bash", False, True, 9), ("text", False, False, 12), ("", False, False, 15)]


def test_relative_links_outside_the_docs_site_lead_to_files() -> None:
    """README.md and the examples' READMEs are not part of the mkdocs build, which checks docs/."""
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "examples").rglob("README.md"))]:
        for target in LINK.findall(page.read_text()):
            path = target.split("#", 1)[0]
            if path and "://" not in path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, broken


def test_the_counts_add_up() -> None:
    runnable, illustrative = doc_commands.counts()
    blocks = [b for page in doc_commands.doc_pages() for b in doc_commands.page_blocks(page)
              if b.language in doc_commands.SHELL + doc_commands.PYTHON]
    assert runnable + illustrative == len(blocks) and runnable > 0 and illustrative > 0
    stated = f"({runnable} runnable, {illustrative} illustrative)"
    assert stated in (REPO / "README.md").read_text(), f"the README's counts are out of date: {stated}"


def test_the_index_links_every_page() -> None:
    index = (REPO / "docs" / "index.md").read_text()
    linked = {target.split("#", 1)[0] for target in LINK.findall(index)}
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    tables = {p for p in pages if p.startswith("results/")}  # included by benchmarks.md, not pages of their own
    assert pages - tables - {"index.md"} <= linked, sorted(pages - tables - {"index.md"} - linked)
