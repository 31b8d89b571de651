"""Engines run the exact, bounded aggregation of a release; they know nothing of privacy.

An engine takes an :class:`~privframe.engines.spec.AggregationSpec` (filters,
contribution limits, clipping and grid, public keys) and returns one row per
public key with exact int64 aggregates. Only those per-key aggregates, never
rows, leave the engine for the noise step.

The registry (:mod:`~privframe.engines.registry`) matches an input to its
engine, whose opener (:mod:`~privframe.engines.polars.input`,
:mod:`~privframe.engines.spark.input`) checks it and returns an
:class:`~privframe.engines.inputs.Opened`. The bounding algorithm, its
salts and key conventions are shared (:mod:`~privframe.engines.bounding`);
the row expressions queries may use are the allow-list of
:mod:`~privframe.engines.expressions`.
"""

from privframe.engines.spec import AggregationSpec, ValueSpec

__all__ = ["AggregationSpec", "ValueSpec"]
