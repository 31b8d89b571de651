"""Aggregates a query can release (counts, sums, means, variances, quantiles), one module each.

An aggregate says *what* to compute and with which public bounds, and owns
everything that depends on what it is: the measurements it needs and their
sensitivity, its estimate from the noisy measurements, its error columns, its
``explain`` row and its names (:mod:`~privframe.plan.aggregates.base`). The
planner and the release pipeline only call that interface. To add an
aggregate, add a module here and import it below (docs/architecture.md).

Missing values: a null or NaN in a bounded column follows the aggregate's
``missing=`` rule (:class:`~privframe.plan.aggregates.base.Summed`): by
default it counts as the midpoint of the bounds, in sums, means and
variances alike (sums and means of one column share one centred sum and one
count, :mod:`~privframe.plan.aggregates.sum`, so a missing value adds
nothing to the centred sum and its row is counted); ``missing="drop"``
leaves its row out, as SQL's SUM and AVG skip nulls; a number replaces it.
Quantiles skip missing values. Infinities are clipped to the bounds like any
other value.

Example:
    >>> import privframe as pf
    >>> pf.sum("amount", bounds=(0, 1000)).output_name
    'amount_sum'
    >>> pf.mean("amount", bounds=(0, 1000)).alias("avg").output_name
    'avg'
"""

from privframe.plan.aggregates.base import FAMILIES, Aggregate, Bounded
from privframe.plan.aggregates.count import Count, count
from privframe.plan.aggregates.distinct import CountDistinct, count_distinct
from privframe.plan.aggregates.mean import Mean, mean
from privframe.plan.aggregates.quantile import Quantile, median, quantile
from privframe.plan.aggregates.sum import Sum, sum
from privframe.plan.aggregates.variance import Std, Var, std, var

__all__ = [
    "FAMILIES",
    "Aggregate",
    "Bounded",
    "Count",
    "CountDistinct",
    "Mean",
    "Quantile",
    "Std",
    "Sum",
    "Var",
    "count",
    "count_distinct",
    "mean",
    "median",
    "quantile",
    "std",
    "sum",
    "var",
]
