"""privframe: differentially private grouped analytics on dataframes.

The names here are the public API: sessions (local and on a server), budgets,
aggregates, the public facts a query states (:class:`Column`, :class:`Bound`,
:func:`bin`, :func:`balance`), the noise primitives, and the errors and
warnings. The modules :mod:`~privframe.accounting`, ``datasets``, ``dpsgd``,
``events``, ``keys``, ``noise``, ``unit`` (per-person values) and
:mod:`~privframe.progress` are reachable
from here too (``pf.keys.product(...)``); everything else is imported from
the module that defines it.

Example:
    >>> import privframe as pf
    >>> pf.zCDP(0.5).rho
    0.5
    >>> pf.__version__.split(".")[0].isdigit()
    True
"""

from importlib.metadata import PackageNotFoundError, version

from privframe import accounting, progress
from privframe.accounting import events
from privframe.accounting.accountant import BudgetReport
from privframe.accounting.budgets import GDP, ApproxDP, Budget, PureDP, zCDP
from privframe.accounting.ledger import LedgerEntry, LedgerMissingWarning, LedgerStateWarning
from privframe.api import datasets
from privframe.api.budget_plan import BudgetPlan
from privframe.api.client import RemoteSession, connect
from privframe.api.html import show
from privframe.api.planning import plan_budget
from privframe.api.query import Request
from privframe.api.session import Session
from privframe.api.sql import Column
from privframe.engines import unit_values as unit
from privframe.engines.expressions import bin
from privframe.errors import (
    BudgetExceededError,
    CalibrationError,
    ExcessiveNoiseWarning,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    LedgerError,
    PrivframeError,
    PrivframeWarning,
    SeededRandomnessWarning,
    ServerError,
    SQLError,
)
from privframe.mechanisms import dpsgd, noise
from privframe.mechanisms.noise import (
    discrete_gaussian,
    discrete_laplace,
    gaussian_mechanism,
    laplace_mechanism,
)
from privframe.plan import keys
from privframe.plan.aggregates import count, count_distinct, mean, median, quantile, std, sum, var
from privframe.plan.ir import Bound
from privframe.plan.split import balance

try:
    __version__ = version("privframe")
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "GDP",
    "ApproxDP",
    "Bound",
    "Budget",
    "BudgetExceededError",
    "BudgetPlan",
    "BudgetReport",
    "CalibrationError",
    "Column",
    "ExcessiveNoiseWarning",
    "InvalidArgumentError",
    "InvalidBudgetError",
    "InvalidValueError",
    "LedgerEntry",
    "LedgerError",
    "LedgerMissingWarning",
    "LedgerStateWarning",
    "PrivframeError",
    "PrivframeWarning",
    "PureDP",
    "RemoteSession",
    "Request",
    "SQLError",
    "SeededRandomnessWarning",
    "ServerError",
    "Session",
    "__version__",
    "accounting",
    "balance",
    "bin",
    "connect",
    "count",
    "count_distinct",
    "datasets",
    "discrete_gaussian",
    "discrete_laplace",
    "dpsgd",
    "events",
    "gaussian_mechanism",
    "keys",
    "laplace_mechanism",
    "mean",
    "median",
    "noise",
    "plan_budget",
    "progress",
    "quantile",
    "show",
    "std",
    "sum",
    "unit",
    "var",
    "zCDP",
]
