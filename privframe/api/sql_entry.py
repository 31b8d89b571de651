"""The ``sql`` method a session offers: parse a SELECT and, when its budget is known, release it.

A local :class:`~privframe.Session` and a server's
:class:`~privframe.api.client.RemoteSession` share it: each says how it
parses (:meth:`SQLEntry.parse_sql`: its table, its public facts), and
``sql`` does the rest the same way for both.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.api.sql_entry import SQLEntry
    >>> isinstance(pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0)), SQLEntry)
    True
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import TYPE_CHECKING, Unpack, overload

import polars as pl

from privframe._arguments import RELEASE_HINTS, hinted
from privframe.api.sql import Column, SQLQuery
from privframe.errors import InvalidArgumentError
from privframe.numeric import Number
from privframe.plan.ir import Bound
from privframe.plan.release_options import ReleaseKeywords, ReleaseOptions, takes_release_options

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SQLEntry"]


class SQLEntry(abc.ABC):
    """A session's ``sql``: :meth:`parse_sql` is the session's own; ``sql`` is shared."""

    @abc.abstractmethod
    def parse_sql(
        self,
        text: str,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
    ) -> SQLQuery:
        """``text`` parsed over the session's table and public facts."""

    @overload
    def sql(
        self,
        text: str,
        rho: None = None,
        *,
        epsilon: None = None,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
        **options: Unpack[ReleaseKeywords],
    ) -> SQLQuery | pl.DataFrame | pd.DataFrame: ...
    @overload
    def sql(
        self,
        text: str,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
        **options: Unpack[ReleaseKeywords],
    ) -> pl.DataFrame | pd.DataFrame: ...
    @hinted(**RELEASE_HINTS)
    @takes_release_options
    def sql(
        self,
        text: str,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
        **options: Unpack[ReleaseKeywords],
    ) -> SQLQuery | pl.DataFrame | pd.DataFrame:
        """A SQL SELECT over the private table (``data``, or the session's ``name``).

        Parsed with sqlglot into the same plan the builder makes
        (:mod:`privframe.api.sql` lists what is supported). Bounds, keys and
        limits come from the Session's ``metadata`` and ``contributions``;
        ``metadata=`` and ``contributions=`` here override them for this query
        (``contributions=`` those of the private table FROM reads).
        It is released at once when its budget is known: with ``rho`` (or
        ``epsilon`` in a pure-DP or (ε, δ) session), or
        when the query carries its own, as BigQuery's ``SELECT WITH
        DIFFERENTIAL_PRIVACY OPTIONS(epsilon=..., delta=...)`` does (``rho=``
        as well is refused: the budget would be given twice). The other
        keywords are those of :meth:`Query.release
        <privframe.api.query.Query.release>` (``clamp=``, ``intervals=``,
        ``total=`` post-process the noisy table before HAVING and ORDER BY).
        Otherwise the query is only parsed, as :meth:`parse_sql` does, which
        parses a query with OPTIONS too (to ``explain`` it first).

        Returns:
            the released DataFrame; or, without a budget, an
            :class:`~privframe.api.sql.SQLQuery` (``explain``, ``release``).

        Raises:
            SQLError: a syntax error or unsupported construct, with its position.
            InvalidArgumentError: a release keyword without a budget (nothing
                would be released, so it would be dropped).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0),
            ...                   metadata={"x": pf.Column(bounds=(0, 5))})
            >>> sorted(sess.sql("SELECT COUNT(*) AS n, SUM(x) FROM data", rho=0.5).columns)
            ['n', 'x_sum']
            >>> sess.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) "
            ...          "COUNT(*) AS n FROM data").columns  # spends what OPTIONS say
            ['n']
            >>> round(sess.spent.rho - 0.5, 6)
            0.024356
        """
        parsed = self.parse_sql(text, metadata, contributions)
        if rho is not None or epsilon is not None or parsed.carries_budget:
            return parsed.release(rho, epsilon=epsilon, **options)
        # Nothing is released, so options that are not the defaults would be dropped.
        given = ReleaseOptions(**options).given()
        if given:
            shown = ", ".join(f"{name}=..." for name in given)
            raise InvalidArgumentError(
                f"{shown} configure a release, and without rho sql() only parses: pass "
                f"rho=..., or call .release({shown}) on the query it returns"
            )
        return parsed
