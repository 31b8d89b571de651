"""The SQL front end: one SELECT, parsed with sqlglot into the builder's immutable plan.

``sess.sql("SELECT region, COUNT(*) AS n, AVG(amount) FROM data WHERE age >= 18
GROUP BY region")`` becomes exactly the query the builder would make
(``sess.query().filter(...).bound(...).group_by(...).agg(...)``), so there is
one planner and one engine. Nothing of the SQL text reaches an engine: every
row expression is translated into a polars expression, which then passes the
builder's own checks (:mod:`privframe.engines.expressions`).

What comes from where:

* **Bounds, keys, quantile grids**: bounds in the aggregate call, else the
  Session's ``metadata`` (``{"amount": pf.Column(bounds=(0, 1000)),
  "region": pf.Column(keys=[...])}``), keyed by column name, or by the output
  alias for an aggregate of an expression (never an alias that is also a
  column); per-query ``metadata=`` entries override the session's.
* **Contribution limits**: the Session's ``contributions=pf.Bound(...)``,
  overridable per query, and by the query's OPTIONS and COUNT bounds.
* **Keys**: a GROUP BY uses the product of its columns' ``keys``; the
  columns without keys are chosen privately, which spends δ, so its release
  needs ``delta=`` (the δ to spend, or OPTIONS' delta) and is refused without
  it.
* **Names**: as in SQL, unquoted names match columns, aliases and tables
  whatever their case (two columns differing only in case make one
  ambiguous), quoted names match exactly; metadata is found by its exact key,
  else by the one key that differs only in case.

Supported: aggregates in the select list (``COUNT(*)``, ``COUNT(col)``,
``COUNT(DISTINCT <privacy unit>)``, ``SUM``, ``AVG``/``MEAN``, ``VARIANCE``/
``VAR``/``VAR_SAMP``/``VAR_POP``, ``STDDEV``/``STD``/``STDDEV_SAMP``/
``STDDEV_POP``, ``MEDIAN``, ``QUANTILE(x, q)``/``APPROX_QUANTILE(x, q)``,
``PERCENTILE_CONT(x, q)`` and ``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)``,
``APPROX_QUANTILES(x, n)`` as a list column, BigQuery's ``ANON_*`` forms) with
aliases and bounds in the call (``SUM(x, 0, 100)``, ``x CLAMPED BETWEEN 0 AND
100``, ``contribution_bounds_per_group => (0, 100)``); BigQuery/ZetaSQL's
``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...)`` and ``WITH ANONYMIZATION
OPTIONS(...)`` (:mod:`~privframe.api.sql.options`: the query's own ε, δ and
limits); arithmetic, comparisons, ``AND``/``OR``/``NOT``, ``IN`` (literal
lists), ``BETWEEN``, ``IS [NOT] NULL``, ``LIKE`` with a leading or trailing
``%``, ``CASE``, ``CAST``/``TRY_CAST`` (a failed cast gives NULL) and ``ABS``
in row expressions; ``WHERE``; ``GROUP BY`` columns, expressions or positions,
with public keys for all, some or none of them; row subqueries in ``FROM`` and
``WITH`` tables (inlined into the same plan); the private table by the
Session's ``name`` (``PUMS.PUMS``), or each of its private tables by its key;
``[LEFT] JOIN`` public tables registered on the Session (``tables=``) on
columns of the same name; ``[LEFT] JOIN`` of two private tables on their
privacy unit (``join_private``, each side keeping its table's ``max_rows``;
the right one may be a subquery filtering a private table) and ``CROSS JOIN
UNNEST(list) AS t(item)`` (``flat_map``), :mod:`~privframe.api.sql.sources`,
with the WHERE filtering each table before its limit
(:mod:`~privframe.api.sql.where`); a subquery grouped by the privacy unit,
the per-person stage (``per_unit``, :mod:`~privframe.api.sql.per_unit`); and
expressions over
released values in the select list (``ROUND(AVG(x), 1)``, ``COUNT(*) * 5``,
``SUM(a) / COUNT(*)``), ``HAVING``, ``ORDER BY``, ``LIMIT``/``OFFSET`` and
``SELECT TOP n``, applied to the noisy result (post-processing: they cost
nothing and see only released values; an aggregate used only there is measured
as a hidden output). Anything else raises :class:`~privframe.errors.SQLError`
naming the construct and its position.

Sample vs population variance: both map to the same estimate (the bounded
rows' plug-in variance with the noise bias removed); at the group sizes a
private release needs the difference is far below the noise.

The parts, in the order a statement passes through them:
:mod:`~privframe.api.sql.dialect` (the sqlglot dialect: BigQuery's clause,
``CLAMPED BETWEEN``, ``TOP``), :mod:`~privframe.api.sql.statement` (parse one
SELECT, refuse what no part translates), :mod:`~privframe.api.sql.options`
(the differential privacy clause's budget and limits),
:mod:`~privframe.api.sql.scope` (FROM, subqueries, WITH, JOIN and what each
name denotes), :mod:`~privframe.api.sql.sources` (joins of private tables and
UNNEST), :mod:`~privframe.api.sql.where` (WHERE over them),
:mod:`~privframe.api.sql.per_unit` (the per-person subquery),
:mod:`~privframe.api.sql.listed` (BigQuery's joined list of public groups),
:mod:`~privframe.api.sql.rows` (row expressions into polars),
:mod:`~privframe.api.sql.groups` (GROUP BY and its keys),
:mod:`~privframe.api.sql.select_list` (group columns and aggregates),
:mod:`~privframe.api.sql.calls` (one aggregate call),
:mod:`~privframe.api.sql.released` (expressions over released values),
:mod:`~privframe.api.sql.post` (HAVING, ORDER BY, LIMIT) and
:mod:`~privframe.api.sql.translate` (the whole statement), giving an
:class:`~privframe.api.sql.sql_query.SQLQuery`; :class:`Column` is in
:mod:`~privframe.api.sql.metadata`.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> df = pl.DataFrame({"u": [1, 2, 3], "r": ["a", "b", "a"], "x": [1.0, 5.0, 3.0]})
    >>> sess = pf.Session(df, "u", pf.zCDP(1.0), metadata={
    ...     "x": pf.Column(bounds=(0, 10)), "r": pf.Column(keys=["a", "b"])},
    ...     contributions=pf.Bound(max_groups=1, max_rows_per_group=1))
    >>> q = sess.sql("SELECT r, COUNT(*) AS n, AVG(x) FROM data GROUP BY r ORDER BY n DESC")
    >>> [a.output_name for a in q.query.plan.aggregates]
    ['n', 'x_mean']
"""

from privframe.api.sql._common import TABLE as TABLE  # the private table's name in FROM
from privframe.api.sql.metadata import Column
from privframe.api.sql.sql_query import SQLQuery
from privframe.api.sql.translate import parse

__all__ = ["Column", "SQLQuery", "parse"]
