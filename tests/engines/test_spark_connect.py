"""What only Spark Connect does: its frames are taken as Spark input, and analysed late.

A Connect DataFrame (``pyspark.sql.connect.dataframe.DataFrame``) is a plan
held by the client: the server resolves its tables and columns only when
asked, so a bad frame fails inside privframe, where classic Spark fails at
the user's own call. Runs on the Spark Connect leg only (spark_setup.legs); every
other Spark test module of the cluster legs runs through Connect too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

import privframe as pf
from privframe.engines.registry import engine_for


def test_the_registry_takes_connect_frames_without_importing_pyspark() -> None:
    # A stand-in with a Connect DataFrame's name and module, in a process without pyspark.
    script = textwrap.dedent(
        """
        import sys
        from privframe.engines.registry import engine_for

        DataFrame = type("DataFrame", (), {"__module__": "pyspark.sql.connect.dataframe"})
        Other = type("Column", (), {"__module__": "pyspark.sql.connect.column"})
        print(engine_for(DataFrame()).name, engine_for(Other()).name)
        print("pyspark" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["spark", "polars", "False"]


def test_a_connect_frame_is_spark_input(spark: Any) -> None:
    frame = spark.range(3)
    assert type(frame).__module__ == "pyspark.sql.connect.dataframe"
    assert engine_for(frame).name == "spark"


@pytest.mark.parametrize(
    ("build", "condition"),
    [
        (lambda spark: spark.range(3).select("nope"), "UNRESOLVED_COLUMN"),
        (lambda spark: spark.table("no_db.no_table"), "TABLE_OR_VIEW_NOT_FOUND"),
        (lambda spark: spark.read.parquet("/nonexistent/nope.parquet"), "PATH_NOT_FOUND"),
    ],
    ids=["unknown column", "missing table", "missing file"],
)
def test_a_frame_the_server_cannot_analyse_is_refused_without_its_message(
    spark: Any, build: Any, condition: str
) -> None:
    frame = build(spark)  # nothing is resolved yet
    with pytest.raises(pf.InvalidValueError) as info:
        pf.Session(frame, "id", pf.zCDP(1.0))
    assert info.value.__context__ is None
    message = str(info.value)
    assert message.startswith("reading the Spark DataFrame's schema failed on Spark (")
    assert condition in message
    assert "nope" not in message  # Spark's message (which names it) is withheld
