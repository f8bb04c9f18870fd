"""Sub-commands of the `bayesdp` command, one module per group (see bayesdp.cli)."""

from typing import Any


def add_memory_options(parser: Any) -> None:
    """--memory-limit and --temp-directory, for the commands that read tables with DuckDB."""
    parser.add_argument("--memory-limit", metavar="SIZE",
                        help="cap DuckDB's memory, e.g. 2GB (default: 80%% of the machine's)")
    parser.add_argument("--temp-directory", metavar="DIR",
                        help="where DuckDB spills what does not fit in memory (default: .tmp here)")


# The parser's choices, written here so that building it loads no numerical library (`bayesdp
# --help` stays fast); tests/test_cli_imports.py checks each against the library's constant.
RELATIONS = ("add_remove", "replace_one")
ACCOUNTINGS = ("basic", "zcdp", "gdp", "advanced")
SYNTH_METHODS = ("mst", "aim", "independent")
SYNTH_BINS = 16

# Every --seed says it: a seed makes the noise predictable, so a seeded run protects no one.
SEED_HELP = "seed for repeatable output (tests only): a seeded run is NOT private"
SEEDED_NOTE = ("seeded run: NOT private (anyone who knows the seed can predict the noise); "
               "use it for tests only")
