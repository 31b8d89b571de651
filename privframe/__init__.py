"""privframe: differentially private grouped analytics on dataframes.

Example:
    >>> import privframe as pf
    >>> pf.zCDP(0.5).rho
    0.5
"""

from privframe import accounting
from privframe.accounting import GDP, ApproxDP, Budget, zCDP
from privframe.errors import (
    BudgetExceededError,
    CalibrationError,
    InvalidBudgetError,
    LedgerError,
    PrivframeError,
    SeededRandomnessWarning,
)

__all__ = [
    "GDP",
    "ApproxDP",
    "Budget",
    "BudgetExceededError",
    "CalibrationError",
    "InvalidBudgetError",
    "LedgerError",
    "PrivframeError",
    "SeededRandomnessWarning",
    "accounting",
    "zCDP",
]
