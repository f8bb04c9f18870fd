"""Run the ```python blocks of a Markdown page, as the tests and the site build do.

The blocks of one page run in order, in one namespace, with a fresh temporary directory as the
working directory. A block followed (blank lines apart) by a fence opened as
```` ```text title="Output" ```` must print exactly that text (trailing spaces ignored). Any
other fence (```pycon, ```text, ```bash, ```toml) is shown, never run. An image a page links to
by a bare file name (`![...](posterior.png)`) that is not a file under docs/ must be written by
the page's code into its working directory: the site build puts it next to the page.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# A fence at any indentation; its closing fence has the same indentation.
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.MULTILINE | re.DOTALL)
OUTPUT_INFO = 'text title="Output"'
IMAGE = re.compile(r"!\[[^\]]*\]\((?P<name>[\w.-]+\.(?:png|svg))\)")
CODE_SPAN = re.compile(r"(`+).+?\1")


@dataclass(frozen=True)
class Block:
    """One python block: its first line in the page (1-based), its code, the output it shows."""

    line: int
    code: str
    expected: str | None


def _dedent(body: str, indent: str) -> str:
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


def blocks(text: str) -> list[Block]:
    """The page's python blocks, each with the output block that follows it, if any."""
    fences = list(FENCE.finditer(text))
    out = []
    for i, fence in enumerate(fences):
        if fence["info"].strip() != "python":
            continue
        expected = None
        after = fences[i + 1] if i + 1 < len(fences) else None
        if (after is not None and after["info"].strip() == OUTPUT_INFO
                and not text[fence.end():after.start()].strip()):
            expected = _dedent(after["body"], after["indent"])
        out.append(Block(text.count("\n", 0, fence.start()) + 2,
                         _dedent(fence["body"], fence["indent"]), expected))
    return out


def generated_images(page: Path) -> list[str]:
    """File names of the images the page shows that its code must write (not files in docs/)."""
    prose = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))  # links in code are shown
    names = dict.fromkeys(m["name"] for m in IMAGE.finditer(prose))
    return [name for name in names if not (page.parent / name).exists()]


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def run_page(page: Path, workdir: Path) -> None:
    """Run every python block of `page` with `workdir` as the working directory.

    Raises AssertionError naming the page and line when a block prints something other than the
    output the page shows, or when an image the page links to was not written.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")  # plots go to files, never to a window
    namespace: dict[str, object] = {"__name__": "__main__"}
    previous = Path.cwd()
    os.chdir(workdir)
    try:
        for block in blocks(page.read_text(encoding="utf-8")):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(block.code, f"{page}:{block.line}", "exec"), namespace)
            if block.expected is not None and _normalise(printed.getvalue()) != _normalise(block.expected):
                raise AssertionError(f"{page}:{block.line}: the block printed\n{printed.getvalue()}\n"
                                     f"but the page shows\n{block.expected}")
    finally:
        os.chdir(previous)
        _close_figures()
    missing = [name for name in generated_images(page) if not (workdir / name).is_file()]
    if missing:
        raise AssertionError(f"{page}: its code did not write {', '.join(missing)}")


def _close_figures() -> None:
    """Free the page's matplotlib figures (only if it used matplotlib)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")
