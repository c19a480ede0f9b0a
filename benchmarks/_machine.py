"""What every benchmark shares: the lines that name the machine and the code measured, the
summary of samples, and a process's CPU time.

One place for all, so every number printed by a benchmark comes with the same machine line and
the same percentile rule. Samples are integers in nanoseconds (`time.perf_counter_ns`).
"""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import subprocess
import time
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


def code_line() -> str:
    """e.g. "code: 6289105 (+ uncommitted changes to conch_jupyter/)": what was measured."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "conch_jupyter"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "code: unknown (no git)"
    return f"code: {head}" + (" (+ uncommitted changes to conch_jupyter/)" if changed else "")


def load_line() -> str:
    """The load averages now: on a shared machine, what the numbers were measured against."""
    if not hasattr(os, "getloadavg"):
        return "load: unknown"
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f} {five:.2f} {fifteen:.2f}"


def disk_line(folder: Path, commits: int = 40) -> str:
    """How long a small SQLite commit takes in `folder`, set up as Conch's store is (WAL,
    synchronous=FULL, so every commit waits for fsync): on a shared disk this moves by 10x."""
    path = folder / "disk-probe.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE probe (text TEXT)")
        took = []
        for _ in range(commits):
            start = time.perf_counter_ns()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO probe VALUES (?)", ("x" * 300,))
            db.execute("COMMIT")
            took.append(time.perf_counter_ns() - start)
    finally:
        db.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    stats = summarize(took)
    return (
        f"disk: a SQLite commit (WAL, synchronous=FULL) median {stats.median / 1e6:.2f} ms, "
        f"p90 {stats.p90 / 1e6:.2f} ms"
    )


def cpu_ns(pid: int) -> int:
    """CPU time (user + system, all threads) a process has used so far, in ns; Linux only.

    From /proc/<pid>/stat, in clock ticks (10 ms each, usually): fine over a phase of seconds.
    """
    return sum(cpu_split_ns(pid))


def cpu_split_ns(pid: int) -> tuple[int, int]:
    """cpu_ns's two parts: (user, system), in ns."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (name) ": state is fields[0]
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    return int(fields[11]) * tick, int(fields[12]) * tick  # utime, stime: fields 14 and 15


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
