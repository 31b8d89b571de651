"""The ``sql`` method a session offers: parse a SELECT, and with ``rho`` release it.

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
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

import polars as pl

from privframe._arguments import RHO_HINTS, hinted
from privframe.api.sql import Column, SQLQuery
from privframe.errors import InvalidArgumentError
from privframe.numeric import Number
from privframe.plan.ir import Bound
from privframe.plan.split import Balance

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SQLEntry"]

_RELEASE_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(SQLQuery.release).parameters.items()
    if parameter.default is not inspect.Parameter.empty
}
"""The defaults of a release's keywords, which ``Session.sql`` without ``rho`` must not move."""


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
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
        with_error: bool = False,
        weights: Mapping[str, float] | Balance | None = None,
        label: str = "",
        delta: float | None = None,
        clamp: bool = True,
        intervals: bool = False,
        total: bool = False,
    ) -> SQLQuery: ...
    @overload
    def sql(
        self,
        text: str,
        rho: Number,
        *,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
        with_error: bool = False,
        weights: Mapping[str, float] | Balance | None = None,
        label: str = "",
        delta: float | None = None,
        clamp: bool = True,
        intervals: bool = False,
        total: bool = False,
    ) -> pl.DataFrame | pd.DataFrame: ...
    @hinted(**RHO_HINTS)
    def sql(
        self,
        text: str,
        rho: Number | None = None,
        *,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
        with_error: bool = False,
        weights: Mapping[str, float] | Balance | None = None,
        label: str = "",
        delta: float | None = None,
        clamp: bool = True,
        intervals: bool = False,
        total: bool = False,
    ) -> SQLQuery | pl.DataFrame | pd.DataFrame:
        """A SQL SELECT over the private table (``data``, or the session's ``name``).

        Parsed with sqlglot into the same plan the builder makes
        (:mod:`privframe.api.sql` lists what is supported). Bounds, keys and
        limits come from the Session's ``metadata`` and ``contributions``;
        ``metadata=`` and ``contributions=`` here override them for this query.
        With ``rho`` it is released at once; the other keywords are those of
        :meth:`Query.release <privframe.api.query.Query.release>` (``clamp=``,
        ``intervals=``, ``total=`` post-process the noisy table before HAVING
        and ORDER BY) and need ``rho``. A query with BigQuery's ``OPTIONS(epsilon=...,
        delta=...)`` carries its own budget: call ``.release()`` on the parsed query.

        Returns:
            without ``rho``: an :class:`~privframe.api.sql.SQLQuery` (``explain``,
            ``release``); with ``rho``: the released DataFrame.

        Raises:
            SQLError: a syntax error or unsupported construct, with its position.
            InvalidArgumentError: a release keyword without ``rho`` (nothing
                would be released, so it would be dropped).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0),
            ...                   metadata={"x": pf.Column(bounds=(0, 5))})
            >>> sorted(sess.sql("SELECT COUNT(*) AS n, SUM(x) FROM data", rho=0.5).columns)
            ['n', 'x_sum']
        """
        parsed = self.parse_sql(text, metadata, contributions)
        release: dict[str, Any] = {
            "with_error": with_error,
            "weights": weights,
            "label": label,
            "delta": delta,
            "clamp": clamp,
            "intervals": intervals,
            "total": total,
        }
        if rho is None:
            # Without rho nothing is released, so these would be silently dropped.
            given = [name for name, value in release.items() if value != _RELEASE_DEFAULTS[name]]
            if given:
                shown = ", ".join(f"{name}=..." for name in given)
                raise InvalidArgumentError(
                    f"{shown} configure a release, and without rho sql() only parses: pass "
                    f"rho=..., or call .release({shown}) on the query it returns (a query "
                    "with OPTIONS(epsilon=..., delta=...) spends those: .release() takes no rho)"
                )
            return parsed
        return parsed.release(rho, **release)
