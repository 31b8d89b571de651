"""The three kinds of budget an accountant and a ledger keep, and how a ledger stores them.

A ledger stores every cost in two exact columns, whatever its kind: ``(ρ, δ)``
for a :class:`~privframe.accounting.zCDP` ledger, ``(ε, 0)`` for a
:class:`~privframe.accounting.PureDP` one and ``(ε, δ)`` for an
:class:`~privframe.accounting.ApproxDP` one. A ledger file names its kind in
its meta table (``model``: absent for zCDP, the kind of every file before
there were others). These helpers translate between budgets, columns and
names, for the ledger modules and the accountant.

Example:
    >>> from fractions import Fraction
    >>> import privframe as pf
    >>> columns(pf.PureDP(0.5))
    (Fraction(1, 2), Fraction(0, 1))
    >>> from_columns(pf.ApproxDP, Fraction(1, 2), Fraction(1, 10**6))
    ApproxDP(epsilon=0.5, delta=1e-06)
    >>> model_name(pf.PureDP), kind_of("approx_dp").__name__
    ('pure_dp', 'ApproxDP')
"""

from __future__ import annotations

from fractions import Fraction
from typing import TypeAlias

from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.errors import InvalidArgumentError, InvalidBudgetError

__all__ = [
    "KINDS",
    "Kind",
    "Spendable",
    "check_kind",
    "columns",
    "from_columns",
    "kind_of",
    "model_name",
    "parameters",
    "with_article",
]

Spendable: TypeAlias = zCDP | PureDP | ApproxDP
"""A budget an accountant spends in its own kind (a GDP budget is spent as zCDP)."""

Kind: TypeAlias = type[zCDP] | type[PureDP] | type[ApproxDP]
"""The type of a :data:`Spendable` budget: what kind of ledger and accountant it makes."""

KINDS: dict[Kind, str] = {zCDP: "zcdp", PureDP: "pure_dp", ApproxDP: "approx_dp"}
"""Each kind and the name a ledger file's meta table records for it (``model``)."""


def model_name(kind: Kind) -> str:
    """The name a ledger records for ``kind``.

    Example:
        >>> import privframe as pf
        >>> model_name(pf.zCDP)
        'zcdp'
    """
    return KINDS[kind]


def kind_of(name: str) -> Kind:
    """The kind a ledger's recorded name stands for.

    Raises:
        ValueError: an unknown name (a damaged or newer file).

    Example:
        >>> kind_of("pure_dp").__name__
        'PureDP'
    """
    for kind, known in KINDS.items():
        if known == name:
            return kind
    raise ValueError(f"unknown budget kind {name!r}")


def check_kind(kind: object) -> Kind:
    """``kind`` if it is one of the kinds a ledger keeps, else an InvalidArgumentError.

    Example:
        >>> import privframe as pf
        >>> check_kind(pf.ApproxDP).__name__
        'ApproxDP'
    """
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind must be privframe.zCDP, PureDP or ApproxDP, got {kind!r}")
    return kind


def columns(budget: Spendable) -> tuple[Fraction, Fraction]:
    """The two exact columns a ledger stores ``budget`` as.

    Example:
        >>> import privframe as pf
        >>> columns(pf.zCDP(0.5, delta=1e-9))
        (Fraction(1, 2), Fraction(1, 1000000000))
    """
    if isinstance(budget, zCDP):
        return budget.exact_rho, budget.exact_delta
    if isinstance(budget, PureDP):
        return budget.exact_epsilon, Fraction(0)
    if isinstance(budget, ApproxDP):
        return budget.exact_epsilon, budget.exact_delta
    raise InvalidArgumentError(
        f"a ledger stores a zCDP, PureDP or ApproxDP budget, got {type(budget).__name__}"
    )


def from_columns(kind: Kind, first: Fraction, second: Fraction) -> Spendable:
    """The budget of ``kind`` a ledger's two columns hold.

    Raises:
        InvalidBudgetError: a malformed value, or a PureDP budget with a δ.

    Example:
        >>> import privframe as pf
        >>> from_columns(pf.PureDP, Fraction(1), Fraction(0))
        PureDP(epsilon=1.0)
    """
    if kind is zCDP:
        return zCDP(first, second)
    if kind is PureDP:
        if second:
            raise InvalidBudgetError(f"a pure DP cost has no delta, got delta={second}")
        return PureDP(first)
    return ApproxDP(first, second)


def with_article(name: str) -> str:
    """``name`` with its indefinite article: "a zCDP", "a PureDP", "an ApproxDP".

    Example:
        >>> with_article("ApproxDP"), with_article("PureDP")
        ('an ApproxDP', 'a PureDP')
    """
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def parameters(kind: Kind) -> str:
    """What a cost of ``kind`` is given in, for messages.

    Example:
        >>> import privframe as pf
        >>> parameters(pf.ApproxDP)
        'epsilon and delta'
    """
    return {zCDP: "rho (and delta)", PureDP: "epsilon", ApproxDP: "epsilon and delta"}[kind]
