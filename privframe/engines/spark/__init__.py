"""The Spark engine: the same exact, bounded aggregation on a Spark DataFrame.

pyspark is imported only when a Spark DataFrame is given
(``pip install 'privframe[spark]'``): :mod:`~privframe.engines.spark.input`
opens a Spark DataFrame for a Session with the helpers of
:mod:`~privframe.engines.spark.frames`; :mod:`~privframe.engines.spark.expressions`
translates the allowed polars expressions (with :mod:`~privframe.engines.spark.types`);
:mod:`~privframe.engines.spark.rows` computes the row steps and row values,
:mod:`~privframe.engines.spark.bounding` the shared bounding algorithm, and
:mod:`~privframe.engines.spark.engine` runs the aggregation.
"""

from privframe.engines.spark.engine import SparkEngine

__all__ = ["SparkEngine"]
