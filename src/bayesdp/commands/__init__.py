"""Sub-commands of the `bayesdp` command, one module per group (see bayesdp.cli)."""

# Every --seed says it: a seed makes the noise predictable, so a seeded run protects no one.
SEED_HELP = "seed for repeatable output (tests only): a seeded run is NOT private"
SEEDED_NOTE = ("seeded run: NOT private (anyone who knows the seed can predict the noise); "
               "use it for tests only")
