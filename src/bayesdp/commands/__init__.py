"""Sub-commands of the `bayesdp` command, one module per group (see bayesdp.cli)."""
