"""The immutable query builder: each call returns a new query; nothing runs until release.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> df = pl.DataFrame({"user": [1, 1, 2], "region": ["n", "s", "n"], "amount": [5.0, 7.0, 1.0]})
    >>> sess = pf.Session(df, privacy_unit="user", budget=pf.zCDP(1.0))
    >>> q = (
    ...     sess.query()
    ...     .bound(max_groups=2, max_rows_per_group=1)
    ...     .group_by("region", keys=["n", "s"])
    ...     .agg(pf.count(), pf.sum("amount", bounds=(0, 10)))
    ... )
    >>> q.release(rho=0.5).columns
    ['region', 'count', 'amount_sum']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, Unpack

import polars as pl

from privframe._arguments import RELEASE_HINTS, RHO_HINTS, hinted
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.api.html import query_html
from privframe.api.schema import public_table
from privframe.api.tune import Tuned, tune
from privframe.engines import unit_values
from privframe.engines.expressions import Bin, check_expression, check_filter
from privframe.engines.spec import FlatMap, PerUnit, PrivateJoin, RowStep, UnitColumns
from privframe.engines.unit_values import UnitValue
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import Number
from privframe.plan import auto_bounds
from privframe.plan.aggregates import Aggregate, Mean, Sum
from privframe.plan.aggregates.base import AUTO, summed
from privframe.plan.aggregates.per_unit import PerUnitBounded
from privframe.plan.explanation import Explanation
from privframe.plan.ir import Bound, Plan
from privframe.plan.keys import KeySet, as_keyset
from privframe.plan.release_options import ReleaseKeywords, ReleaseOptions, takes_release_options
from privframe.plan.split import Balance

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Door", "Query", "Request"]


class Door(Protocol):
    """What a front end asks of the session it queries; :class:`~privframe.Session` is one.

    The builder, SQL and reports build plans and hand them through this door:
    checked against the data's public schema, explained, and released (the
    release pipeline runs behind ``release_all``).
    """

    @property
    def columns(self) -> list[str]:
        """The data's column names (public schema)."""
        ...

    @property
    def privacy_unit(self) -> str | None:
        """The privacy unit column (None: each row is a unit)."""
        ...

    @property
    def private_tables(self) -> dict[str, list[str]]:
        """The private tables' names and columns, the first (a query's default) first."""
        ...

    @property
    def budget_kind(self) -> type[zCDP | PureDP | ApproxDP]:
        """The kind of the session's budget: which parameter a release spends (ρ or ε)."""
        ...

    def check(self, plan: Plan, with_error: bool = False) -> pl.Schema:
        """Refuse a plan that does not fit the data's public schema; return the schema."""
        ...

    def explain(
        self,
        plan: Plan,
        rho: Number | None = None,
        weights: Mapping[str, float] | Balance | None = None,
        delta: Number | None = None,
        *,
        epsilon: Number | None = None,
    ) -> Explanation:
        """What releasing ``plan`` at ``rho`` (or ``epsilon``) would do, from public parameters."""
        ...

    def release_all(self, requests: Sequence[Request]) -> list[Any]:
        """Release the requests all or nothing."""
        ...


def _as_expr(value: pl.Expr | Bin) -> pl.Expr:
    return value.expr if isinstance(value, Bin) else value


def _column_names(what: str, on: object) -> tuple[str, ...]:
    keys = (on,) if isinstance(on, str) else tuple(on) if isinstance(on, list | tuple) else ()
    if not keys or not all(isinstance(c, str) and c for c in keys) or len(set(keys)) < len(keys):
        raise InvalidArgumentError(f"{what} takes distinct column names, got {on!r}")
    return keys


def _row_limit(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _truncation(value: object) -> Literal["random", "hash"]:
    if value == "random":
        return "random"
    if value == "hash":
        return "hash"
    raise InvalidArgumentError(f"truncation must be 'random' or 'hash', got {value!r}")


def _suffix(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"suffix must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class Request:
    """One release, ready to run with others by ``Session.release_all`` (or ``Session.batch``).

    Build it with :meth:`Query.request` or :meth:`SQLQuery.request
    <privframe.api.sql.SQLQuery.request>`: the budget ``rho`` (a zCDP
    session's) or ``epsilon`` (a pure-DP or (ε, δ) session's) and the
    release's :class:`~privframe.plan.release_options.ReleaseOptions`, the
    keywords of ``release`` as one value. ``finish`` post-processes the noisy
    table (SQL's HAVING, ORDER BY, LIMIT). ``sql`` is the SQL text the request
    was parsed from (None for a builder query), so a remote session can send
    the text instead of a plan.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
        >>> request = sess.query().agg(pf.count()).request(0.5, label="n")
        >>> request.rho, request.options.label
        (0.5, 'n')
    """

    query: Query
    rho: Number | None
    options: ReleaseOptions = dataclasses.field(default_factory=ReleaseOptions)
    finish: Callable[[pl.DataFrame], pl.DataFrame] | None = None
    sql: str | None = None
    epsilon: Number | None = None


@dataclass(frozen=True, eq=False)
class Query:
    """A private query over a session's data; build it by chaining, then release it.

    Every method returns a new Query: the same query can be explained,
    released several times (charged each time) or extended.
    """

    session: Door
    plan: Plan = dataclasses.field(default_factory=Plan)

    def _with(self, **changes: Any) -> Query:
        return Query(self.session, dataclasses.replace(self.plan, **changes))

    @hinted()
    def filter(self, predicate: pl.Expr) -> Query:
        """Keep the rows where a polars boolean expression holds (before bounding).

        The expression must be row-wise and unable to fail on any value; see
        :mod:`privframe.engines.expressions` for what is accepted and why.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"age": [20, 15]}), None, pf.zCDP(1.0))
            >>> len(sess.query().filter(pl.col("age") >= 18).plan.filters)
            1
        """
        step = RowStep("filter", (check_filter(predicate),))
        return self._with(steps=(*self.plan.steps, step))

    @hinted()
    def join(
        self,
        table: pl.DataFrame | pd.DataFrame,
        on: str | Sequence[str],
        how: Literal["left", "inner"] = "left",
    ) -> Query:
        """Add the columns of a public (non-private) table, matched on ``on``.

        The table must be unique on ``on``, so each private row gets at most
        one match and the join is a row-wise step: bounding applies to the
        rows as they reach the aggregation. ``how="inner"`` drops rows
        without a match; ``"left"`` keeps them with nulls.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1], "zip": ["02139"]}), "u", pf.zCDP(1.0))
            >>> states = pl.DataFrame({"zip": ["02139"], "state": ["MA"]})
            >>> sess.query().join(states, on="zip").plan.steps[0].kind
            'join'
        """
        frame = public_table(table)
        keys = (on,) if isinstance(on, str) else tuple(on) if isinstance(on, list | tuple) else ()
        if not keys or not all(isinstance(c, str) for c in keys):
            raise InvalidArgumentError(f"join on= takes column names, got {on!r}")
        missing = [c for c in keys if c not in frame.columns]
        if missing:
            raise InvalidValueError(f"the public table has no column {missing[0]!r} to join on")
        if frame.select(keys).is_duplicated().any():
            raise InvalidValueError(
                f"the public table repeats values of {list(keys)}: it must be unique on the "
                "join columns, so that each private row matches at most once"
            )
        if how not in ("left", "inner"):
            raise InvalidArgumentError(f"join how= must be 'left' or 'inner', got {how!r}")
        step = RowStep("join", table=frame, on=keys, how=how)
        return self._with(steps=(*self.plan.steps, step))

    @hinted()
    def with_columns(self, *exprs: pl.Expr | Bin, **named: pl.Expr | Bin | UnitValue) -> Query:
        """Add or replace columns with row-wise polars expressions (or :func:`~privframe.bin`).

        Derived columns can be filtered on, grouped by and aggregated; bounding
        applies to the rows as they reach the aggregation, so a rewritten key
        column is bounded as rewritten. The privacy unit column cannot be
        rewritten (splitting a unit would unbind its contribution).

        Per-person columns are named ``pf.unit`` values
        (:mod:`privframe.engines.unit_values`): ``with_columns(total=
        pf.unit.sum("amount"), visit=pf.unit.rank("date"))`` gives each row its
        person's total and the row's rank among the person's rows. They read
        one person's rows only and add no row, so the contribution bound is
        unchanged. One call takes row expressions or per-person values, not both.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"age": [20, 15]}), None, pf.zCDP(1.0))
            >>> q = sess.query().with_columns(adult=pl.col("age") >= 18)
            >>> q.plan.steps[0].kind
            'with_columns'
            >>> sess = pf.Session(pl.DataFrame({"u": [1], "x": [2.0]}), "u", pf.zCDP(1.0))
            >>> sess.query().with_columns(total=pf.unit.sum("x")).plan.steps[0].kind
            'unit_columns'
        """
        unit_values = {name: v for name, v in named.items() if isinstance(v, UnitValue)}
        if unit_values:
            if exprs or len(unit_values) < len(named):
                raise InvalidArgumentError(
                    "with_columns takes row expressions or per-person values (pf.unit....), "
                    "not both in one call: call it once for each"
                )
            return self._with(steps=(*self.plan.steps, UnitColumns(tuple(unit_values.items()))))
        if any(isinstance(e, UnitValue) for e in exprs):
            raise InvalidArgumentError(
                "a per-person value needs a name: with_columns(total=pf.unit.sum('amount'))"
            )
        derived = [check_expression(_as_expr(e)) for e in exprs]
        derived += [
            check_expression(_as_expr(e)).alias(name)
            for name, e in named.items()
            if not isinstance(e, UnitValue)
        ]
        if not derived:
            raise InvalidValueError("with_columns needs at least one expression")
        step = RowStep("with_columns", tuple(derived))
        return self._with(steps=(*self.plan.steps, step))

    @hinted()
    def join_private(
        self,
        other: Query,
        on: str | Sequence[str],
        *,
        left_rows: int,
        right_rows: int,
        how: Literal["inner", "left"] = "inner",
        truncation: Literal["random", "hash"] = "random",
        suffix: str = "_right",
    ) -> Query:
        """Join another private table of the session on keys that include the privacy unit.

        Each person keeps at most ``left_rows`` of their rows on this side and
        ``right_rows`` on ``other``'s, chosen uniformly at random per release
        (``truncation="random"``) or by a fixed hash of the row's values, the
        same rows every time with one engine version (``"hash"``); never by
        the rows' order in the data. A person then has at most ``left_rows·right_rows`` joined rows,
        and the planner takes that as the limit ``M`` on their rows (``explain``
        shows the derivation); ``bound`` may tighten it. The keys must include
        the privacy unit: a row joined across two people would belong to both,
        and no bound on one person could hold. ``how="left"`` keeps this
        side's rows without a match, with nulls.

        Args:
            other: a query of another private table of this session
                (``sess.query("visits")``, with its own filters and derived
                columns), or of the same table.
            on: the join columns, the privacy unit among them.
            left_rows: l, the most rows a person keeps on this side.
            right_rows: r, the most rows a person keeps on ``other``'s side.
            how: ``"inner"`` or ``"left"``.
            truncation: ``"random"`` (fresh each release) or ``"hash"``.
            suffix: appended to ``other``'s column names that this side has too.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> visits = pl.DataFrame({"pid": [1, 1, 2], "clinic": ["a", "b", "a"]})
            >>> drugs = pl.DataFrame({"pid": [1, 2, 2], "drug": ["x", "y", "x"]})
            >>> sess = pf.Session({"visits": visits, "drugs": drugs}, "pid", pf.zCDP(1.0))
            >>> q = sess.query().join_private(sess.query("drugs"), on="pid", left_rows=2,
            ...                               right_rows=2)
            >>> e = q.group_by("drug", keys=["x", "y"]).agg(pf.count()).explain(rho=0.5)
            >>> for line in e.bound.split("; "):
            ...     print(line)
            join_private(drugs): at most 2 left × 2 right rows per unit: M ≤ 4
            k=2, m=4, M=4: q=1 full groups + r=0 rows: S = q·m² + r² = 16
        """
        if not isinstance(other, Query) or other.session is not self.session:
            raise InvalidArgumentError(
                "join_private joins a query of the same session: "
                "q.join_private(sess.query('visits'), on=...)"
            )
        if other.plan.group_by or other.plan.aggregates or other.plan.bound is not None:
            raise InvalidValueError(
                "the query joined by join_private holds its table and row steps only: "
                "bound, group and aggregate the joined query instead"
            )
        keys = _column_names("join_private on=", on)
        unit = self.session.privacy_unit
        if unit is None:
            raise InvalidValueError(
                "join_private needs a privacy unit: this session's rows are each a person"
            )
        if unit not in keys:
            raise InvalidValueError(
                f"join_private keys {list(keys)} leave out the privacy unit {unit!r}: a row "
                "joined across two people would belong to both, so no bound on one person's "
                f"rows could hold; join on {[unit, *keys]}"
            )
        if how not in ("inner", "left"):
            raise InvalidArgumentError(f"join_private how= must be 'inner' or 'left', got {how!r}")
        step = PrivateJoin(
            table=other.plan.table or next(iter(self.session.private_tables)),
            steps=other.plan.steps,
            on=keys,
            how=how,
            left_rows=_row_limit("left_rows", left_rows),
            right_rows=_row_limit("right_rows", right_rows),
            truncation=_truncation(truncation),
            suffix=_suffix(suffix),
        )
        return self._with(steps=(*self.plan.steps, step))

    @hinted()
    def flat_map(
        self,
        column: str,
        *,
        max_rows: int,
        name: str | None = None,
        truncation: Literal["random", "hash"] = "random",
    ) -> Query:
        """One row to several: each element of a list column becomes a row.

        A basket of items becomes a row per item (empty and null lists give
        none). Each person then keeps at most ``max_rows`` rows in all, chosen
        as :meth:`join_private` chooses (``truncation``): the engine enforces
        it, and the planner takes it as the limit ``M`` on the person's rows.
        The column must be a list column of the data (polars ``List``).

        Args:
            column: a list column.
            max_rows: the most rows one person keeps after the map.
            name: the element's column (by default it replaces the list column).
            truncation: ``"random"`` (fresh each release) or ``"hash"``.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"u": [1, 2], "items": [["tea", "jam"], ["tea"]]})
            >>> sess = pf.Session(df, "u", pf.zCDP(1.0))
            >>> q = sess.query().flat_map("items", max_rows=3, name="item")
            >>> e = q.group_by("item", keys=["tea", "jam"]).agg(pf.count()).explain(rho=1)
            >>> e.bound.split("; ")[0]
            'flat_map(items): at most 3 rows per unit: M ≤ 3'
            >>> e.measurements[0].sensitivity
            3.0
        """
        if not isinstance(column, str) or not column:
            raise InvalidArgumentError(f"flat_map takes a list column's name, got {column!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidArgumentError(f"flat_map name= takes a column name, got {name!r}")
        if max_rows is None:
            raise InvalidValueError(
                "flat_map needs max_rows=: the most rows one person keeps after the map (an "
                "unbounded map would let one person add any number of rows)"
            )
        step = FlatMap(
            column,
            name or column,
            _row_limit("max_rows", max_rows),
            _truncation(truncation),
        )
        return self._with(steps=(*self.plan.steps, step))

    @hinted()
    def per_unit(self, *by: str, **values: UnitValue) -> Query:
        """The per-person stage: one row per person (and ``by`` combination) with their values.

        The first stage of a two-stage aggregation: each person's rows are
        aggregated exactly (``pf.unit.sum``, ``count``, ``mean``, ``min``,
        ``max``, ``first``, ``last``, ``n_unique``), then the query's
        aggregates take grouped private statistics of those per-person values,
        each clamped to the aggregate's public bounds: ``pf.mean("total",
        (0, 1000))`` by region is the average per-person spend. A person has
        one row per combination of ``by``, so grouping by all of them makes
        ``m = 1`` (and ``per_unit()`` with no ``by``, one row per person,
        makes ``M = 1``): the planner derives it, and ``explain`` shows it.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"u": [1, 1, 2], "region": ["n", "n", "s"],
            ...                    "amount": [10.0, 30.0, 5.0]})
            >>> sess = pf.Session(df, "u", pf.zCDP(1.0))
            >>> q = (sess.query().per_unit("region", total=pf.unit.sum("amount"))
            ...      .bound(max_groups=1).group_by("region", keys=["n", "s"])
            ...      .agg(pf.mean("total", (0, 100))))
            >>> for line in q.explain(rho=1).bound.split("; "):
            ...     print(line)
            per_unit(region): one row per unit and group: m = 1
            k=1 groups × m=1 rows: S = k·m² = 1
        """
        if not all(isinstance(c, str) and c for c in by) or len(set(by)) != len(by):
            raise InvalidArgumentError(f"per_unit takes distinct column names, got {list(by)!r}")
        wrong = [n for n, v in values.items() if not isinstance(v, UnitValue)]
        if wrong:
            raise InvalidArgumentError(
                f"per_unit values are per-person values such as pf.unit.sum('amount'); "
                f"{wrong[0]!r} is not one"
            )
        unit = self.session.privacy_unit
        if unit is not None and unit in by:
            raise InvalidValueError(
                f"per_unit always keeps the privacy unit {unit!r}: name only the other columns "
                "to group each person's rows by"
            )
        per_row = [n for n, v in values.items() if v.windowed_only]
        if per_row:
            raise InvalidValueError(
                f"{values[per_row[0]].describe()} is a value per row: use it in with_columns, "
                "not per_unit"
            )
        return self._with(steps=(*self.plan.steps, PerUnit(tuple(by), tuple(values.items()))))

    @hinted()
    def bound(
        self,
        max_groups: int | None = None,
        max_rows_per_group: int | None = None,
        max_rows: int | None = None,
    ) -> Query:
        """Limit what one privacy unit contributes: k groups, m rows per group, M rows.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
            >>> sess.query().bound(max_groups=3, max_rows_per_group=5).plan.bound
            Bound(max_groups=3, max_rows_per_group=5, max_rows=None)
        """
        return self._with(bound=Bound(max_groups, max_rows_per_group, max_rows))

    @hinted()
    def bounds_share(self, share: Number) -> Query:
        """The share of each release's budget that chooses the ``bounds="auto"`` bounds.

        An aggregate with ``bounds="auto"`` (or ``per_unit_bounds="auto"``) has
        its bounds chosen privately when the query is released: ``share`` of
        the release's ρ measures a noisy histogram of its column, the rest
        releases the query (:mod:`privframe.plan.auto_bounds`; the default
        share is 1/10). ``explain`` shows both parts; the ledger records each.

        Raises:
            InvalidBudgetError: ``share`` is not in (0, 1).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
            >>> sess.query().bounds_share(0.25).plan.bounds_share
            Fraction(1, 4)
        """
        return self._with(bounds_share=auto_bounds.check_share(share))

    @hinted()
    def group_by(
        self,
        columns: str | Sequence[str],
        keys: KeySet | Sequence[Any] | pl.DataFrame | pd.DataFrame | None = None,
        other: str | None = None,
    ) -> Query:
        """Group by one column or several, over public ``keys``.

        Args:
            columns: a column name or a list of them.
            keys: the public keys: a list (one column), a DataFrame of key
                rows, or a :class:`~privframe.plan.keys.KeySet` such as
                ``pf.keys.product(region=[...], month=[...])``. Without keys
                the groups are chosen privately from the data, which spends
                δ as well as ρ (see :meth:`release`) and needs
                ``bound(max_groups=...)``. Keys that name only some of the
                columns make them public and the others chosen privately, at
                the same cost: rows whose keyed columns are not a public key
                are dropped, the combinations of the other columns are chosen
                by partition selection (a unit in k groups is in at most k
                combinations, so the selection is the plain one's), and each
                chosen combination gets a row for every public key (a noisy
                zero where no data has it). Its release needs ``delta=``.
            other: with ``keys`` over one string column, the label of one
                extra group that collects the rows whose key is not public
                (and null keys) instead of dropping them. It is a public key
                like the others, and bounding applies to it.

        Raises:
            InvalidValueError: the query already has a group_by (group by
                every column in one call), or the keys do not fit the columns.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"r": ["a"], "m": [1]}), None, pf.zCDP(1.0))
            >>> sess.query().group_by("r", keys=["a", "b"]).plan.group_by
            ('r',)
            >>> keys = pf.keys.product(r=["a", "b"])  # public keys for r; m chosen privately
            >>> sess.query().group_by(["r", "m"], keys=keys).plan.selected
            ('m',)
        """
        if self.plan.group_by:
            # A second call replacing the first would release groups the user did not ask for.
            raise InvalidValueError(
                f"this query already groups by {list(self.plan.group_by)}; call group_by once "
                "with every column, e.g. group_by(['region', 'month'], "
                "keys=pf.keys.product(region=[...], month=[...]))"
            )
        if isinstance(columns, str):
            cols: tuple[str, ...] = (columns,)
        elif isinstance(columns, list | tuple):
            cols = tuple(columns)
        else:
            raise InvalidArgumentError(
                f"group_by takes a column name or a list of them, got {type(columns).__name__}"
            )
        if not cols or not all(isinstance(c, str) for c in cols):
            raise InvalidArgumentError(f"group_by takes column names, got {columns!r}")
        if len(set(cols)) != len(cols):
            raise InvalidValueError(f"group_by names a column twice: {list(cols)}")
        if keys is None:
            if other is not None:
                raise InvalidValueError("other= needs public keys: group_by(..., keys=[...])")
            return self._with(group_by=cols, keys=None, other=None)
        keyset = as_keyset(keys, cols)
        if other is not None and len(keyset.columns) != len(cols):
            raise InvalidValueError(
                "other= needs public keys for every group column; the keys name "
                f"{list(keyset.columns)} of {list(cols)}"
            )
        if other is not None:
            if (
                not isinstance(other, str)
                or len(cols) != 1
                or keyset.to_polars().schema[cols[0]].is_nested()
            ):
                raise InvalidArgumentError(
                    "other= takes a string label, with keys over a single string column"
                )
            if other in keyset.to_polars()[cols[0]].cast(pl.String).to_list():
                raise InvalidValueError(f"other={other!r} is already one of the public keys")
        return self._with(group_by=cols, keys=keyset, other=other)

    @hinted(
        "agg takes aggregates as positional arguments and names their outputs with "
        ".alias(...): agg(pf.count().alias('n'), pf.sum('x', bounds=(0, 10)))"
    )
    def agg(self, *aggregates: Aggregate | PerUnitBounded | tuple[Aggregate, ...]) -> Query:
        """Choose the aggregates to release.

        A tuple (as ``pf.quantile(column, [q1, q2], bounds)`` returns) stands
        for its members.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> [a.output_name for a in sess.query().agg(pf.count()).plan.aggregates]
            ['count']
        """
        flat = [a for item in aggregates for a in (item if isinstance(item, tuple) else (item,))]
        for agg in flat:
            if not isinstance(agg, Aggregate | PerUnitBounded):
                raise InvalidArgumentError(
                    "agg takes aggregates such as pf.count(), pf.sum(...) or pf.mean(...), "
                    f"got {type(agg).__name__}"
                )
        names = [a.output_name for a in (*self.plan.aggregates, *flat)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidValueError(
                f"two aggregates would both be called {duplicates}; give one an .alias(...)"
            )
        if any(isinstance(a, PerUnitBounded) for a in flat):
            query, added = self._clamped_per_unit(flat)
        else:
            query, added = self, [a for a in flat if isinstance(a, Aggregate)]
        return query._with(aggregates=(*query.plan.aggregates, *added))

    def _clamped_per_unit(
        self, flat: Sequence[Aggregate | PerUnitBounded]
    ) -> tuple[Query, list[Aggregate]]:
        """Aggregates with ``per_unit_bounds`` as the per-unit stage and aggregates of its values.

        ``per_unit(<group columns>, <value>=pf.unit.sum(x))`` then
        ``pf.sum(<value>, (L, U))``: each unit has one row per group, so the
        planner derives ``m = 1`` (:mod:`privframe.plan.aggregates.per_unit`).
        """
        rows = [a.output_name for a in flat if isinstance(a, Aggregate)]
        rows += [a.output_name for a in self.plan.aggregates]
        if rows:
            raise InvalidValueError(
                f"per_unit_bounds clamp each privacy unit's value in a group and {rows[0]!r} "
                "clamps each row: one query takes one kind (the per-unit stage replaces the "
                "rows). Give every aggregate per_unit_bounds, or release them in two queries"
            )
        unit = self.session.privacy_unit
        if unit is None:
            raise InvalidValueError(
                "per_unit_bounds clamp each privacy unit's value, and this Session has no "
                "privacy unit (each row is one): use bounds=(lower, upper)"
            )
        bound = self.plan.bound or Bound()
        if bound.max_rows_per_group is not None or bound.max_rows is not None:
            limit = "max_rows_per_group" if bound.max_rows_per_group is not None else "max_rows"
            raise InvalidValueError(
                f"per_unit_bounds clamp each unit's whole value in a group, and {limit} would "
                "drop some of its rows first, which contradicts them (BigQuery has no row "
                f"limit): remove {limit} (bound(max_groups=...) is all they need)"
            )
        group_by = self.plan.group_by
        values: dict[str, UnitValue] = {}
        counted: dict[str, str] = {}  # a per-unit sum's column -> its count of values

        def fresh(name: str) -> str:
            while name in group_by or name == unit or name in values:
                name += "_"
            return name

        out: list[Aggregate] = []
        for agg in flat:
            assert isinstance(agg, PerUnitBounded)
            name = fresh(agg.value_name)
            if agg.kind == "count":
                values[name] = unit_values.count(agg.column)
            elif agg.kind == "mean":
                assert agg.column is not None
                values[name] = unit_values.mean(agg.column)
            else:
                assert agg.column is not None
                values[name] = unit_values.sum(agg.column)
                # BigQuery skips a unit whose values in the group are all NULL; pf.unit.sum
                # gives it 0, which clamping would move to a lower bound above 0.
                counted[name] = fresh(f"{name}_values")
                values[counted[name]] = unit_values.count(agg.column)
            family = Mean if agg.kind == "mean" else Sum
            bounds = AUTO if agg.auto else (agg.lower, agg.upper)
            out.append(summed(family, name, bounds, agg.missing).alias(agg.output_name))
        query = self.per_unit(*group_by, **values)
        if counted:
            query = query.with_columns(
                **{s: pl.when(pl.col(n) > 0).then(pl.col(s)) for s, n in counted.items()}
            )
        return query, out

    @hinted()
    def check(self, with_error: bool = False) -> None:
        """Everything a release checks against the data's schema, without planning a budget.

        Reads no data and spends nothing: the steps fit the columns and types,
        the aggregates' columns exist, and (with ``with_error``) the error
        columns would not collide with outputs. A scheduled run can call it
        for every query before releasing any.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
            >>> sess.query().agg(pf.sum("x", (0, 5))).check(with_error=True)
        """
        self.session.check(self.plan, with_error)

    def _repr_html_(self) -> str:
        """Notebook view: the plan (steps, bound, groups, aggregates); spends nothing."""
        return query_html(self)

    @hinted(**RELEASE_HINTS)
    def explain(
        self,
        rho: Number | None = None,
        weights: Mapping[str, float] | Balance | None = None,
        delta: Number | None = None,
        *,
        epsilon: Number | None = None,
    ) -> Explanation:
        """Sensitivities, budget split, noise and 95% error per output; spends nothing.

        Only public parameters (bounds, limits, keys, ρ or ε, δ) appear:
        nothing is computed from the data. For private key selection it also
        shows the threshold and the group sizes kept with 50% and 95%
        probability. The budget is the session's kind: ``rho`` in a zCDP
        session, ``epsilon`` (and ``delta`` under (ε, δ)-DP) otherwise.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"]}), "u", pf.PureDP(1.0))
            >>> q = sess.query().bound(max_groups=2, max_rows_per_group=3).group_by(
            ...     "r", keys=["a", "b"]).agg(pf.count())
            >>> q.explain(epsilon=0.5).measurements[0].derivation
            'L1 sensitivity W = 6'
        """
        return self.session.explain(self.plan, rho, weights, delta, epsilon=epsilon)

    @hinted(**RELEASE_HINTS)
    @takes_release_options
    def release(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        **options: Unpack[ReleaseKeywords],
    ) -> pl.DataFrame | pd.DataFrame:
        """Spend ``rho`` (or ``epsilon``) and return the noisy result, in the input's kind of frame.

        A zCDP session's releases spend ``rho``, with discrete Gaussian noise.
        A pure-DP session's (``pf.PureDP``) spend ``epsilon``, with discrete
        Laplace noise; an (ε, δ) session's (``pf.ApproxDP``) spend
        ``epsilon`` and ``delta``, with the noise of smaller error
        (``explain`` says which). The other parameter is refused, with what
        to pass.

        Args:
            rho: the zCDP budget this release spends (zCDP sessions).
            epsilon: the ε this release spends (pure-DP and (ε, δ) sessions).
            with_error: add ``<name>_std`` and ``<name>_ci95`` columns per aggregate
                (``<name>_rank_ci95`` for a quantile). They cover the noise only,
                not the bias of rows dropped by the contribution bound or of
                values clipped to their bounds (``tune`` estimates those).
            weights: weights by output name (default 1): the split minimises
                the outputs' variances, each relative to its best and weighted
                by w² (outputs sharing no measurement get ρ in proportion to
                w); or ``pf.balance(rows=..., **expected)`` to split ρ so that
                every output's relative error is about the same.
            label: a label for the ledger entry.
            delta: in a zCDP session, for a query that chooses its groups
                privately (a group_by column without public keys), the δ spent
                on that choice; by default all the δ the session has left.
                With public keys for some group columns only, ``delta`` must be
                given: the others are chosen privately only when asked. Other
                queries spend no δ. In an (ε, δ) session, the δ this release
                spends (default 0: Laplace noise, and no private choice of
                groups); a pure-DP session spends none.
            clamp: clip each estimate into the range its true value can take
                (counts >= 0, means and quantiles within their bounds, ...):
                never a larger error, but biased near the range's edges; False
                for unbiased estimates (:mod:`privframe.plan.postprocess`).
                With ``total``, clamped counts and sums are instead projected to
                agree with the total, which can move a group away from its truth.
            intervals: add ``<name>_ci95_low`` and ``<name>_ci95_high``: the
                95% interval, clipped to the possible range when clamping.
            total: add a row with null group keys for all groups together,
                from the group measurements summed (no extra budget); counts
                and sums of the groups add up to it. A private key selection
                that keeps no group releases no total either.

        Raises:
            BudgetExceededError: the budget does not fit in what remains;
                nothing is released and nothing is charged.
            InvalidArgumentError: an argument it does not take, the budget
                parameter of another kind of session (``epsilon=`` in a zCDP
                session, ``rho=`` in a pure-DP one: the message says what to
                pass), no budget, or no ``delta`` with public keys for some
                group columns only.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.PureDP(1.0))
            >>> sess.query().agg(pf.count()).release(epsilon=0.5).columns, sess.remaining
            (['count'], PureDP(epsilon=0.5))
        """
        request = self.request_with(rho, ReleaseOptions(**options), epsilon=epsilon)
        return self.session.release_all([request])[0]

    @hinted(**RHO_HINTS)
    def tune(
        self,
        rho: Number,
        *,
        plan_rho: Number,
        weights: Mapping[str, float] | Balance | None = None,
        label: str = "tune",
    ) -> Tuned[Query]:
        """Spend a small ``rho`` to choose limits and bounds for a release at ``plan_rho``.

        Estimates privately (charged to the ledger like a release) how many
        groups each unit touches, how many rows it adds per group and where
        each bounded column's values lie, then picks ``max_groups``,
        ``max_rows_per_group`` and value bounds that minimise the estimated
        bias² + noise² of the outputs at ``plan_rho``
        (:func:`privframe.api.tune.tune`; docs/tuning.md).

        Returns:
            a :class:`~privframe.api.tune.Tuned`: ``.query`` to release and
            ``.table`` of the estimates it used.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"u": [1, 1, 2], "x": [1.0, 2.0, 30.0]})
            >>> sess = pf.Session(df, "u", pf.zCDP(1.0))
            >>> q = sess.query().bound(max_rows_per_group=1).agg(pf.sum("x", (0, 1000)))
            >>> tuned = q.tune(0.1, plan_rho=0.9)
            >>> sess.spent.rho, tuned.query.plan.bound is not None
            (0.1, True)
        """
        return tune(self, rho, plan_rho=plan_rho, weights=weights, label=label)

    @hinted(**RELEASE_HINTS)
    @takes_release_options
    def request(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        **options: Unpack[ReleaseKeywords],
    ) -> Request:
        """This query's release as a :class:`Request`, to run with others; spends nothing.

        :meth:`Session.release_all <privframe.api.session.Session.release_all>`
        releases a list of requests all or nothing. The arguments are those
        of :meth:`release`.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> q = sess.query().agg(pf.count())
            >>> [r.columns for r in sess.release_all([q.request(0.5), q.request(0.5)])]
            [['count'], ['count']]
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
            >>> q = sess.query().agg(pf.count())
            >>> q.request_with(0.5, ReleaseOptions(label="n")).options == q.request(
            ...     0.5, label="n").options
            True
        """
        if options.delta is None and self.plan.keys is not None and self.plan.selected:
            # Keys for some group columns only used to be refused: the default δ (all
            # that is left) must not be spent on a column the user forgot to key.
            raise InvalidArgumentError(
                f"group_by columns {list(self.plan.selected)} have no public keys: their "
                "combinations would be chosen privately, spending delta; pass delta=... to "
                f"opt in, or give keys for every group column {list(self.plan.group_by)}"
            )
        options.post_for(self.plan)
        return Request(self, rho, options, epsilon=epsilon)
