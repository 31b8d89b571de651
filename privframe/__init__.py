"""privframe: differentially private grouped analytics on dataframes.

Example:
    >>> import privframe as pf
    >>> pf.zCDP(0.5).rho
    0.5
"""

from privframe import accounting, datasets, dpsgd, events, keys, noise, pld, rdp
from privframe.accountant import Accountant, BudgetReport, Spend
from privframe.accounting import GDP, ApproxDP, Budget, zCDP
from privframe.aggregates import count, count_distinct, mean, median, quantile, std, sum, var
from privframe.errors import (
    BudgetExceededError,
    CalibrationError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    LedgerError,
    PrivframeError,
    PrivframeWarning,
    SeededRandomnessWarning,
    SQLError,
)
from privframe.expressions import bin
from privframe.html import show
from privframe.ledger import (
    LedgerEntries,
    LedgerEntry,
    LedgerMissingWarning,
    LedgerStateWarning,
)
from privframe.noise import discrete_gaussian, gaussian_mechanism
from privframe.query import Bound, Request
from privframe.session import Batch, Session
from privframe.split import Balance, balance
from privframe.sql import Column

__all__ = [
    "GDP",
    "Accountant",
    "ApproxDP",
    "Balance",
    "Batch",
    "Bound",
    "Budget",
    "BudgetExceededError",
    "BudgetReport",
    "CalibrationError",
    "Column",
    "InvalidArgumentError",
    "InvalidBudgetError",
    "InvalidValueError",
    "LedgerEntries",
    "LedgerEntry",
    "LedgerError",
    "LedgerMissingWarning",
    "LedgerStateWarning",
    "PrivframeError",
    "PrivframeWarning",
    "Request",
    "SQLError",
    "SeededRandomnessWarning",
    "Session",
    "Spend",
    "accounting",
    "balance",
    "bin",
    "count",
    "count_distinct",
    "datasets",
    "discrete_gaussian",
    "dpsgd",
    "events",
    "gaussian_mechanism",
    "keys",
    "mean",
    "median",
    "noise",
    "pld",
    "quantile",
    "rdp",
    "show",
    "std",
    "sum",
    "var",
    "zCDP",
]
