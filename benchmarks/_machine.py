"""What both benchmarks share: the line that names the machine, and the summary of samples.

One place for both, so every number printed by a benchmark comes with the same machine line and
the same percentile rule. Samples are integers in nanoseconds (`time.perf_counter_ns`).
"""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or the platform's word for it elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_line() -> str:
    """e.g. "Linux-6.18…-x86_64 · Intel(R) Xeon(R) Processor · 2 cores · Python 3.11.7"."""
    # The cores this process may run on, which is what a benchmark gets on a shared machine.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{platform.platform()} · {cpu_model()} · {cores} cores · "
        f"Python {platform.python_version()}"
    )


def load_line() -> str:
    """The load averages now: on a shared machine, what the numbers were measured against."""
    if not hasattr(os, "getloadavg"):
        return "load: unknown"
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f} {five:.2f} {fifteen:.2f}"


@dataclass(frozen=True)
class Summary:
    """Median, p90 and p99 of a set of samples, in nanoseconds."""

    count: int
    median: float
    p90: float
    p99: float

    def ms(self) -> str:
        """e.g. "median  12.345 ms   p90  15.000 ms   p99  20.000 ms"."""
        return self._in(1e6, "ms", 3)

    def us(self) -> str:
        return self._in(1e3, "µs", 1)

    def _in(self, scale: float, unit: str, digits: int) -> str:
        values = (("median", self.median), ("p90", self.p90), ("p99", self.p99))
        return "   ".join(f"{name} {v / scale:8.{digits}f} {unit}" for name, v in values)


def summarize(samples: Sequence[int | float]) -> Summary:
    """Percentiles by linear interpolation between the closest ranks (numpy's default)."""
    if len(samples) < 2:
        raise ValueError("need at least two samples")
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return Summary(len(samples), statistics.median(samples), cuts[89], cuts[98])
