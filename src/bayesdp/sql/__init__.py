"""DP SQL: the queries analysts already write, answered with the builder's plan, noise and intervals.

Two dialects, one path (parse -> check -> the builder's `Query` -> its release -> post-processing):

1. BigQuery's clause, read as BigQuery documents it ("Differential privacy clause" and
   "Differentially private aggregate functions")::

       SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6,
           max_groups_contributed = 5, privacy_unit_column = user_id)
         campaign, COUNT(*) AS n,
         SUM(revenue, contribution_bounds_per_group => (0, 100)) AS rev,
         PERCENTILE_CONT(revenue, 0.5, contribution_bounds_per_row => (0, 100)) AS p50
       FROM events WHERE country = 'FR' GROUP BY campaign

   `epsilon`, `delta`, `privacy_unit_column` and `max_groups_contributed` (default 1, as in
   BigQuery) mean what BigQuery says. bayesdp adds `max_rows_per_group`, `alpha` and `noise`
   ('laplace' or 'gaussian') as options. Contributions are bounded as BigQuery bounds them
   (`bayesdp.sql.bigquery`, on `bayesdp.tables.per_unit`):

   - Each unit's rows in a group are aggregated first (COUNT: its rows, or its non-null values;
     SUM: their sum; AVG: their average) and that per-unit value is clamped to
     `contribution_bounds_per_group`; AVG is the average of the per-unit averages. A unit keeps
     at most `max_groups_contributed` groups, chosen at random.
   - PERCENTILE_CONT, MEDIAN, STDDEV and VARIANCE read up to `max_rows_per_group` (default 5,
     ZetaSQL's limit) of a unit's rows in a group, chosen at random, each clamped to
     `contribution_bounds_per_row`.
   - Bounds the query does not give are learnt from the data with part of ε (BigQuery's implicit
     clamping): Google's approximate bounds, a noisy logarithmic histogram taking half of the
     aggregate's share (`bayesdp.sql.bigquery`); a warning states the bounds and ε they took.
     For AVG, PERCENTILE_CONT, STDDEV and VARIANCE a column's bounds in the metadata apply.
   - `max_groups_contributed = NULL` (no bounding) is refused.
   - STDDEV and VARIANCE are the population ones (as STDDEV_POP, VAR_POP); PERCENTILE_CONT is
     the exponential mechanism on a grid (Smith 2011).
   - Noise is bayesdp's secure discrete/continuous Laplace (or Gaussian), and every value comes
     with its interval, which covers the value BigQuery defines at the bounds used (learnt or
     given), not the bias of clamping; the budget splits as the builder splits it: with private
     keys each of the n aggregates and partition selection get ε/(n+1), which is BigQuery's
     split; with public keys (metadata) the n aggregates get ε/n each.

2. Plain SQL with a metadata file (`bayesdp.sql.metadata`, TOML) stating per table the privacy
   unit, contribution bounds, column bounds and public keys, and default ε, δ. It bounds rows
   as the builder does: each unit keeps at most `max_rows_per_group` rows in each of at most
   `max_groups_per_unit` groups, chosen at random, and bounds clip each row's value::

       SELECT campaign, COUNT(*), SUM(revenue), AVG(revenue) FROM events GROUP BY campaign

Supported: COUNT(*), COUNT(unit), COUNT(DISTINCT unit) (the number of people), COUNT(x) (rows
where x is not null), SUM, AVG, STDDEV[_POP|_SAMP], VARIANCE / VAR_POP / VAR_SAMP, MEDIAN,
PERCENTILE_CONT / QUANTILE_CONT (and PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY col)) over columns
or row expressions (arithmetic, CASE, conditions on one row's columns, checked by
`bayesdp.expressions`; bounds from `contribution_bounds_per_*`, [0, 1] for a condition, or the
range of a CASE whose results are number literals); WHERE (a public, row-local filter,
checked by `bayesdp.expressions`); GROUP BY columns; public keys from the metadata or from a
`WHERE col IN (...)` on a column the metadata declares `public`; and, on released values,
arithmetic, ROUND, ABS, aliases, HAVING, ORDER BY, LIMIT and OFFSET (`postprocess`). Each distinct
aggregate call is one aggregate of the Query, in order of first appearance (SELECT, HAVING,
ORDER BY). JOIN reads tables the metadata marks public or of the same unit (`bayesdp.sql.joins`).
Refused, with the construct and its position: other joins, subqueries and CTEs, window
functions, UNION / INTERSECT / EXCEPT, SELECT *, non-aggregated columns that are not group keys,
any use of the privacy unit other than counting it, and (in plain SQL) aggregates without
bounds. Every name
(in the query, `privacy_unit_column` and the metadata) means the column DuckDB and Spark resolve
it to, without case, quoted or not; checks read that column, so the unit in any spelling is the unit.

Notes: the parser. sqlglot was chosen over DuckDB's `json_serialize_sql`. DuckDB's serializer
gives DuckDB's own parse tree with character positions, and parses about as fast (1.4 ms vs 2.0
ms for a 10-aggregate query, one run on a shared machine), but it reads only DuckDB's grammar,
compiled in C++ with no extension point: the BigQuery clause and its named arguments cannot be
added to it, and a Spark query would still need a second parser. sqlglot's BigQuery dialect is a
Python class: `bayesdp.sql.dialect` subclasses its parser to read the clause, every node keeps
its token positions (so refusals point at the text), the same tree is rendered for DuckDB or
Spark, and the row-local checker (`bayesdp.expressions`) takes sqlglot nodes directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bayesdp.noise import Rng
from bayesdp.privacy import compose
from bayesdp.sql.bigquery import as_written, bounds_warning, learn_bounds
from bayesdp.sql.postprocess import finish, rehearse
from bayesdp.sql.refusals import SqlError
from bayesdp.sql.translate import Translation, translate
from bayesdp.tables import Release
from bayesdp.tables.per_unit import materialized
from bayesdp.tables.query import Ledger


def sql(query: str, tables: Mapping[str, Any], *, metadata: str | Path | Mapping[str, Any] | None = None,
        epsilon: float | None = None, delta: float | None = None, ledger: Ledger | None = None,
        rng: Rng | None = None) -> Release:
    """Answer a SQL query privately: one column per selected name, plus NAME_low and NAME_high for
    every released value, in the order of the SELECT list.

    `tables` maps each table name to a source `bayesdp.table` takes (a path, a data frame, a
    DuckDB relation, a Spark DataFrame). `metadata`: a TOML path or mapping (see
    `bayesdp.sql.metadata`). `epsilon`/`delta` given here and in the query must agree. `ledger`
    records the spend before any value is computed; `rng` is for tests only.
    """
    return release_translation(translate(query, tables, metadata=metadata, epsilon=epsilon, delta=delta),
                               ledger=ledger, rng=rng)


def release_translation(t: Translation, *, ledger: Ledger | None = None, rng: Rng | None = None) -> Release:
    """Release a translated query: its post-processing rehearsed before anything is spent, the
    builder's release (which spends on `ledger` first), then the post-processing; its plan names
    what the analyst wrote, never a per-unit column's internal name."""
    rehearse(t)
    label = "sql: " + " ".join(t.text.split())
    query, options = t.query, t.options
    if t.per_unit:  # each unit's values, aggregated once for every pass of the release(s)
        query = replace(query, table=materialized(query.table))
    if t.learn is None:
        release = query.release(ledger=ledger, rng=rng, label=label[:500], **options)
    else:
        query, options, bounds = learn_bounds(query, t.learn, options, ledger=ledger, rng=rng, label=label)
        release = query.release(ledger=ledger, rng=rng, label=label[:500], **options)
        # The guarantee of the answer is that of both releases on the same data (basic composition).
        total = compose([bounds, release.plan.guarantee], "basic")
        release = replace(release, plan=replace(release.plan, guarantee=total))
    return as_written(finish(t, release), t.shown)


def public_warnings(t: Translation, release: Release) -> list[str]:
    """The warnings of `release_translation(t)` that depend on the data through DP values only
    (bounds the BigQuery clause learnt), as it warned them: an analyst may see them."""
    if t.learn is None:
        return []
    return [bounds_warning(t.learn, t.options, {n: s.aggregate for n, s in release.plan.steps.items()})]


__all__ = ["SqlError", "Translation", "public_warnings", "release_translation", "sql", "translate"]
