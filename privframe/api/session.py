"""The Session: the private data, its privacy unit, and the budget: the only door to the data.

Example:
    >>> import pandas as pd
    >>> import privframe as pf
    >>> df = pd.DataFrame({"user_id": [1, 1, 2, 3], "region": ["n", "s", "n", "e"],
    ...                    "amount": [10.0, 20.0, 5.0, 7.5]})
    >>> sess = pf.Session(df, privacy_unit="user_id", budget=pf.zCDP(rho=1.0))
    >>> result = (
    ...     sess.query()
    ...     .bound(max_groups=2, max_rows_per_group=1)
    ...     .group_by("region", keys=["n", "s", "e", "w"])
    ...     .agg(pf.count(), pf.mean("amount", bounds=(0, 50)).alias("avg"))
    ...     .release(rho=0.5)
    ... )
    >>> type(result).__name__, list(result.columns), sess.remaining.rho
    ('DataFrame', ['region', 'count', 'avg'], 0.5)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Literal, TypeAlias

import pandas as pd
import polars as pl

from privframe._arguments import BUDGET_HINTS, hinted
from privframe.accounting import replay
from privframe.accounting._kinds import Spendable
from privframe.accounting.accountant import Accountant, BudgetReport
from privframe.accounting.budgets import ApproxDP, Budget, zCDP
from privframe.accounting.ledger import DataIdentity, LedgerEntries
from privframe.accounting.replay import Guarantee
from privframe.api import synthesis
from privframe.api._session_arguments import (
    check_contributions,
    check_metadata,
    check_privacy_unit,
    check_private_tables,
    check_table_contributions,
    check_tables,
    check_unit_types,
    identity_schema,
    joinable,
)
from privframe.api.html import session_html
from privframe.api.query import Query, Request
from privframe.api.schema import error_column_clashes, validate
from privframe.api.sql import TABLE, Column, SQLQuery, parse
from privframe.api.sql.metadata import declared_types
from privframe.api.sql_entry import SQLEntry
from privframe.engines.inputs import ColumnType, Opened
from privframe.engines.registry import open_input
from privframe.engines.spark import frames as spark
from privframe.errors import (
    InvalidArgumentError,
    InvalidValueError,
)
from privframe.mechanisms.noise import Randomness
from privframe.numeric import Number, round_up
from privframe.plan import auto_bounds
from privframe.plan.explanation import Explanation, explain, explained, with_charge
from privframe.plan.ir import Bound, Plan
from privframe.plan.release import Batch, Computed, Pipeline, added, describe, zero_cost
from privframe.plan.split import Balance
from privframe.progress import steps

__all__ = ["Session"]

DataSource: TypeAlias = pd.DataFrame | pl.DataFrame | pl.LazyFrame | str | os.PathLike[str]


class Session(SQLEntry):
    """Private data with a privacy unit and a budget; every release goes through it.

    Args:
        data: a pandas or polars DataFrame, a polars LazyFrame, the path of
            a ``.parquet`` or ``.csv`` file, or a Spark DataFrame (run on
            Spark by :mod:`privframe.engines.spark.engine`; see ``docs/spark.md``).
            Or several private tables about the same people, by name
            (``{"visits": ..., "prescriptions": ...}``): each has the privacy
            unit column, of one type in all, and a person may be in every
            table; ``sess.query("prescriptions")`` queries one (the first by
            default) and ``join_private`` joins them (``docs/joins.md``).
            Removing a person removes their rows from every table.
        privacy_unit: the column identifying a person; None if each row is a
            different person.
        budget: the total budget, e.g. ``pf.zCDP(rho=1.0)``,
            ``pf.ApproxDP(epsilon=2.0, delta=1e-6)`` or ``pf.GDP(mu=1.0)``; or
            another Session's ``accountant``, to share its budget and ledger:
            for a second private table about the same people (a release of
            either is charged to the one budget, so their guarantees compose).
        ledger: optional path of a SQLite ledger that persists spending; it
            records the privacy unit and the columns' names and types (see
            ``same_data``).
        rng: the noise source; the OS CSPRNG by default. A seeded source
            makes releases reproducible and NOT private: for tests and demos.
        metadata: public facts per column (or aggregate alias), for SQL:
            ``{"amount": pf.Column(bounds=(0, 1000)), "region":
            pf.Column(keys=[...])}``; and the columns' declared types
            (``pf.Column(type="int64")``): a CSV's columns are read as them
            (undeclared ones as String), typed data must have them.
        contributions: for SQL, the default contribution limits,
            ``pf.Bound(max_groups=3, max_rows_per_group=5)``; with several
            private tables, a mapping of table names to their limits (a
            JOIN of two private tables keeps each table's ``max_rows`` rows
            per unit).
        tables: public (non-private) tables SQL may JOIN, by name.
        name: the private table's name in SQL's FROM, ``"data"`` by default;
            it may be schema-qualified (``"PUMS.PUMS"``), so that queries
            written for another system run as written. Several tables are
            named by ``data``'s keys instead.
        results: for a Spark DataFrame input, return released tables as
            pandas (the default) or as Spark DataFrames (``"spark"``).
        same_data: with a ``ledger`` file that records other data (another
            privacy unit, or columns added, removed or retyped), open it
            anyway: you state it is the same data, and the file then records
            this data's columns. Without it such a file is refused
            (:class:`~privframe.errors.LedgerError`), so that one dataset's
            spends are never carried over to another.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"u": [1, 2]}), "u", pf.zCDP(1.0))
        >>> sess.remaining
        zCDP(rho=1.0, delta=0.0)
    """

    @hinted(**BUDGET_HINTS)
    def __init__(
        self,
        data: DataSource | Mapping[str, DataSource],
        privacy_unit: str | None,
        budget: Budget | Accountant,
        ledger: str | os.PathLike[str] | None = None,
        *,
        rng: Randomness | None = None,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
        tables: Mapping[str, pl.DataFrame | pd.DataFrame] | None = None,
        name: str = TABLE,
        results: Literal["pandas", "spark"] = "pandas",
        same_data: bool = False,
    ) -> None:
        check_privacy_unit(privacy_unit)
        self._metadata = check_metadata(metadata)
        named = check_private_tables(data, name)
        self._name = next(iter(named))
        self._table_contributions = check_table_contributions(contributions, list(named))
        self._contributions = self._table_contributions.get(self._name)
        self._tables = check_tables(tables, *named)
        if results not in ("pandas", "spark"):
            raise InvalidArgumentError(f"results must be 'pandas' or 'spark', got {results!r}")
        self._types = declared_types(self._metadata)
        opened = {
            table: _open_table(table, source, privacy_unit, results, self._types, len(named))
            for table, source in named.items()
        }
        self._schemas = {table: o.schema for table, o in opened.items()}
        first = opened[self._name]
        self._engine, self._schema = first.engine, first.schema
        if len(opened) > 1:
            check_unit_types(privacy_unit, self._schemas)
        if len(opened) > 1 or hasattr(first.engine, "with_tables"):
            # Every table by name, the first too: a query may join a table to itself.
            self._engine = joinable(first.engine).with_tables(
                {table: o.engine for table, o in opened.items()}
            )
        self._present = first.present
        self._unit = privacy_unit
        if rng is not None and not isinstance(rng, Randomness):
            raise InvalidArgumentError(f"rng must be a Randomness, got {type(rng).__name__}")
        self._rng = rng
        if isinstance(budget, Accountant):
            if ledger is not None:
                raise InvalidArgumentError(
                    "a shared accountant keeps its own ledger: give ledger= to the Session "
                    "that opened it, not to one that shares it"
                )
            self._accountant = budget
        else:
            # A ledger file records the data it is spent on (public facts: the unit, and
            # the columns and types as this session sees them) and refuses other data.
            self._accountant = Accountant(
                budget,
                ledger,
                data=DataIdentity.of(privacy_unit, identity_schema(self._schemas)),
                same_data=same_data,
            )
        self._pipeline = Pipeline(self._engine, self._accountant, privacy_unit, rng)

    @classmethod
    def from_spark_table(
        cls,
        spark_session: Any,
        table: str,
        privacy_unit: str | None,
        budget: Budget | Accountant,
        ledger: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> Session:
        """A Session over a table of a Spark catalog (``"db.table"``), run by the Spark engine.

        Args:
            spark_session: the ``pyspark.sql.SparkSession``.
            table: the table's name in the catalog.
            privacy_unit: as for :class:`Session`.
            budget: as for :class:`Session`.
            ledger: as for :class:`Session`.
            options: the Session's keyword arguments (``rng``, ``metadata``,
                ``contributions``, ``tables``, ``results``).

        Example:
            >>> import privframe as pf  # doctest: +SKIP
            >>> sess = pf.Session.from_spark_table(spark, "sales.orders", "customer_id",
            ...                                    pf.zCDP(rho=1.0))  # doctest: +SKIP
        """
        data = spark.catalog_table(spark_session, table)
        return cls(data, privacy_unit, budget, ledger, **options)

    @property
    def columns(self) -> list[str]:
        """The data's column names (the schema is public; the values are not); the first table's."""
        return list(self._schema)

    @property
    def private_tables(self) -> dict[str, list[str]]:
        """Each private table's name and column names, the first table first.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session({"a": pl.DataFrame({"u": [1]}), "b": pl.DataFrame(
            ...     {"u": [1], "x": [2.0]})}, "u", pf.zCDP(1.0))
            >>> sess.private_tables
            {'a': ['u'], 'b': ['u', 'x']}
        """
        return {name: list(schema) for name, schema in self._schemas.items()}

    @property
    def privacy_unit(self) -> str | None:
        """The privacy unit column (None: each row is a unit)."""
        return self._unit

    @property
    def accountant(self) -> Accountant:
        """The accountant charging this session's releases."""
        return self._accountant

    @property
    def budget_kind(self) -> type[Spendable]:
        """The kind of this session's budget: zCDP (releases spend ρ), PureDP or ApproxDP (ε).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.GDP(1.0)).budget_kind.__name__
            'zCDP'
        """
        return type(self._accountant.budget)

    def __privframe_pipeline__(self) -> Pipeline:
        """The release pipeline, for tune (:class:`~privframe.api.tune.TuningDoor`); not API."""
        return self._pipeline

    def __privframe_present__(self, table: pl.DataFrame) -> Any:
        """A public polars table as this session's kind of frame, for tune; not API."""
        return self._present(table)

    @property
    def spent(self) -> Spendable:
        """The budget spent so far, in the kind of the session's budget (zCDP, PureDP, ApproxDP).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.PureDP(1.0))
            >>> _ = sess.query().agg(pf.count()).release(epsilon=0.25)
            >>> sess.spent.epsilon, sess.remaining.epsilon
            (0.25, 0.75)
        """
        return self._accountant.spent

    @property
    def remaining(self) -> Spendable:
        """The budget left, in the kind of the session's budget."""
        return self._accountant.remaining

    @property
    def basic_spent(self) -> Spendable:
        """What basic composition would have charged: the releases' costs added up.

        An (ε, δ) session charges less (:attr:`spent`): it composes its
        releases' mechanisms tightly (docs/accounting.md). For the other
        kinds it equals :attr:`spent`.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.ApproxDP(1.0, 1e-6))
            >>> for _ in range(2):
            ...     _ = sess.query().agg(pf.count()).release(epsilon=0.25)
            >>> sess.basic_spent
            ApproxDP(epsilon=0.5, delta=0.0)
        """
        return self._accountant.basic_spent

    @property
    def ledger(self) -> LedgerEntries:
        """Every release charged to this session's budget, in order.

        A lazy read-only sequence (:class:`~privframe.accounting.ledger.LedgerEntries`):
        taking it costs the same however long the ledger is, and a file
        ledger's entries are checked against its hash chain as they are read.
        It compares equal to a tuple of the same entries.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> _ = sess.query().agg(pf.count()).release(rho=0.5, label="n")
            >>> [entry.label for entry in sess.ledger]
            ['n']
        """
        return self._accountant.entries

    def check_cost(self, cost: Spendable) -> None:
        """Refuse a ``cost`` that would not fit what remains now; spends nothing.

        For plans and dry runs (a scripted report checks its total before
        computing anything); the charge checks again, atomically.

        Raises:
            BudgetExceededError: ``cost`` does not fit.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> sess.check_cost(pf.zCDP(0.5))
        """
        self._accountant.check(cost)

    def report(self) -> BudgetReport:
        """The budget, spent and remaining, in ρ, (ε, δ) and μ."""
        return self._accountant.report()

    def guarantee(self, delta: float | None = None, method: str = "zcdp") -> float:
        """The ε of everything spent so far, at ``delta`` (default: the reporting δ plus δ spent).

        ``method="zcdp"`` (the default, always valid) converts the ledger's total
        ρ (Canonne, Kamath & Steinke 2020); ``"rdp"`` and ``"pld"`` replay the
        mechanism events the ledger entries carry (:mod:`privframe.accounting.replay`;
        :meth:`guarantee_statement` says how the number was obtained). For
        privframe's own releases, discrete Gaussians, all three agree closely:
        RDP and PLD pay off for subsampled continuous events.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> _ = sess.query().agg(pf.count()).release(rho=0.5)
            >>> sess.guarantee() <= sess.guarantee(method="rdp") < 1.01 * sess.guarantee()
            True
        """
        return self.guarantee_statement(delta, method).epsilon

    def guarantee_statement(self, delta: float | None = None, method: str = "zcdp") -> Guarantee:
        """Like :meth:`guarantee`, with δ, the method and how the ε was derived.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> _ = sess.query().agg(pf.count()).release(rho=0.5)
            >>> statement = sess.guarantee_statement(1e-6, "pld")
            >>> statement.method, round(statement.epsilon, 9) == round(sess.guarantee(1e-6), 9)
            ('pld', True)
            >>> "zCDP bound" in statement.basis
            True
        """
        if delta is None:
            delta = _default_delta(self._accountant)
        return replay.guarantee(self.ledger, delta, method, total=self._accountant.spent)

    def query(self, table: str | None = None) -> Query:
        """Start a query of ``table`` (the first private table by default).

        Chain ``filter``, ``bound``, ``group_by``, ``agg``, then release.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> tables = {"visits": pl.DataFrame({"u": [1]}), "drugs": pl.DataFrame({"u": [1]})}
            >>> sess = pf.Session(tables, "u", pf.zCDP(1.0))
            >>> sess.query("drugs").plan.table, sess.query().plan.table
            ('drugs', None)
        """
        if table is None or table == self._name:
            return Query(self)
        if table not in self._schemas:
            raise InvalidValueError(
                f"{table!r} is not a private table of this session; it has {list(self._schemas)}"
            )
        return Query(self, Plan(table=table))

    def __repr__(self) -> str:
        # Public facts only: no row counts or column statistics.
        return (
            f"Session(privacy_unit={self._unit!r}, budget={self._accountant.budget!r}, "
            f"remaining={self.remaining!r}, releases={len(self.ledger)})"
        )

    def _repr_html_(self) -> str:
        """Notebook view: a budget gauge, the guarantee so far and the ledger (no data facts)."""
        return session_html(self)

    def parse_sql(
        self,
        text: str,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
    ) -> SQLQuery:
        """``text`` parsed over this Session's table, facts and tables (:meth:`sql` without rho).

        ``metadata`` and ``contributions`` override the Session's for this query (a
        column's ``type`` is read when the data opens: a query cannot change it);
        ``contributions`` replace the limits of the table FROM reads. A JOIN of
        two private tables keeps at most each table's ``max_rows`` rows per
        person, and ``CROSS JOIN UNNEST`` makes at most its table's ``max_rows``
        rows per person (``docs/sql.md``).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> sess.parse_sql("SELECT COUNT(*) AS n FROM data").text
            'SELECT COUNT(*) AS n FROM data'
        """
        override = check_metadata(metadata)
        retyped = sorted(
            name for name, kind in declared_types(override).items() if self._types.get(name) != kind
        )
        if retyped:
            raise InvalidArgumentError(
                f"metadata= of one query cannot declare a column's type ({retyped}): types are "
                "read when the data opens; declare them in Session(metadata=...)"
            )
        return parse(
            text,
            self.query(),
            unit=self._unit,
            metadata={**self._metadata, **override},
            contributions=check_contributions(contributions),
            tables=self._tables,
            table=self._name,
            table_contributions=self._table_contributions,
        )

    def marginals(
        self,
        columns: Sequence[str | Sequence[str]],
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
        label: str = "marginals",
    ) -> dict[tuple[str, ...], pd.DataFrame | pl.DataFrame]:
        """Noisy k-way marginals (contingency tables) over column sets, in one release.

        Each column set in ``columns`` gets a table with a row for every
        combination of its columns' public values (``domains``: a list or a
        :func:`privframe.bin` per column, else the Session's
        ``pf.Column(keys=...)``; Booleans need none; never read from
        the data), and ``count``: the noisy counts made non-negative and
        consistent (where two tables share columns they sum to the same
        table), ``count_std``: each cell's noise std, and
        ``count_ci95_low``/``count_ci95_high``: the cell measurement's exact
        95% interval, clipped at 0. ``rho`` (``epsilon`` in a pure-DP session)
        is split evenly over the tables and charged in one ledger entry. Each
        person keeps at most ``max_rows`` rows (default: the Session's
        ``contributions`` ``max_rows``; 1 without a privacy unit). Rows with a
        value outside the domains are dropped. See ``docs/synthetic.md``.

        Raises:
            InvalidValueError: a column without a public domain, an unknown
                column, no row limit, or a session that is not zCDP or pure DP.
            BudgetExceededError: the cost does not fit; nothing is read.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"sex": ["f", "m"] * 50, "age": list(range(100))})
            >>> sess = pf.Session(df, None, pf.zCDP(1.0))
            >>> tables = sess.marginals(
            ...     [("sex", "age"), ("sex",)], rho=0.5,
            ...     domains={"sex": ["f", "m"], "age": pf.bin("age", [0, 50, 100])},
            ... )
            >>> tables[("sex", "age")].height, sess.spent.rho
            (4, 0.5)
        """
        return synthesis.marginals(
            self._synthesis_source(),
            columns,
            rho,
            epsilon,
            domains,
            max_rows,
            label,
        )

    def explain_marginals(
        self,
        columns: Sequence[str | Sequence[str]],
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
    ) -> synthesis.Explained:
        """What :meth:`marginals` would measure and cost; reads no data, spends nothing.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"smoker": [True, False]}), None, pf.zCDP(1.0))
            >>> print(sess.explain_marginals(["smoker"], rho=0.5))  # doctest: +ELLIPSIS
            marginals: 1 noisy count tables, cost zCDP(rho=0.5, delta=0.0), one ledger entry
            ...
        """
        return synthesis.explain_marginals(
            self._synthesis_source(), columns, rho, epsilon, domains, max_rows
        )

    def synthesize(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        method: Literal["aim", "mst"] = "aim",
        columns: Sequence[str] | None = None,
        workload: Sequence[Sequence[str]] | None = None,
        rows: int | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
        label: str = "synthesize",
    ) -> pd.DataFrame | pl.DataFrame:
        """A differentially private synthetic table, by AIM or MST, charged in one ledger entry.

        ``method="aim"`` (McKenna et al. 2022) measures marginals adaptively,
        aiming at ``workload`` (column sets; default every pair of
        ``columns``); ``"mst"`` (McKenna, Miklau & Sheldon 2021) measures every
        column and a privately chosen spanning tree of pairs. A graphical model
        estimated from the noisy marginals is sampled for ``rows`` rows
        (default: its estimate of the number of rows). ``columns`` (default:
        all but the privacy unit) need public domains, as in
        :meth:`marginals`; a binned column holds its bin labels. The result is
        the session's kind of frame (pandas in, pandas out). A zCDP session
        spends ``rho`` (discrete Gaussian measurements), a pure-DP one
        ``epsilon`` (discrete Laplace). A seeded session's table is NOT
        PRIVATE. See ``docs/synthetic.md``.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"a": [True, False] * 100, "b": [True, True, False, False] * 50})
            >>> sess = pf.Session(df, None, pf.zCDP(1.0))
            >>> table = sess.synthesize(rho=1.0, method="mst", rows=50)
            >>> table.shape, sess.spent.rho
            ((50, 2), 1.0)
        """
        return synthesis.synthesize(
            self._synthesis_source(),
            rho,
            epsilon,
            method,
            columns,
            workload,
            rows,
            domains,
            max_rows,
            label,
        )

    def explain_synthesis(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        method: Literal["aim", "mst"] = "aim",
        columns: Sequence[str] | None = None,
        workload: Sequence[Sequence[str]] | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
    ) -> synthesis.Explained:
        """What :meth:`synthesize` would measure and cost; reads no data, spends nothing.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"a": [True], "b": [False]}), None, pf.zCDP(1.0))
            >>> sess.explain_synthesis(rho=0.5, method="mst").cost
            zCDP(rho=0.5, delta=0.0)
        """
        return synthesis.explain_synthesis(
            self._synthesis_source(),
            rho,
            epsilon,
            method,
            columns,
            workload,
            domains,
            max_rows,
        )

    def _synthesis_source(self) -> synthesis.Source:
        """What marginals and synthesis read: the first table's public facts and the pipeline."""
        return synthesis.Source(
            self._pipeline,
            self._schemas[self._name],
            {name: column.keys for name, column in self._metadata.items()},
            self._contributions.max_rows if self._contributions is not None else None,
            self._present,
        )

    # -- used by Query ------------------------------------------------------------------

    def check(self, plan: Plan, with_error: bool = False) -> pl.Schema:
        """Check a query's plan against the data's public schema; return the schema it sees.

        What every release checks before planning its budget, for every front
        end (the builder, SQL, reports): the steps fit the columns and types,
        the aggregates' columns exist and are numeric, and (with
        ``with_error``) the error columns would not collide with outputs. Reads
        no data and spends nothing.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> dict(sess.check(sess.query().agg(pf.sum("x", (0, 5))).plan))
            {'x': Float64}
        """
        schema = validate(self._table_schema(plan), self._unit, plan, self._schemas)
        clash = sorted({column for column, _ in error_column_clashes(plan)}) if with_error else []
        if clash:
            raise InvalidValueError(
                f"with_error=True would add columns {clash} that already name an output "
                "or a group_by column; rename the aggregate with .alias(...)"
            )
        return schema

    def _table_schema(self, plan: Plan) -> pl.Schema:
        """The schema of the private table ``plan`` starts from."""
        if plan.table is not None and plan.table not in self._schemas:
            raise InvalidValueError(f"{plan.table!r} is not a private table of this session")
        return self._schemas[plan.table or self._name]

    def explain(
        self,
        plan: Plan,
        rho: Number | None = None,
        weights: Mapping[str, float] | Balance | None = None,
        delta: Number | None = None,
        *,
        epsilon: Number | None = None,
    ) -> Explanation:
        """What releasing ``plan`` at ``rho`` (or ``epsilon``) would do, from public parameters.

        ``Query.explain`` and ``SQLQuery.explain`` call this; it spends nothing.
        A zCDP session's releases spend ``rho``; pure-DP and (ε, δ) sessions'
        spend ``epsilon`` (and ``delta`` under (ε, δ)-DP).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> sess.explain(sess.query().agg(pf.count()).plan, rho=0.5).plan.cost.rho
            0.5
        """
        validate(self._table_schema(plan), self._unit, plan, self._schemas)
        amount = self._pipeline.asked(rho, epsilon)
        if auto_bounds.asks(plan):
            # The bounds' share is spent first; the rest releases the plan (stand-in bounds).
            return auto_bounds.explained(
                plan,
                self._pipeline.choosing_bounds(amount),
                lambda rest: self._explained(plan, rest, weights, delta),
            )
        return self._explained(plan, amount, weights, delta)

    def _explained(
        self,
        plan: Plan,
        amount: Number,
        weights: Mapping[str, float] | Balance | None,
        delta: Number | None,
    ) -> Explanation:
        """:meth:`explain` of a plan with public bounds, at ``amount`` (ρ, or ε)."""
        if not isinstance(self._accountant.budget, zCDP):
            before = zero_cost(type(self._accountant.budget))
            release = self._pipeline.planned(plan, amount, weights, delta, before)
            explanation = explained(plan, release)
            if not isinstance(release.cost, ApproxDP):
                return explanation
            after = self._accountant.spent_after(release.cost, description=describe(plan, release))
            return with_charge(explanation, *after)
        delta = self._pipeline.selection_delta(plan, delta)
        return explain(
            plan,
            self._unit is not None,
            self._accountant.affordable(amount),
            weights,
            delta,
            self._accountant.delta,
        )

    def release_all(self, requests: Sequence[Request]) -> list[pl.DataFrame | pd.DataFrame]:
        """Release several queries all or nothing: one atomic charge for their total cost.

        ``batch(requests).release()``: every request is checked, planned and
        computed exactly first; then the whole cost is charged in one ledger
        step (with a shared ledger file, either every entry is recorded or
        none, whatever other processes spend meanwhile); only then is noise
        drawn. A refused or failing request charges nothing for any of them,
        with one exception: a request with automatic bounds
        (``bounds="auto"``) spends its bounds' share, in a ledger step of its
        own, while the batch is computed, after every request has been planned
        and the whole found to fit; if the batch fails after that, the share
        stays charged (its histogram was drawn). ``Query.release`` is this
        with one request.

        Raises:
            BudgetExceededError: the total does not fit what remains; nothing
                is charged.
            InvalidValueError: a query failed while running on the data (its
                message withheld); nothing is charged but automatic bounds'
                shares.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> q = sess.query().agg(pf.count())
            >>> try:
            ...     sess.release_all([q.request(0.5), q.request(0.75)])
            ... except pf.BudgetExceededError:
            ...     print("refused; spent:", sess.spent.rho)
            refused; spent: 0.0
        """
        return self.batch(requests).release()

    def batch(self, requests: Sequence[Request]) -> Batch:
        """Check, plan and compute ``requests`` exactly, charging nothing yet (but bounds).

        The returned :class:`Batch` holds the exact aggregates (never shown)
        until :meth:`Batch.release` charges their total in one ledger step
        and draws the noise. A scheduled job computes first (what may fail
        or be interrupted then spends nothing) and charges last. The only
        spend before that is automatic bounds' (``bounds="auto"``): their
        share is charged and their histogram drawn here, after every request
        has been planned and the whole found to fit (:meth:`release_all`).

        Raises:
            BudgetExceededError: the total does not fit what remains now.
            InvalidValueError: a query failed while running on the data.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> batch = sess.batch([sess.query().agg(pf.count()).request(0.25, label="n")])
            >>> batch.cost, sess.spent.rho
            (zCDP(rho=0.25, delta=0.0), 0.0)
            >>> [frame.columns for frame in batch.release()], sess.spent.rho
            ([['count']], 0.25)
        """
        if any(auto_bounds.asks(r.query.plan) for r in requests):
            self._fits_whole(requests)
        computed: list[Computed] = []
        before = zero_cost(type(self._accountant.budget))
        # The number of requests is the caller's: a public count (privframe.progress).
        with steps("queries", len(requests)) as advance:
            for request in requests:
                computed.append(self._compute(request, before))
                before = added(before, computed[-1].release.cost)
                advance()
        return Batch(self._pipeline, computed, self._present)

    def _fits_whole(self, requests: Sequence[Request]) -> None:
        """Refuse a batch that would not plan or fit, before any bounds' histogram is drawn.

        Automatic bounds are charged while the batch is computed, so everything
        the batch's charge would check is checked first: every request plans
        (at the rest of its ρ, with stand-in bounds) and their total fits.
        """
        total = zero_cost(type(self._accountant.budget))
        for request in requests:
            plan, options = request.query.plan, request.options
            amount = self._pipeline.asked(request.rho, request.epsilon)
            self.check(plan, options.computes_errors)
            if auto_bounds.asks(plan):
                share, amount = auto_bounds.split(plan, self._pipeline.choosing_bounds(amount))
                total = added(total, zCDP(share))
            release = self._pipeline.plan(plan, amount, options.weights, options.delta, total)
            total = added(total, release.cost)

    def _compute(self, request: Request, before: Spendable) -> Computed:
        """Check, plan and run one request exactly; ``before`` is the batch's cost so far."""
        plan, options = request.query.plan, request.options
        amount = self._pipeline.asked(request.rho, request.epsilon)
        schema = self.check(plan, options.computes_errors)
        chosen = None
        if auto_bounds.asks(plan):
            plan, amount, chosen = self._pipeline.choose_bounds(
                plan, amount, options, schema, before
            )
        release = self._pipeline.plan(plan, amount, options.weights, options.delta, before)
        exact = self._pipeline.aggregate(self._pipeline.spec(plan, release, schema))
        return Computed(plan, release, exact, options, request.finish, chosen)


def _open_table(
    table: str,
    source: object,
    unit: str | None,
    results: str,
    types: Mapping[str, ColumnType],
    tables: int,
) -> Opened:
    """One private table opened by its engine; with several, a refusal names the table."""
    try:
        return open_input(source, unit, results=results, types=types)
    except (InvalidArgumentError, InvalidValueError) as err:
        if tables == 1:
            raise
        refusal = type(err)(f"private table {table!r}: {err}")
    # Raised outside the handler, to carry no chain (the engine's refusal names
    # public facts only).
    raise refusal


def _default_delta(accountant: Accountant) -> float:
    """The δ a guarantee is stated at by default: the reporting δ plus δ spent (zCDP), δ spent."""
    spent = accountant.spent
    if isinstance(spent, zCDP):
        return float(Fraction(accountant.delta) + spent.exact_delta)
    if isinstance(spent, ApproxDP):
        return round_up(spent.exact_delta)
    return 0.0
