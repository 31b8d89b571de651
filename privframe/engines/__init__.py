"""Engines run the exact, bounded aggregation of a release; they know nothing of privacy.

An engine takes an :class:`~privframe.engines.spec.AggregationSpec` (filters,
contribution limits, clipping and grid, public keys) and returns one row per
public key with exact int64 aggregates. Only those per-key aggregates, never
rows, leave the engine for the noise step.
"""

from privframe.engines.spec import AggregationSpec, ValueSpec

__all__ = ["AggregationSpec", "ValueSpec"]
