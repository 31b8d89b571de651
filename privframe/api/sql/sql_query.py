"""The parsed SQL query: the builder's query plus its post-processing, explained or released.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
    >>> sess.sql("SELECT COUNT(*) AS n FROM data ORDER BY n")
    SQLQuery('SELECT COUNT(*) AS n FROM data ORDER BY n')
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar, Unpack

import polars as pl

from privframe._arguments import RELEASE_HINTS, hinted
from privframe.accounting.budgets import PureDP, zCDP
from privframe.api.html import query_html
from privframe.api.query import Query, Request
from privframe.api.schema import error_column_clashes
from privframe.api.sql._common import builder_refusal, refuse_at
from privframe.api.sql.options import OptionsBudget, PrivacyOptions
from privframe.api.sql.post import ERROR_SUFFIXES, Post
from privframe.errors import InvalidArgumentError, InvalidBudgetError, SQLError
from privframe.numeric import Number
from privframe.plan.release_options import ReleaseKeywords, ReleaseOptions, takes_release_options

if TYPE_CHECKING:
    import pandas as pd

    from privframe.plan.explanation import Explanation
    from privframe.plan.split import Balance

T = TypeVar("T")


class SQLQuery:
    """A parsed SQL query: the builder :class:`~privframe.api.query.Query` plus post-processing.

    ``explain`` and ``release`` work as for builder queries; HAVING, ORDER BY
    and LIMIT/OFFSET are applied to the released (noisy) table.

    A query with BigQuery's ``WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=...,
    delta=...)`` carries its budget: ``sess.sql(text)`` releases it at once,
    and, parsed with ``sess.parse_sql(text)``, its ``release()``, ``explain()``
    and ``request()`` take no ``rho`` and spend :meth:`spend`
    (:mod:`~privframe.api.sql.options`); giving ``rho=`` or ``delta=`` as well
    is refused, as the budget would be given twice.

    Args:
        text: the SQL text.
        query: the equivalent builder query.
        post: HAVING, ORDER BY, LIMIT and the select list's order.
        options: the differential privacy clause's options, if any.
        integers: outputs released rounded to integers (``COUNT(col)``).
    """

    def __init__(
        self,
        text: str,
        query: Query,
        post: Post,
        *,
        options: PrivacyOptions | None = None,
        integers: tuple[str, ...] = (),
    ) -> None:
        self._text = text
        self._query = query
        self._post = post
        self._options = options
        self._integers = integers

    @property
    def text(self) -> str:
        """The SQL text."""
        return self._text

    @property
    def query(self) -> Query:
        """The equivalent builder query."""
        return self._query

    @property
    def options(self) -> PrivacyOptions | None:
        """The options of the query's ``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)``, if any."""
        return self._options

    @property
    def carries_budget(self) -> bool:
        """Whether the query's OPTIONS give its budget (epsilon), so it can release as it is.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.PureDP(1.0))
            >>> sess.parse_sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5) "
            ...                "COUNT(*) AS n FROM data").carries_budget
            True
        """
        return self._options is not None and self._options.epsilon is not None

    def spend(self) -> OptionsBudget | None:
        """What the query's OPTIONS(epsilon, delta) spend in a zCDP session: ρ, and δ; or None.

        None without OPTIONS(epsilon, ...), and in a pure-DP or (ε, δ) session,
        which spends the OPTIONS' ε and δ as they are.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> q = sess.parse_sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, "
            ...              "delta=1e-6) COUNT(*) AS n FROM data")
            >>> round(float(q.spend().rho), 6), q.spend().selection_delta
            (0.024356, None)
        """
        if self._options is None or not self._zcdp:
            return None
        return self._options.spend(selects=self._post.selection is not None)

    @property
    def _zcdp(self) -> bool:
        return issubclass(self._query.session.budget_kind, zCDP)

    def _budget(
        self, rho: Number | None, epsilon: Number | None, delta: Number | None
    ) -> tuple[Number | None, Number | None, Number | None]:
        """The (ρ or ε, δ) a release spends: the OPTIONS', or the arguments'; never both."""
        options = self._options
        if options is None or not self.carries_budget:
            if rho is None and epsilon is None:
                budget = (
                    "rho=...: the zCDP budget to spend, e.g. rho=0.1"
                    if self._zcdp
                    else "epsilon=...: the budget to spend, e.g. epsilon=0.1"
                )
                raise InvalidArgumentError(
                    f"pass {budget}; or give the query its (epsilon, delta) in SQL: SELECT WITH "
                    "DIFFERENTIAL_PRIVACY OPTIONS(epsilon=..., delta=...) ..."
                )
            return rho, epsilon, delta
        if rho is not None or epsilon is not None or delta is not None:
            passed = {"rho": rho, "epsilon": epsilon, "delta": delta}
            given = " and ".join(f"{name}=" for name, value in passed.items() if value is not None)
            raise SQLError(
                f"the budget is given twice: {options.construct} sets this query's "
                f"epsilon and delta, and {given} was passed too. Pass neither (the OPTIONS are "
                "spent), or take epsilon and delta out of OPTIONS",
                construct=options.construct,
                position=options.position,
            )
        spend = self.spend()
        if spend is not None:
            return spend.rho, None, spend.selection_delta
        if options.delta and issubclass(self._query.session.budget_kind, PureDP):
            raise SQLError(
                f"{options.construct} gives delta, and this session's budget is pure DP "
                "(PureDP), which spends none: take delta out of OPTIONS, or open the session "
                "with budget=pf.ApproxDP(epsilon=..., delta=...)",
                construct=options.construct,
                position=options.position,
            )
        return None, options.epsilon, options.delta

    @hinted(**RELEASE_HINTS)
    def explain(
        self,
        rho: Number | None = None,
        weights: Mapping[str, float] | Balance | None = None,
        delta: Number | None = None,
        *,
        epsilon: Number | None = None,
    ) -> Explanation:
        """What the release would do, from public parameters only; spends nothing.

        A GROUP BY without public keys is explained even without ``delta``
        (with the δ the session has left, as the builder's ``explain`` does),
        with a note that its release needs ``delta=``. With OPTIONS(epsilon,
        delta), ``rho`` and ``delta`` come from them, and a note shows the
        mapping (ε, δ → ρ, δ_selection) and where it comes from; in a pure-DP
        or (ε, δ) session they are spent as they are, and ``epsilon`` is
        passed instead of ``rho`` when there are none.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1, 2]}), "u", pf.zCDP(1.0),
            ...                   contributions=pf.Bound(max_groups=1, max_rows_per_group=1))
            >>> explained = sess.parse_sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, "
            ...     "delta=1e-6) COUNT(*) AS n FROM data").explain()
            >>> explained.notes[-1][:50]
            'OPTIONS(epsilon=1, delta=1e-06) -> rho = 0.024356 '
        """
        self.check(with_error=True)
        rho, epsilon, delta = self._budget(rho, epsilon, delta)
        explanation = self._spending(
            lambda: self._query.explain(rho, weights=weights, delta=delta, epsilon=epsilon)
        )
        notes = (*explanation.notes, *self._post.notes)
        spend = self.spend()
        if spend is not None:
            notes += (spend.describe(),)
            # Stated at the OPTIONS' delta: the selection's share plus the rest, which rho used.
            rest = float(spend.delta - spend.exact_selection_delta)
            explanation = dataclasses.replace(explanation, report_delta=rest)
        selection = self._post.selection
        if selection is not None and delta is None:
            chosen = ", ".join(self._query.plan.selected)
            notes += (
                f"GROUP BY {chosen} has no public keys: its groups are chosen privately, "
                "which spends delta, so the release needs delta=... (this explanation "
                "assumes all the delta left)",
            )
        return dataclasses.replace(explanation, notes=notes)

    @hinted(**RELEASE_HINTS)
    @takes_release_options
    def release(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        **options: Unpack[ReleaseKeywords],
    ) -> pl.DataFrame | pd.DataFrame:
        """Spend ``rho`` (or the OPTIONS' budget), release, then apply HAVING, ORDER BY and LIMIT.

        In a pure-DP or (ε, δ) session the budget is ``epsilon`` (and
        ``delta``), or the OPTIONS' ε and δ, spent as they are.

        The post-processing is first run on an empty table of the release's
        types, so a HAVING or ORDER BY that cannot run fails before anything
        is charged. ``clamp``, ``intervals`` and ``total`` are those of
        :meth:`Query.release <privframe.api.query.Query.release>`; HAVING,
        ORDER BY and LIMIT see the total row like any other.

        Raises:
            SQLError: the query cannot run, or its GROUP BY has no public keys
                and no ``delta`` was given: choosing groups privately spends δ,
                which SQL spends only when asked.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> sess.sql("SELECT COUNT(*) AS n FROM data").release(0.5).columns
            ['n']
        """
        request = self.request_with(rho, ReleaseOptions(**options), epsilon=epsilon)
        return self._spending(lambda: self._query.session.release_all([request])[0])

    @hinted(**RELEASE_HINTS)
    @takes_release_options
    def request(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        **options: Unpack[ReleaseKeywords],
    ) -> Request:
        """This query's release as a :class:`~privframe.api.query.Request`, checked; spends nothing.

        :meth:`Session.release_all <privframe.api.session.Session.release_all>`
        releases a list of requests all or nothing. The arguments, and what
        is refused, are those of :meth:`release`.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> request = sess.sql("SELECT COUNT(*) AS n FROM data").request(0.5)
            >>> request.options.label
            'SELECT COUNT(*) AS n FROM data'
        """
        return self.request_with(rho, ReleaseOptions(**options), epsilon=epsilon)

    @hinted(**RELEASE_HINTS)
    def request_with(
        self, rho: Number | None, options: ReleaseOptions, *, epsilon: Number | None = None
    ) -> Request:
        """:meth:`request` with the options as one value (as reports and the server pass them).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> from privframe.plan.release_options import ReleaseOptions
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> query = sess.parse_sql("SELECT COUNT(*) AS n FROM data")
            >>> query.request_with(0.5, ReleaseOptions(with_error=True)).options.with_error
            True
        """
        options.post_for(self._query.plan)
        errors = options.computes_errors
        self.check(errors)
        rho, epsilon, delta = self._budget(rho, epsilon, options.delta)
        selection = self._post.selection
        if selection is not None and issubclass(self._query.session.budget_kind, PureDP):
            raise SQLError(
                "GROUP BY without public keys would choose the groups privately, which needs "
                "a delta > 0, and this session's budget is pure DP (PureDP), which has none: "
                "give the keys in metadata (pf.Column(keys=[...])), or open the session with "
                "budget=pf.ApproxDP(epsilon=..., delta=...). Nothing was charged",
                construct="GROUP BY",
                position=selection[1],
            )
        if selection is not None and delta is None:
            message, position = selection
            raise SQLError(message, construct="GROUP BY", position=position)
        return Request(
            self._query,
            rho,
            dataclasses.replace(options, label=options.label or self._text, delta=delta),
            finish=lambda frame: self._post.finish(self._rounded(frame), errors),
            sql=self._text,
            epsilon=epsilon,
        )

    def check(self, with_error: bool = False) -> None:
        """Refuse, before anything is charged, a query or HAVING/ORDER BY that cannot run.

        Runs the builder query's checks (:meth:`~privframe.api.query.Query.check`),
        then the post-processing on an empty table and on one row of made-up
        values, with the release's column types (with the error columns when
        ``with_error``).

        Raises:
            SQLError: the query does not fit the data's schema (the builder's
                reason), ``with_error`` would add a column under an output's name,
                or the post-processing does not fit the released columns.
        """
        plan = self._query.plan
        clash = error_column_clashes(plan) if with_error else []
        if clash:
            (column, output), *_ = clash
            named = dict(zip(self._post.columns, self._post.named, strict=False))
            where = named.get(column) or named.get(output) or next(iter(named.values()), None)
            raise refuse_at(
                where,
                "with_error",
                f"with_error=True adds the column {column!r}, the error of {output!r}, and an "
                f"output is already called {column!r}: give one of them another alias",
            )
        schema = builder_refusal(  # Query.check, with its schema
            lambda: self._query.session.check(plan, with_error),
            "the query cannot run on this data",
        )
        columns: dict[str, pl.DataType] = {c: schema[c] for c in plan.group_by}
        for aggregate in plan.aggregates:
            integer = aggregate.integer_output or aggregate.output_name in self._integers
            columns[aggregate.output_name] = pl.Int64() if integer else pl.Float64()
            if with_error:
                for suffix in ERROR_SUFFIXES:
                    columns[aggregate.output_name + suffix] = pl.Float64()
        failure = None
        try:
            # On no rows, and on one row of made-up values: polars checks some types
            # (arithmetic on a list, say) only on values. Neither holds any data.
            self._post.finish(pl.DataFrame(schema=columns), with_error)
            self._post.finish(_made_up_row(columns), with_error)
        except pl.exceptions.PolarsError as err:
            failure = f"{type(err).__name__}: {err}"  # of made-up tables: no data in them
        if failure is not None:
            # Raised outside the handler, so no polars error rides along as its context.
            where = self._post.failing(
                [pl.DataFrame(schema=columns), _made_up_row(columns)], with_error
            )
            raise refuse_at(
                where,
                "post-processing",
                f"HAVING or ORDER BY cannot run on the released columns: {failure}; nothing "
                "was charged",
            )

    def _spending(self, compute: Callable[[], T]) -> T:
        """``compute()``; a ρ from OPTIONS that privframe cannot release is an SQLError."""
        spend = self.spend()
        refusal = None
        try:
            return compute()
        except InvalidBudgetError as err:
            if spend is None or self._options is None:
                raise
            refusal = str(err)
        raise SQLError(
            f"{self._options.construct}(epsilon={float(spend.epsilon):g}, "
            f"delta={float(spend.delta):g}) gives rho={float(spend.rho):.6g}, which cannot be "
            f"released: {refusal}",
            construct=self._options.construct,
            position=self._options.position,
        )

    def _rounded(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with the outputs released as integers rounded (post-processing, free)."""
        names = [n for n in self._integers if n in frame.columns]
        return frame.with_columns(pl.col(n).round(0).cast(pl.Int64) for n in names)

    def __repr__(self) -> str:
        return f"SQLQuery({self._text!r})"

    def _repr_html_(self) -> str:
        """Notebook view: the SQL text and the equivalent plan."""
        return f"<pre>{html.escape(self._text)}</pre>" + query_html(self._query)


def _made_up_row(columns: dict[str, pl.DataType]) -> pl.DataFrame:
    """One row of the given types: 0, "" or False where a type has one, else null."""
    made_up: dict[str, object] = {}
    for name, dtype in columns.items():
        value: object = None
        if dtype.is_numeric():
            value = 0
        elif dtype == pl.String:
            value = ""
        elif dtype == pl.Boolean:
            value = False
        made_up[name] = pl.Series(name, [value], dtype=dtype)
    return pl.DataFrame(made_up)
