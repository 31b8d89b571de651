"""The Spark engine: the same exact, bounded aggregation on a Spark DataFrame.

pyspark is imported only when a Spark DataFrame is given
(``pip install 'privframe[spark]'``): :mod:`~privframe.engines.spark.frames`
adapts Spark input and output, :mod:`~privframe.engines.spark.expressions`
translates the allowed polars expressions, and
:mod:`~privframe.engines.spark.engine` runs the aggregation.
"""
