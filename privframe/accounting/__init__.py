"""Accounting: budgets, conversions, the accountant that charges them, the ledger that keeps them.

The layer below everything that spends: it knows nothing of data, queries
or engines. :mod:`~privframe.accounting.budgets` holds the value types and
conversions, :mod:`~privframe.accounting.accountant` charges a session's
budget, :mod:`~privframe.accounting.ledger` persists each charge,
:mod:`~privframe.accounting.events` describes mechanisms, and
:mod:`~privframe.accounting.rdp`, :mod:`~privframe.accounting.pld` and
:mod:`~privframe.accounting.replay` compose them.

Example:
    >>> from privframe.accounting import zCDP
    >>> zCDP(0.25) + zCDP(0.25)
    zCDP(rho=0.5, delta=0.0)
"""

from privframe.accounting.accountant import Accountant, BudgetReport, Spend
from privframe.accounting.budgets import (
    GDP,
    ApproxDP,
    Budget,
    PureDP,
    mu_estimate,
    to_zcdp,
    zCDP,
)
from privframe.accounting.calibration import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_rho,
    gaussian_sigma,
)
from privframe.accounting.pld import PLDAccountant
from privframe.accounting.rdp import RDPAccountant
from privframe.numeric import Number, exact, round_down, round_up

__all__ = [
    "GDP",
    "Accountant",
    "ApproxDP",
    "Budget",
    "BudgetReport",
    "Number",
    "PLDAccountant",
    "PureDP",
    "RDPAccountant",
    "Spend",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "exact",
    "gaussian_rho",
    "gaussian_sigma",
    "mu_estimate",
    "round_down",
    "round_up",
    "to_zcdp",
    "zCDP",
]
