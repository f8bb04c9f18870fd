"""`import bayesdp` and `bayesdp --help` load no heavy library; the public names all resolve.

Each check runs a fresh interpreter, so modules imported by other tests do not hide a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import bayesdp
from bayesdp import commands

HEAVY = ("pandas", "numba", "scipy", "duckdb", "matplotlib", "pyspark", "sqlglot", "sklearn")


def loaded_after(code: str) -> list[str]:
    """The heavy top-level packages a fresh interpreter has loaded after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in json.loads(out.stdout.splitlines()[-1]) if m in HEAVY]


def test_import_bayesdp_loads_no_heavy_library() -> None:
    assert loaded_after("import bayesdp") == []


def test_help_builds_the_whole_parser_without_heavy_libraries() -> None:
    code = ("import contextlib, io\nfrom bayesdp.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['--help'])")
    assert loaded_after(code) == []


def test_every_public_name_resolves_and_is_listed() -> None:
    code = ("import bayesdp\nmissing = [n for n in bayesdp.__all__ if n not in dir(bayesdp)]\n"
            "assert not missing, missing\n"
            "for n in bayesdp.__all__:\n"
            "    if n != 'models':\n"
            "        getattr(bayesdp, n)\n"
            "from bayesdp import Laplace, sql, table, sum\n"
            "assert callable(sql) and table is bayesdp.table and sum is bayesdp.tables.sum")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert sorted(bayesdp.__all__) == sorted((*bayesdp._MODULES, *bayesdp._HOME))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        bayesdp.nothing  # noqa: B018


def test_every_public_subpackage_is_an_attribute_loaded_on_first_use() -> None:
    """`bdp.synth.perturbed_histogram(...)` works after `import bayesdp as bdp` alone, and
    `import bayesdp` imports none of the subpackages until one is used."""
    names = ("correlated", "errors", "expressions", "holdout", "mechanisms", "noise", "privacy",
             "report", "serve", "synth", "tables")
    code = (f"import sys, types\nimport bayesdp as bdp\nnames = {names!r}\n"
            "assert not [n for n in names if f'bayesdp.{n}' in sys.modules]\n"
            "assert set(names) <= set(dir(bdp)), set(names) - set(dir(bdp))\n"
            "for n in names:\n"
            "    assert getattr(bdp, n) is sys.modules[f'bayesdp.{n}'], n\n"
            "assert callable(bdp.synth.perturbed_histogram) and bdp.tables.table is bdp.table")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_functions_named_like_their_subpackage_stay_functions() -> None:
    """`bdp.sql` and `bdp.audit` are functions even when a module below them loads first."""
    code = ("import bayesdp.sql.translate, bayesdp.audit.runner\nimport bayesdp as bdp\n"
            "from bayesdp.sql import sql\nfrom bayesdp.audit import audit\n"
            "assert bdp.sql is sql and bdp.audit is audit, (bdp.sql, bdp.audit)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_choices_match_the_library() -> None:
    from bayesdp.privacy import RELATIONS
    from bayesdp.privacy.filters import ACCOUNTINGS
    from bayesdp.synth.encode import DEFAULT_BINS
    from bayesdp.synth.tabular import METHODS

    assert (commands.RELATIONS, commands.ACCOUNTINGS) == (RELATIONS, ACCOUNTINGS)
    assert (commands.SYNTH_METHODS, commands.SYNTH_BINS) == (METHODS, DEFAULT_BINS)
