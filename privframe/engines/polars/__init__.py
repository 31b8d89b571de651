"""The polars engine: pandas and polars frames, LazyFrames and parquet/CSV files.

:mod:`~privframe.engines.polars.input` opens an input for a Session and
:mod:`~privframe.engines.polars.engine` runs the bounded aggregation
(:class:`~privframe.engines.polars.engine.PolarsEngine`).
"""

from privframe.engines.polars.engine import PolarsEngine

__all__ = ["PolarsEngine"]
