"""``query.tune``: spend a little ρ to choose contribution limits and value bounds privately.

A query's accuracy depends on its limits (``max_groups`` k, ``max_rows_per_group``
m) and its value bounds (L, U): too small and bounding drops or clips much of
the data (bias); too large and the noise grows with them. :func:`tune` spends a
stated ``rho`` on noisy histograms of how the privacy units contribute (groups
per unit, rows per (unit, group), the values of each bounded column), then
picks the limits and bounds that minimise the estimated error of the query's
outputs released at ``plan_rho``, and returns the tuned query with a table of
the estimates it used (docs/tuning.md).

The steps, budget before bytes as in a release (:mod:`privframe.plan.release`):

1. check the query and the arguments, design the histograms and their noise
   (:func:`privframe.plan.tuning.design`) and refuse what does not fit the
   budget, before reading any data;
2. the engine computes the exact histograms (:mod:`privframe.engines.contributions`),
   never shown; a failure is refused without its message;
3. the accountant charges ``rho`` in one ledger entry (label ``"tune"``), with
   the histograms' discrete Gaussian events;
4. only then is the noise drawn (:mod:`privframe.mechanisms.noise`), and all
   that follows is post-processing: reading the histograms and the search
   (:mod:`privframe.plan.tuning_choice`).

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.api.tune import tune
    >>> df = pl.DataFrame({
    ...     "user": [u for u in range(300) for _ in range(3)],
    ...     "region": ["n", "s", "e"] * 300,
    ...     "amount": [float(i % 40) for i in range(900)],
    ... })
    >>> sess = pf.Session(df, privacy_unit="user", budget=pf.zCDP(2.0))
    >>> q = sess.query().group_by("region", keys=["n", "s", "e"]).agg(
    ...     pf.count(), pf.mean("amount", bounds=(0, 10_000)))
    >>> tuned = tune(q, rho=0.5, plan_rho=1.0)
    >>> sess.spent.rho, [entry.label for entry in sess.ledger]
    (0.5, ['tune'])
    >>> tuned.query.plan.bound
    Bound(max_groups=3, max_rows_per_group=1, max_rows=None)
    >>> tuned.bounds["amount_mean"][1] < 10_000
    True
    >>> tuned.query.release(rho=1.0).columns
    ['region', 'count', 'amount_mean']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import polars as pl

from privframe._arguments import RHO_HINTS, hinted
from privframe.accounting.budgets import zCDP
from privframe.engines.spec import AggregationSpec
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import Number, exact
from privframe.plan import auto_bounds
from privframe.plan.aggregates import Bounded
from privframe.plan.explanation import Explanation
from privframe.plan.ir import Bound, Plan
from privframe.plan.planner import plan_release
from privframe.plan.release import Pipeline
from privframe.plan.split import Balance
from privframe.plan.tuning import design, read, tuned_columns
from privframe.plan.tuning_choice import Choice, Row, choose

__all__ = [
    "TABLE_COLUMNS",
    "Tunable",
    "Tuned",
    "TuningDoor",
    "TuningServer",
    "bias_notes",
    "estimated_bias",
    "tune",
]

TABLE_COLUMNS = ("item", "statistic", "value", "note")
"""The columns of :attr:`Tuned.table`."""


@runtime_checkable
class TuningDoor(Protocol):
    """What tune asks of a session (:class:`~privframe.Session` is one).

    Tune reads the data through the session's own release pipeline, which is
    no part of a Session's API: the two ``__privframe_*__`` methods are a
    protocol between privframe's modules, named as Python's hooks are (like
    ``__dataframe__``) so that users never meet them and no module reaches
    for another's private name.
    """

    def __privframe_pipeline__(self) -> Pipeline:
        """The release pipeline: engine, accountant, privacy unit and noise source."""
        ...

    def __privframe_present__(self, table: pl.DataFrame) -> Any:
        """A public polars table as the session's kind of frame."""
        ...

    def check(self, plan: Plan, with_error: bool = False) -> pl.Schema:
        """Refuse a plan that does not fit the data's public schema; return the schema."""
        ...


@runtime_checkable
class TuningServer(Protocol):
    """A session whose data is on a privframe server, which tunes there (a ``RemoteSession``).

    The server runs :func:`tune` on the analyst's own Session there, charged
    to the analyst's ledger; the hook is named as :class:`TuningDoor`'s are,
    a protocol between privframe's modules that users never meet.
    """

    def __privframe_tune__(
        self,
        plan: Plan,
        rho: Number,
        plan_rho: Number,
        weights: Mapping[str, float] | Balance | None,
        label: str,
    ) -> Tuned[Any]:
        """Tune ``plan`` on the server; the tuned query (of this session) and its estimates."""
        ...


class Tunable(Protocol):
    """A query tune can tune: a frozen dataclass with a session and a plan (a ``Query``)."""

    @property
    def session(self) -> Any:
        """The session the query runs on."""
        ...

    @property
    def plan(self) -> Plan:
        """What the query asks."""
        ...

    def explain(
        self, rho: Number | None = None, weights: Mapping[str, float] | Balance | None = None
    ) -> Explanation:
        """What releasing it at ``rho`` would do, from public parameters."""
        ...


Q = TypeVar("Q", bound=Tunable)


@dataclass(frozen=True, eq=False)
class Tuned(Generic[Q]):
    """What :func:`tune` returns: the tuned query and the estimates it was chosen from.

    Attributes:
        query: the same query with the chosen limits and bounds; release it
            as usual (charged as usual).
        table: the estimates and choices, in the session's kind of frame,
            with columns ``item, statistic, value, note``: the noisy
            quantiles of each histogram, each chosen limit and bound with the
            given one, the bias of bounding beside the noise (rows dropped,
            values clipped, each output's bias ± its uncertainty and σ), and
            the estimated error before and after.
        choice: the search's result (the tuned plan, its estimated errors
            and bias).
    """

    query: Q
    table: Any
    choice: Choice

    @property
    def bound(self) -> Bound | None:
        """The chosen contribution limits."""
        return self.query.plan.bound

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        """The chosen (lower, upper) of each bounded output, by output name."""
        return {
            a.output_name: (a.lower, a.upper)
            for a in self.query.plan.aggregates
            if isinstance(a, Bounded)
        }

    @property
    def plan_rho(self) -> float:
        """The ρ the tuned query was chosen for (the table's ``plan_rho`` row)."""
        return next(float(r[2]) for r in self.choice.table if r[0] == "plan_rho")

    def explain(
        self, rho: Number | None = None, weights: Mapping[str, float] | Balance | None = None
    ) -> Explanation:
        """The tuned query's explanation, with tune's estimated bias of bounding as notes.

        At ``rho`` (``plan_rho`` unless told), so the bias sits beside the
        noise of the release it was estimated for. Spends nothing: the
        explanation is made of public parameters, the notes of the estimates
        tune already made (its table).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"u": range(500), "x": [float(i % 90) for i in range(500)]})
            >>> sess = pf.Session(df, "u", pf.zCDP(1.0))
            >>> tuned = sess.query().agg(pf.sum("x", (0, 1000))).tune(0.1, plan_rho=0.9)
            >>> print(tuned.explain().notes[0])
            bias of bounding, estimated by tune (relative to each output's size, at plan_rho=0.9):
        """
        explanation = self.query.explain(self.plan_rho if rho is None else rho, weights)
        return dataclasses.replace(
            explanation, notes=(*explanation.notes, *bias_notes(self.choice.table, self.plan_rho))
        )

    def __repr__(self) -> str:
        # Public facts only: chosen parameters and DP estimates.
        return (
            f"Tuned(bound={self.bound!r}, bounds={self.bounds!r}, estimated error "
            f"{self.choice.given_error:.4g} given -> {self.choice.error:.4g} tuned)"
        )


def estimated_bias(table: Sequence[Row]) -> dict[str, tuple[float, str]]:
    """Tune's estimated bias of bounding per output, relative to its size, with its uncertainty.

    Read from tune's table (a server's tune returns the table alone): per
    output, the bias and the std of its estimate as the table writes it.

    Example:
        >>> estimated_bias([("s bias", "relative", -0.004, "…, ± 0.001 (the noisy tail)")])
        {'s': (-0.004, '0.001')}
    """
    return {
        item.removesuffix(" bias"): (value, note.rpartition("± ")[2].split(" ")[0])
        for item, statistic, value, note in table
        if statistic == "relative" and item.endswith(" bias")
    }


def bias_notes(table: Sequence[Row], plan_rho: float) -> tuple[str, ...]:
    """Lines stating tune's estimated bias of bounding beside the noise, from its table's rows.

    Example:
        >>> rows = [("rows dropped", "fraction", 0.0, ""), ("s clipped", "fraction", 0.01, ""),
        ...         ("s bias", "relative", -0.004, "…, ± 0.001 (the noisy tail)"),
        ...         ("s noise", "relative", 0.002, "")]
        >>> for line in bias_notes(rows, 0.9):
        ...     print(line)
        bias of bounding, estimated by tune (relative to each output's size, at plan_rho=0.9):
          rows dropped by max_groups and max_rows_per_group: 0%
          s: bias -0.004 ± 0.001 beside noise σ 0.002; its bounds clip 1% of the values' mass
    """
    values = {(item, statistic): value for item, statistic, value, _ in table}
    if ("rows dropped", "fraction") not in values:
        return ()  # a table from before tune estimated its bias
    lines = [
        "bias of bounding, estimated by tune (relative to each output's size, at "
        f"plan_rho={plan_rho:g}):",
        "  rows dropped by max_groups and max_rows_per_group: "
        f"{values[('rows dropped', 'fraction')]:.2%}".replace(".00%", "%"),
    ]
    for name, (bias, uncertainty) in estimated_bias(table).items():
        line = (
            f"  {name}: bias {bias:.3g} ± {uncertainty} beside noise "
            f"σ {values[(f'{name} noise', 'relative')]:.3g}"
        )
        clipped = values.get((f"{name} clipped", "fraction"))
        if clipped is not None:
            line += f"; its bounds clip {clipped:.2%} of the values' mass".replace(".00%", "%")
        lines.append(line)
    return tuple(lines)


def _rows_spec(
    pipeline: Pipeline,
    plan: Plan,
    schema: pl.Schema,
    plan_rho: Number,
    weights: Mapping[str, float] | Balance | None,
) -> AggregationSpec:
    """The rows a release of ``plan`` aggregates (steps, keys, ``other``), before bounding.

    Planning the query at ``plan_rho`` with placeholder limits also refuses,
    before anything is read or charged, a ``plan_rho`` or ``weights`` the
    tuned release could not use.
    """
    has_unit = pipeline.unit is not None
    placeholder = dataclasses.replace(plan, bound=Bound(max_rows_per_group=1)) if has_unit else plan
    release = plan_release(placeholder, has_unit, plan_rho, weights)
    return pipeline.spec(placeholder, release, schema)


def _door(query: object) -> tuple[TuningDoor, Plan]:
    """The query's session (as tune needs it) and plan; refuses anything else."""
    session = getattr(query, "session", None)
    plan = getattr(query, "plan", None)
    if not isinstance(session, TuningDoor) or not isinstance(plan, Plan):
        raise InvalidArgumentError(
            "tune takes a query built from a privframe Session or a session on a privframe "
            "server (pf.connect), e.g. sess.query().group_by(...).agg(...)"
        )
    return session, plan


@hinted(**RHO_HINTS, plan_rho="pass plan_rho=...: the rho you plan to spend on the release")
def tune(
    query: Q,
    rho: Number,
    *,
    plan_rho: Number,
    weights: Mapping[str, float] | Balance | None = None,
    label: str = "tune",
) -> Tuned[Q]:
    """Spend ``rho`` to choose the query's limits and bounds for a release at ``plan_rho``.

    Measures, with discrete Gaussian noise, the distribution of groups per
    unit, of rows per (unit, group) and of each bounded column's values (each
    a histogram to which one unit adds at most 1 in total: L2 sensitivity 1,
    derived in :mod:`privframe.plan.tuning`), at ``rho/n`` each, ``rho`` in
    all (zCDP composition; one ledger entry). Then chooses ``max_groups``,
    ``max_rows_per_group`` and each bounded aggregate's bounds to minimise
    the estimated Σ (bias² + u² + σ²)/size² over the outputs, with σ from the
    planner at ``plan_rho`` and ``weights`` (as ``explain`` shows them), and
    the bias read from the histograms, with its uncertainty u where it rests
    on the raw noisy buckets of a sparse tail. A
    quantile's bounds are set to span its column's 0.1% to 99.9% points;
    ``max_rows`` is dropped. The estimates are approximate: docs/tuning.md
    says what they assume.

    Args:
        query: the query to tune (its steps, groups and aggregates stay).
        rho: the zCDP budget tune spends, e.g. a tenth of the release's.
        plan_rho: the ρ you plan to release the tuned query at.
        weights: the release's budget weights, if it will use any.
        label: the ledger entry's label.

    Returns:
        A :class:`Tuned`: ``.query`` to release, ``.table`` of estimates.

    Raises:
        BudgetExceededError: ``rho`` does not fit; nothing is read or charged.
        InvalidBudgetError: ``rho`` or ``plan_rho`` is not positive.
        InvalidValueError: the query has no aggregates, chooses its groups
            privately, has nothing to tune, or runs on an engine that cannot
            summarise contributions (polars and Spark can; a session on a
            privframe server tunes there); nothing is charged.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.tune import tune
        >>> sess = pf.Session(pl.DataFrame({"u": [1, 2], "x": [1.0, 2.0]}), "u", pf.zCDP(1.0))
        >>> tuned = tune(sess.query().agg(pf.sum("x", (0, 100))), rho=0.1, plan_rho=0.9)
        >>> list(tuned.table.columns), sess.spent.rho
        (['item', 'statistic', 'value', 'note'], 0.1)
    """
    remote = getattr(query, "session", None)
    if isinstance(remote, TuningServer) and isinstance(getattr(query, "plan", None), Plan):
        # The server tunes on the analyst's Session there, with every check made here.
        return remote.__privframe_tune__(query.plan, rho, plan_rho, weights, label)
    session, plan = _door(query)
    if auto_bounds.asks(plan):
        raise InvalidValueError(
            'tune searches from the bounds a query gives, and bounds="auto" gives none: give '
            "bounds=(lower, upper), a wide public range, for tune to narrow; or release the "
            'query with bounds="auto", which chooses them with a share of its own budget'
        )
    budget = session.__privframe_pipeline__().accountant.budget
    if not isinstance(budget, zCDP):
        raise InvalidValueError(
            f"tune measures with Gaussian noise and spends rho, and this session's budget is "
            f"{budget!r}: choose the limits and bounds by hand (from public knowledge of the "
            "data, never from looking at it); tuning elsewhere would spend budget on this data "
            "outside this session's guarantee"
        )
    asked = exact("rho", rho, positive=True)
    target = exact("plan_rho", plan_rho, positive=True)
    if not isinstance(label, str):
        raise InvalidArgumentError(f"label must be a str, got {type(label).__name__}")
    pipeline = session.__privframe_pipeline__()
    schema = session.check(plan)
    if pipeline.unit is not None and pipeline.unit in tuned_columns(plan):
        raise InvalidValueError(
            f"tune cannot choose bounds for the privacy unit column {pipeline.unit!r}: "
            "aggregate a copy of it made with with_columns, or give its bounds by hand"
        )
    tuning = design(plan, pipeline.unit is not None, pipeline.accountant.affordable(asked))
    rows = _rows_spec(pipeline, plan, schema, target, weights)
    spec = tuning.contribution_spec(rows)
    description = {**tuning.describe(), "plan_rho": float(target)}
    estimates = read(tuning, pipeline.measure_contributions(tuning, spec, label, description))
    choice = choose(plan, estimates, target, weights)
    table = pl.DataFrame(choice.table, schema=list(TABLE_COLUMNS), orient="row")
    tuned_query = dataclasses.replace(query, plan=choice.plan)  # type: ignore[type-var]
    return Tuned(tuned_query, session.__privframe_present__(table), choice)
