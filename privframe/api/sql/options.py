"""BigQuery/ZetaSQL's differential privacy clause: its options, and the budget they make.

``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6,
max_groups_contributed=2, privacy_unit_column=id) ...`` (and the older ``WITH
ANONYMIZATION OPTIONS(epsilon=..., delta=..., kappa=...)``) becomes a frozen
:class:`PrivacyOptions`:

* ``epsilon`` and ``delta`` are this query's whole spend, (ε, δ)-DP as in
  BigQuery. In a pure-DP session (``pf.PureDP``) the query spends exactly
  ``epsilon`` (``delta`` is refused: pure DP has none), and in an (ε, δ)
  session (``pf.ApproxDP``) exactly ``epsilon`` and ``delta``, with no
  conversion (the release chooses its noise, :func:`~privframe.plan.planner.plan_approx_release`).
  A zCDP session spends zCDP: the query spends the largest ρ whose
  tightest conversion gives (ε, δ) (:meth:`pf.ApproxDP.to_zcdp
  <privframe.accounting.budgets.ApproxDP.to_zcdp>`, Canonne, Kamath & Steinke
  2020, Cor. 13, floored by Bun & Steinke 2016, Prop. 1.3). When its groups
  are chosen privately (GROUP BY without public keys), δ is split: δ/2
  (rounded down to a float) is spent on choosing the groups and ρ is the
  conversion of (ε, δ − δ/2). The two compose as approximate zCDP (Bun &
  Steinke 2016, Def. 1.4: ρ and δ add), and (ρ, δ_s)-approximate zCDP with ρ
  converted at δ₁ is (ε, δ₁ + δ_s)-DP (the proof is in ``to_zcdp``'s
  docstring): the query is (ε, δ)-DP, as its OPTIONS say. OPTIONS ``delta`` is
  the user's consent to spend δ on choosing groups, so no ``delta=`` is needed.
* ``max_groups_contributed`` (``kappa`` in the older form) is the contribution
  bound's ``max_groups``. When absent: the Session's ``contributions``
  ``max_groups`` if it has one, else 1. ZetaSQL leaves this default to the
  engine and recommends engines require the option (docs/query-syntax.md,
  "max_groups_contributed"); with no limit privframe could not bound the
  sensitivity, so it never runs without one.
* ``privacy_unit_column`` must name the Session's privacy unit (matched as
  SQL matches names); it does not choose one.
* ``group_selection_strategy=PUBLIC_GROUPS`` requires public keys for every
  GROUP BY column; ``LAPLACE_THRESHOLD`` (the default) allows private
  selection, which privframe does with its own Gaussian threshold.

BigQuery splits ε evenly between the aggregates and its group threshold;
privframe splits ρ between the measurements to minimise their errors
(``weights=`` on the release), and always states the whole query's (ε, δ).

Example:
    >>> import sqlglot
    >>> from privframe.api.sql.dialect import Privframe
    >>> from privframe.api.sql.options import read_options
    >>> select = sqlglot.parse_one(
    ...     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) COUNT(*) FROM t",
    ...     read=Privframe)
    >>> options = read_options(select.args["hint"], "u")
    >>> options.epsilon, options.delta
    (Fraction(1, 1), Fraction(1, 1000000))
    >>> spend = options.spend(selects=True)
    >>> spend.selection_delta, round(float(spend.rho), 6)
    (5e-07, 0.022937)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from privframe.accounting.budgets import ApproxDP
from privframe.api.sql._common import identifier, literal_value, lookup, position, refuse
from privframe.api.sql.dialect import PrivacyClause
from privframe.errors import SQLError
from privframe.numeric import exact

CITATION = (
    "Canonne, Kamath & Steinke 2020, Cor. 13 (the largest rho whose conversion gives "
    "(epsilon, delta)); approximate zCDP composition, Bun & Steinke 2016"
)
"""Where the (ε, δ) → ρ mapping of :meth:`PrivacyOptions.spend` comes from."""

_KNOWN = (
    "epsilon",
    "delta",
    "max_groups_contributed",
    "kappa",
    "privacy_unit_column",
    "group_selection_strategy",
)
_STRATEGIES = ("LAPLACE_THRESHOLD", "PUBLIC_GROUPS")


@dataclass(frozen=True)
class OptionsBudget:
    """What one query with OPTIONS(epsilon, delta) spends.

    Attributes:
        rho: the zCDP ρ (exact; the float conversion's value).
        selection_delta: the δ spent on choosing groups privately, or None. Like
            every float budget parameter in privframe, it means the shortest
            decimal that rounds to it (:attr:`exact_selection_delta`): the ρ
            conversion reserved exactly that, and the session charges exactly that.
        epsilon, delta: the OPTIONS they come from.
    """

    rho: Fraction
    selection_delta: float | None
    epsilon: Fraction
    delta: Fraction

    @property
    def exact_selection_delta(self) -> Fraction:
        """The δ spent on choosing groups, as the exact rational charged (0 if none)."""
        return exact("selection_delta", self.selection_delta or 0)

    def describe(self) -> str:
        """One line for ``explain``: (ε, δ) → ρ, δ_selection, with the citation.

        Example:
            >>> from fractions import Fraction
            >>> from privframe.api.sql.options import OptionsBudget
            >>> OptionsBudget(Fraction(1, 8), None, Fraction(1), Fraction(1, 10**6)).describe()[:60]
            'OPTIONS(epsilon=1, delta=1e-06) -> rho = 0.125 (all of delta'
        """
        head = f"OPTIONS(epsilon={float(self.epsilon):g}, delta={float(self.delta):g}) -> "
        if self.selection_delta is None:
            body = f"rho = {float(self.rho):.6g} (all of delta converts to rho)"
        else:
            body = (
                f"rho = {float(self.rho):.6g} at delta - delta_selection, and "
                f"delta_selection = {self.selection_delta:.6g} spent choosing the groups "
                "privately (delta split in halves)"
            )
        return f"{head}{body}; the query is (epsilon, delta)-DP [{CITATION}]"


@dataclass(frozen=True)
class PrivacyOptions:
    """The options of one differential privacy clause, checked.

    Attributes:
        clause: ``DIFFERENTIAL_PRIVACY`` or ``ANONYMIZATION``.
        epsilon, delta: the query's (ε, δ), exactly as written; None when not given.
        max_groups: ``max_groups_contributed`` (or ``kappa``), if given.
        public_groups: ``group_selection_strategy=PUBLIC_GROUPS``.
        position: where the clause starts, for errors.
    """

    clause: str
    epsilon: Fraction | None = None
    delta: Fraction | None = None
    max_groups: int | None = None
    public_groups: bool = False
    position: tuple[int, int] | None = None

    @property
    def construct(self) -> str:
        """The clause as a construct name, ``WITH DIFFERENTIAL_PRIVACY OPTIONS``."""
        return _construct(self.clause)

    def check(self, needs_delta: bool = True) -> None:
        """Refuse a budget that is not one: epsilon 0, delta without epsilon, or no delta.

        ``needs_delta``: a zCDP session's Gaussian noise cannot give pure ε-DP,
        so there ``epsilon`` needs a ``delta``; pure-DP and (ε, δ) sessions'
        releases can (Laplace noise).

        Example:
            >>> from fractions import Fraction
            >>> from privframe.api.sql.options import PrivacyOptions
            >>> try:
            ...     PrivacyOptions("DIFFERENTIAL_PRIVACY", epsilon=Fraction(1)).check()
            ... except Exception as err:
            ...     print(str(err)[:60])
            WITH DIFFERENTIAL_PRIVACY OPTIONS needs delta > 0 with epsil

        Raises:
            SQLError: naming the clause, with its position.
        """
        problem = None
        if self.epsilon is None and self.delta is not None:
            problem = (
                "gives delta without epsilon: a query's budget is both, e.g. "
                "OPTIONS(epsilon=1, delta=1e-6); or leave both out and pass rho="
            )
        elif self.epsilon is not None and self.epsilon <= 0:
            problem = "needs epsilon > 0: a release with no budget cannot add finite noise"
        elif needs_delta and self.epsilon is not None and not self.delta:
            problem = (
                "needs delta > 0 with epsilon in a zCDP session: its Gaussian noise gives "
                "(epsilon, delta)-DP, never pure epsilon-DP; e.g. delta=1e-6 (or open the "
                "session with budget=pf.PureDP(epsilon=...) for pure DP)"
            )
        if problem is not None:
            raise SQLError(
                f"{self.construct} {problem}", construct=self.construct, position=self.position
            )

    def spend(self, selects: bool) -> OptionsBudget | None:
        """The query's ρ (and δ for choosing groups, if ``selects``); None without epsilon.

        Example:
            >>> from fractions import Fraction
            >>> from privframe.api.sql.options import PrivacyOptions
            >>> options = PrivacyOptions("DIFFERENTIAL_PRIVACY", Fraction(1), Fraction(1, 10**6))
            >>> options.spend(selects=True).selection_delta
            5e-07

        Raises:
            SQLError: delta is missing or 0 (pure ε-DP, which Gaussian noise cannot
                give), or delta is given without epsilon.
        """
        self.check()
        epsilon, delta = self.epsilon, self.delta
        if epsilon is None or delta is None:  # checked: both are given, or neither
            return None
        reserve = None
        if selects:
            reserve = float(delta / 2)
            # Read as privframe reads it (its repr's decimal); never more than half.
            while exact("selection_delta", reserve) > delta / 2:
                reserve = math.nextafter(reserve, 0.0)
        converted = ApproxDP(epsilon, delta).to_zcdp(selection_delta=reserve or 0)
        return OptionsBudget(converted.exact_rho, reserve, epsilon, delta)


def read_options(
    clause: PrivacyClause, unit: str | None, needs_delta: bool = True
) -> PrivacyOptions:
    """The checked options of ``clause``; ``unit`` is the Session's privacy unit.

    ``needs_delta`` is :meth:`PrivacyOptions.check`'s: False in a pure-DP or
    (ε, δ) session.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.dialect import Privframe
        >>> from privframe.api.sql.options import read_options
        >>> from privframe.api.sql.statement import privacy_clause
        >>> select = sqlglot.parse_one("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, "
        ...     "delta=1e-6, max_groups_contributed=2) COUNT(*) FROM t", read=Privframe)
        >>> read_options(privacy_clause(select), "id").max_groups
        2

    Raises:
        SQLError: an unknown option, a value of the wrong kind, an option given
            twice, or a ``privacy_unit_column`` that is not the Session's unit.
    """
    values: dict[str, exp.Expr] = {}
    for option in clause.expressions:
        name = option.this.name.casefold() if isinstance(option, exp.EQ) else ""
        if name not in _KNOWN:
            raise _unknown(clause, option)
        if name in values or {name, *values} >= {"kappa", "max_groups_contributed"}:
            raise refuse(option, name, f"{name} is given twice in {_construct(clause)}")
        values[name] = option.expression
    if "privacy_unit_column" in values:
        _check_unit(values["privacy_unit_column"], unit)
    groups = values.get("max_groups_contributed", values.get("kappa"))
    options = PrivacyOptions(
        clause=str(clause.this),
        epsilon=_number(values, "epsilon", clause),
        delta=_number(values, "delta", clause),
        max_groups=None if groups is None else _positive_int(groups),
        public_groups=_strategy(values.get("group_selection_strategy")),
        position=position(clause),
    )
    options.check(needs_delta)
    return options


def _construct(clause: PrivacyClause | str) -> str:
    """``WITH DIFFERENTIAL_PRIVACY OPTIONS``, or ``WITH ANONYMIZATION OPTIONS``."""
    return f"WITH {clause if isinstance(clause, str) else clause.this} OPTIONS"


def _unknown(clause: PrivacyClause, option: exp.Expr) -> SQLError:
    name = option.this.name if isinstance(option, exp.EQ) else option.sql()
    hint = ""
    if name.casefold() == "k_threshold":
        hint = "; privframe sets the group threshold from delta: give delta instead"
    return refuse(
        option,
        f"the option {name}",
        f"{_construct(clause)} has no option {name!r}{hint}; the options are {', '.join(_KNOWN)}",
    )


def _number(values: dict[str, exp.Expr], name: str, clause: PrivacyClause) -> Fraction | None:
    node = values.get(name)
    if node is None:
        return None
    value = literal_value(node)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise refuse(node, name, f"{name} must be a number >= 0, got {node.sql()}")
    if name == "delta" and value >= 1:
        raise refuse(node, name, f"delta must be below 1, got {node.sql()}")
    if not math.isfinite(value):
        raise refuse(node, name, f"{name} must be finite, got {node.sql()}")
    if not isinstance(node, exp.Literal):
        return Fraction(str(value))
    # The exact rational the user wrote (0.1 is 1/10, not the double nearest it), read
    # only from text of a sane size: Fraction makes 10**n of an exponent n, and Python
    # refuses an integer of over 4300 digits.
    mantissa, _, power = node.this.lower().partition("e")
    if len(mantissa) > 100 or len(power.lstrip("+-")) > 3:
        shown = node.this if len(node.this) <= 30 else f"{node.this[:30]}..."
        raise refuse(
            node,
            name,
            f"{name}={shown} has too many digits or too large an exponent to be "
            f"read exactly: write it with at most 100 digits and a 3-digit exponent, e.g. "
            f"{name}=1e-6",
        )
    return Fraction(node.this)


def _positive_int(node: exp.Expr) -> int:
    value = literal_value(node)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise refuse(
            node,
            "max_groups_contributed",
            f"max_groups_contributed must be a positive integer, got {node.sql()}",
        )
    return value


def _strategy(node: exp.Expr | None) -> bool:
    if node is None:
        return False
    word = node.name.upper() if isinstance(node, exp.Column | exp.Literal) else ""
    if word not in _STRATEGIES:
        raise refuse(
            node,
            "group_selection_strategy",
            f"group_selection_strategy is LAPLACE_THRESHOLD or PUBLIC_GROUPS, got {node.sql()}",
        )
    return word == "PUBLIC_GROUPS"


def _check_unit(node: exp.Expr, unit: str | None) -> None:
    """``privacy_unit_column`` must name the Session's privacy unit (SQL name matching)."""
    if not isinstance(node, exp.Column):
        raise refuse(node, "privacy_unit_column", "privacy_unit_column names a column")
    name, quoted = identifier(node)
    if unit is not None and lookup(name, quoted, [unit]):
        return
    protected = (
        f"this Session's privacy unit is {unit!r}"
        if unit is not None
        else "this Session protects single rows (it has no privacy unit column)"
    )
    raise refuse(
        node,
        "privacy_unit_column",
        f"privacy_unit_column={node.sql()} is not the Session's privacy unit: {protected}. "
        "The privacy unit is chosen when the Session is opened (pf.Session(data, "
        "privacy_unit, ...)); write that column, or leave the option out",
    )
