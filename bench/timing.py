"""Timing and memory helpers shared by the benchmark scripts (run as `python bench/NAME.py`)."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any


def best_of(run: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Fastest CPU time and fastest wall time of `repeats` runs, and the last result.

    On a shared machine wall times include waiting for a core; the process's CPU time does not.
    """
    cpu, wall, out = float("inf"), float("inf"), None
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = run()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return cpu, wall, out


def paired(run_a: Callable[[], Any], run_b: Callable[[], Any], repeats: int) -> tuple[float, float, float]:
    """Best CPU time of each and the median of the per-round ratios a/b, the two run alternately.

    Alternating rounds share the machine's load, so the median paired ratio drifts less than the
    ratio of two bests taken minutes apart.
    """
    ta, tb = [], []
    for _ in range(repeats):
        for run, times in ((run_a, ta), (run_b, tb)):
            c0 = time.process_time()
            run()
            times.append(time.process_time() - c0)
    ratios = sorted(a / b for a, b in zip(ta, tb, strict=True))
    return min(ta), min(tb), ratios[len(ratios) // 2]


def peak_bytes(run: Callable[[], Any]) -> int:
    """Peak traced allocation while `run` executes (its result included)."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
