"""privframe: differentially private grouped analytics on dataframes.

Example:
    >>> import privframe as pf
    >>> pf.zCDP(0.5).rho
    0.5
"""

import sys

from privframe import accounting, progress
from privframe.accounting import accountant, events, ledger, pld, rdp, replay
from privframe.accounting.accountant import Accountant, BudgetReport, Spend
from privframe.accounting.budgets import GDP, ApproxDP, Budget, zCDP
from privframe.accounting.ledger import (
    LedgerEntries,
    LedgerEntry,
    LedgerMissingWarning,
    LedgerStateWarning,
)
from privframe.api import cli, client, datasets, html, query, report, session, sql
from privframe.api.client import RemoteSession, connect
from privframe.api.html import show
from privframe.api.query import Request
from privframe.api.session import Session
from privframe.api.sql import Column
from privframe.engines import expressions
from privframe.engines.expressions import bin
from privframe.engines.spark import frames as spark
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
from privframe.mechanisms import dpsgd, noise, quantiles, selection
from privframe.mechanisms.noise import discrete_gaussian, gaussian_mechanism
from privframe.plan import aggregates, keys, planner, split
from privframe.plan.aggregates import count, count_distinct, mean, median, quantile, std, sum, var
from privframe.plan.ir import Bound
from privframe.plan.release import Batch
from privframe.plan.split import Balance, balance

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
    "ExcessiveNoiseWarning",
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
    "RemoteSession",
    "Request",
    "SQLError",
    "SeededRandomnessWarning",
    "ServerError",
    "Session",
    "Spend",
    "accounting",
    "balance",
    "bin",
    "connect",
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
    "progress",
    "quantile",
    "rdp",
    "show",
    "std",
    "sum",
    "var",
    "zCDP",
]

# The flat module paths of earlier releases (``privframe.noise``, ``privframe.ledger``, ...)
# keep working as names for the modules that now live in the layered packages.
for _module in (
    accountant,
    client,
    aggregates,
    cli,
    datasets,
    dpsgd,
    events,
    expressions,
    html,
    keys,
    ledger,
    noise,
    pld,
    planner,
    query,
    quantiles,
    rdp,
    replay,
    report,
    selection,
    session,
    split,
    sql,
):
    sys.modules[f"{__name__}.{_module.__name__.rsplit('.', 1)[-1]}"] = _module
del _module
sys.modules[f"{__name__}.spark"] = spark
