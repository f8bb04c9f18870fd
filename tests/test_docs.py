"""Every ```python block of the documentation runs as written, and prints what the page shows.

The collector is docs/hooks/page_code.py, shared with the site build (which runs the pages that
draw plots): blocks in order, one namespace per page, a fresh temporary directory as the working
directory, output compared where a ```` ```text title="Output" ```` block follows. It is ours
rather than pytest-markdown-docs because the build needs the same runner to write the plots
into the site, and because a page here is one test (one namespace, blocks in order).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# The pages whose examples run, in one explicit list.
PAGES = [
    "docs/index.md",
    "docs/getting-started.md",
    "docs/tutorials/epsilon.md",
    "docs/tutorials/table-statistics.md",
    "docs/tutorials/sql.md",
    "docs/tutorials/synthetic-data.md",
    "docs/tutorials/correlated.md",
    "docs/tutorials/reusable-holdout.md",
    "docs/tutorials/service.md",
    "docs/tutorials/models.md",
    "docs/how-to/audit.md",
    "docs/how-to/bounds.md",
    "docs/how-to/budget.md",
    "docs/how-to/memory.md",
    "docs/how-to/spark.md",
    "docs/how-to/report.md",
    "docs/how-to/ranges.md",
    "docs/how-to/joins.md",
    "docs/explanations/accounting.md",
    "docs/explanations/floating-point.md",
    "docs/explanations/promises.md",
    "README.md",
    "docs/guide/tables.md",
    "docs/guide/sql.md",
    "docs/guide/mechanisms.md",
    "docs/guide/guarantees.md",
    "docs/guide/correlated.md",
    "docs/guide/holdout.md",
    "docs/guide/models.md",
    "docs/guide/synthetic.md",
    "docs/guide/serving.md",
    "docs/guide/spark.md",
    "docs/contributing.md",
]


def _runner():  # docs/hooks is not a package: load the module by path, once
    name = "bayesdp_docs_page_code"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / "page_code.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str, tmp_path: Path) -> None:
    _runner().run_page(ROOT / page, tmp_path)


def test_every_page_with_examples_is_listed() -> None:
    pages = {p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md")
             if _runner().blocks(p.read_text(encoding="utf-8"))}
    assert pages <= set(PAGES), f"add these pages to PAGES: {sorted(pages - set(PAGES))}"


def test_collector_compares_output_and_reports_the_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('# t\n\n```python\nx = 2\nprint(x)\n```\n\n```text title="Output"\n3\n```\n'
                    "\n```pycon\n>>> not run\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"page\.md:4: the block printed\n2"):
        _runner().run_page(page, tmp_path)


def test_collector_runs_blocks_in_order_in_one_namespace_in_the_given_directory(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('```python\nopen("made.txt", "w").write("a")\ny = 5\n```\n\n'
                    '   ```python\n   print(y * 2)\n   ```\n   ```text title="Output"\n   10\n   ```\n'
                    "```text\nprint('a text block is shown, never run')\n```\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    _runner().run_page(page, work)
    assert (work / "made.txt").read_text() == "a"
    assert [b.expected for b in _runner().blocks(page.read_text())] == [None, "10\n"]


def test_collector_requires_the_images_a_page_shows(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    # A link shown as code (`![...](shown.png)`) is text, not an image the code must write.
    page.write_text("![a plot](plot.png) `![a plot](shown.png)`\n\n```python\nx = 1\n```\n",
                    encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(AssertionError, match=r"did not write plot\.png$"):
        _runner().run_page(page, work)
