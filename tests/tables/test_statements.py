"""The statements a release sends to DuckDB (its query log): with public keys, one that reads the
rows, one that counts them, and the key table written once per key list."""

import duckdb
import numpy as np
import pandas as pd

import bayesdp as bdp

# Binding a query over the source names it for the call: a view created and dropped around it.
VIEW = ('CREATE TEMPORARY VIEW "bdp_source" AS ', 'DROP VIEW IF EXISTS "bdp_source"')


def _logged(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'").fetchall()
    con.execute("CALL truncate_duckdb_logs()")
    return [m for (m,) in rows if "duckdb_logs" not in m]


def test_a_public_keys_release_reads_the_rows_in_one_statement():
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"u": rng.integers(0, 300, 3000), "g": rng.integers(0, 50, 3000),
                       "v": rng.uniform(0, 10, 3000)})
    con = duckdb.connect()
    con.execute("CALL enable_logging('QueryLog')")
    q = bdp.table(con.from_df(df), "u").group_by("g", keys=range(20)).agg(
        n=bdp.count(), s=bdp.sum("v", bounds=(0, 10)), m=bdp.mean("v", bounds=(0, 10)))
    _logged(con)
    for writes_keys in (1, 0):
        q.release(1.0, max_groups_per_unit=3, rng=bdp.rng_for_tests(1))
        log = _logged(con)
        ran = [s for s in log if not s.startswith(VIEW)]
        writes = [s for s in ran if s.startswith("CREATE TEMP TABLE")]
        # The key table at the first release only; then the rows and null units, and the
        # aggregate that semi-joins the keys, bounds and counts the rows that entered.
        assert len(writes) == writes_keys and len(ran) == 2 + writes_keys, ran
        # Bound over the source: the key table, and the aggregate, once (by the check, before
        # the spend); the count is an aggregate of the relation itself.
        assert sum(s.startswith(VIEW[0]) for s in log) == 1 + writes_keys
