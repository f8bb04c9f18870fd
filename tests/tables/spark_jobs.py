"""Counting the Spark jobs a call runs (the test session runs without adaptive execution, so a
query and its shuffles are one job)."""

from collections.abc import Callable
from typing import Any


def counted_jobs(spark: Any, name: str, run: Callable[[], Any]) -> tuple[Any, int]:
    """run()'s result and the number of Spark jobs it ran, under the job group `name`."""
    sc = spark.sparkContext
    sc.setJobGroup(name, name)
    try:
        out = run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return out, len(sc.statusTracker().getJobIdsForGroup(name))
