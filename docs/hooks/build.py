"""MkDocs hooks: pages made during the build, so they are never stale.

- Plots: a page that links to an image its code writes (`page_code.generated_images`) is run
  in a temporary directory and the images it wrote are added next to it.
- The CLI reference (reference/cli.md): the `--help` of `bayesdp` and of each sub-command.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
import sys
import tempfile
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from page_code import generated_images, run_page

CLI_PAGE = "reference/cli.md"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for page in [f for f in files.documentation_pages() if f.abs_src_path]:
        path = Path(page.abs_src_path)
        names = generated_images(path)
        if not names:
            continue
        with tempfile.TemporaryDirectory(prefix="bayesdp-docs-") as tmp:
            run_page(path, Path(tmp))
            folder = posixpath.dirname(page.src_uri)
            for name in names:
                files.append(File.generated(config, posixpath.join(folder, name),
                                            content=(Path(tmp) / name).read_bytes()))
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    return files


def _help(*command: str) -> str:
    """`bayesdp COMMAND --help` as the installed command prints it, 100 columns wide."""
    env = {**os.environ, "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-m", "bayesdp", *command, "--help"], env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.rstrip()


def cli_reference() -> str:
    """The CLI reference page: each sub-command's help, in the order `bayesdp --help` lists them."""
    from bayesdp.cli import COMMANDS

    parts = ["# The `bayesdp` command", "",
             "Generated from `bayesdp --help` and each `bayesdp COMMAND --help` when the site is built.",
             "", "```text", _help(), "```"]
    for name in COMMANDS:
        parts += ["", f"## `bayesdp {name}`", "", "```text", _help(name), "```"]
    return "\n".join(parts) + "\n"
