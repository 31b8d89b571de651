"""``pf.plan_budget``: the budget planner's door, for queries and for report specs.

Queries are planned by :func:`privframe.api.budget_plan.plan_queries`; a
report spec by its dry run (:func:`privframe.api.report_run.prepare`, which
reads the data's schema and the ledger's balance, and spends nothing) and
:meth:`Report.budget_plan <privframe.api.report_run.Report.budget_plan>`.
This module sits above both, so that neither imports the other's door.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"]}), "u", pf.zCDP(1.0))
    >>> q = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by(
    ...     "r", keys=["a", "b"]).agg(pf.count())
    >>> pf.plan_budget({"by_r": q}, rho=0.5).split
    {'by_r': Fraction(1, 2)}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privframe.api.budget_plan import BudgetPlan, plan_queries
from privframe.api.report_run import prepare
from privframe.api.report_spec import load_spec
from privframe.errors import InvalidArgumentError
from privframe.numeric import Number
from privframe.plan.split import Balance

__all__ = ["plan_budget"]


def plan_budget(
    items: str | Path | Sequence[Any] | Mapping[str, Any],
    *,
    rho: Number | None = None,
    epsilon: Number | None = None,
    shares: Mapping[str, Number] | None = None,
    rows: float | Mapping[str, float] | None = None,
    weights: Mapping[str, Mapping[str, float] | Balance] | None = None,
    delta: Number | Mapping[str, Number] | None = None,
) -> BudgetPlan:
    """Plan a total budget over queries: each output's 95% interval, and each query's budget.

    Spends nothing and reads no data beyond what ``explain`` reads (public
    metadata): every number comes from the queries' public parameters, and
    equals what their releases at :attr:`BudgetPlan.split
    <privframe.api.budget_plan.BudgetPlan.split>` report.

    Args:
        items: the queries: a list (named ``query 1``, ...) or a mapping from
            name to query, of one session; or the path of a report spec (its
            queries, ``[[marginals]]`` and ``[[synthetic]]`` entries, at their
            shares). A query is a Session's ``query()`` chain,
            ``parse_sql(...)``, or a tuned query (``query.tune(...)``), whose
            estimated bias of bounding is shown beside the noise.
        rho: the total budget of a zCDP session's queries. Default: a
            spec's entries' budgets added up, else what the session has left.
        epsilon: the total budget of a pure-DP or (ε, δ) session's queries
            (default as for ``rho``).
        shares: each query's share of the total (adding up to at most 1).
            Default: a spec's own, else equal shares.
        rows: a public guess of the rows in a group (one number, or per
            query), to state a mean's or variance's interval as a number.
        weights: per query, how its budget is split over its measurements
            (``weights=`` of its ``explain`` and ``release``, e.g.
            ``pf.balance(...)``); release it with the same weights. Not for
            a spec, whose queries are released with the default split.
        delta: the δ each query spends (one number, or per query): a query
            that chooses its groups privately spends δ, and in an (ε, δ)
            session a release may (Gaussian noise). Default: what the
            session has left, split evenly over the queries that choose
            their groups; none for the rest. A spec's queries spend their
            own ``delta``. :attr:`BudgetPlan.deltas
            <privframe.api.budget_plan.BudgetPlan.deltas>` says what to
            release each with.

    Raises:
        InvalidArgumentError: no query, queries of several sessions, a share
            or weight for no query, or a total in the other kind's parameter.
        InvalidValueError: shares adding up to more than 1, or δ in a pure-DP session.
        SpecError: a spec that does not load or plan (every bad entry named).

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
        >>> q = sess.query().bound(max_rows=1).agg(pf.count(), pf.sum("x", bounds=(0, 10)))
        >>> plan = pf.plan_budget({"totals": q}, rho=0.5)
        >>> [o.output for o in plan.outputs], sess.spent.rho
        (['count', 'x_sum'], 0.0)
    """
    if not isinstance(items, str | Path):
        return plan_queries(
            items, rho=rho, epsilon=epsilon, shares=shares, rows=rows, weights=weights, delta=delta
        )
    if weights is not None or delta is not None:
        raise InvalidArgumentError(
            "weights= and delta= are for queries: a report spec's queries spend the delta it "
            "gives them, with the default split of their budget"
        )
    report = prepare(load_spec(Path(items)), dry_run=True, fits=False)
    return report.budget_plan(rho=rho, epsilon=epsilon, shares=shares, rows=rows)
