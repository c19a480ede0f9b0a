"""How long `mentions_in` takes on a long message, next to two naive ways of finding mentions.

A 16,000-character message (the per-message size the door takes, prompts.QUOTE_LIMIT) and a room
of 50 agents whose names share prefixes ("Research Lead", "Researcher", "Research-Bot"). The
realistic text is prose with a handful of real mentions plus the things mentions_in must skip:
inline code, a fenced block of decorators, URLs and e-mail addresses. The worst cases are dense
"@" runs: bare "@"s, name prefixes that fail late, a real mention every few characters, and the
same inside inline code.

The references do less than mentions_in (no code, URL or address handling), so they find more;
they are here to give the numbers a scale, not as rivals. Each repetition times one call of each
implementation, in a rotating order, so shared-machine noise hits all of them alike. Prints;
never asserts on speed.

    .venv/bin/python -m benchmarks.bench_mentions [--seconds-per-case 3]
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conch_jupyter.rounds import mentions, prompts
from conch_jupyter.rounds.mentions import mentions_in

from ._machine import code_line, load_line, machine_line, summarize

MESSAGE_CHARS = prompts.QUOTE_LIMIT

NAMES = (
    "Researcher", "Research Lead", "Research-Bot", "Writer", "Writer Prose", "Writer2",
    "Critic", "Critic Senior", "Editor", "Editor-in-Chief", "Data Analyst", "Data Engineer",
    "Data", "Planner", "Plotter", "Coder", "Code Reviewer", "Tester", "Test Writer", "Designer",
    "Translator", "Translator FR", "Translator DE", "Summarizer", "Scout", "Scheduler", "Scribe",
    "Archivist", "Librarian", "Legal", "Legal Reviewer", "Finance", "Forecaster", "Statistician",
    "Historian", "Mathematician", "Physicist", "Chemist", "Biologist", "Economist", "Marketer",
    "Copywriter", "Strategist", "Architect", "Ops", "Security", "Support", "Tutor",
    "Quizmaster", "Moderator",
)  # fmt: skip

_VOCABULARY = (
    "the a of to and in that we it for on with as is this be our plan draft numbers budget "
    "trip options hotel train week report source chart table figure result summary check "
    "before after because which should could would please review compare estimate cost time "
    "risk team data model figures quarter revenue growth version section paragraph note"
)
WORDS = _VOCABULARY.split()

# What a real message mixes in: mentions (some spelled oddly) and "@"s that are not mentions.
PLANTED = [
    "Thanks, @Researcher: the sources look solid.",
    "I think @Writer's draft of section two reads well.",
    "Could @data analyst re-run the quarter figures?",
    "@Research Lead, please sign off before Friday.",
    "Over to @Critic.",
    "Send the final cut to @Editor-in-Chief when it is done.",
    "Mail ann@writer.com or ops@Support.example if anything breaks.",
    "The thread is at https://example.com/@Writer/posts?by=@Critic and www.medium.com/@Tester.",
    "Use `@property` and `@Coder.cache` here, not a plain attribute.",
    "We meet @ 5pm; @Nobody is not in the room.",
]
FENCED = (
    "```python\n@Coder.fixture\n@Tester.mark.slow\ndef test_budget(data):\n"
    "    # @Researcher wrote this\n    assert data.total > 0\n```"
)


def realistic_message(seed: int = 1129) -> str:
    """Prose with the planted lines spread through it, cut to exactly MESSAGE_CHARS."""
    rng = random.Random(seed)
    paragraphs: list[str] = []
    extras = [*PLANTED, FENCED]
    every = 3  # a planted line in every third paragraph, until they run out
    while sum(len(p) + 2 for p in paragraphs) < MESSAGE_CHARS + 200:
        sentences = []
        for _ in range(rng.randint(3, 6)):
            words = rng.choices(WORDS, k=rng.randint(8, 20))
            sentences.append(" ".join(words).capitalize() + ".")
        if extras and len(paragraphs) % every == 1:
            sentences.insert(rng.randint(0, len(sentences)), extras.pop(0))
        paragraphs.append(" ".join(sentences))
    if extras:
        raise RuntimeError("the message is too short for every planted line")
    return "\n\n".join(paragraphs)[:MESSAGE_CHARS]


def repeated(unit: str) -> str:
    return (unit * (MESSAGE_CHARS // len(unit) + 1))[:MESSAGE_CHARS]


# --- the references: what a first attempt would do -----------------------------------------

_alternations: dict[tuple[str, ...], re.Pattern[str]] = {}


def _alternation(names: tuple[str, ...]) -> re.Pattern[str]:
    longest_first = sorted(names, key=len, reverse=True)
    body = "|".join(re.escape(n) for n in longest_first)
    return re.compile(rf"@({body})(?!\w)", re.IGNORECASE)


def reference_alternation(text: str, names: Sequence[str]) -> list[str]:
    """One flat regex, longest name first; no code, URL or address handling."""
    key = tuple(names)
    pattern = _alternations.get(key)
    if pattern is None:
        pattern = _alternations[key] = _alternation(key)
    by_fold = {n.casefold(): n for n in reversed(key)}
    found: list[str] = []
    for m in pattern.finditer(text):
        name = by_fold[m.group(1).casefold()]
        if name not in found:
            found.append(name)
    return found


def reference_find_loop(text: str, names: Sequence[str]) -> list[str]:
    """`str.find` per name over the lower-cased text; first hit with a boundary after it."""
    lowered = text.lower()
    first: list[tuple[int, str]] = []
    for name in names:
        needle = "@" + name.lower()
        at = lowered.find(needle)
        while at >= 0:
            after = at + len(needle)
            if after == len(lowered) or not (lowered[after].isalnum() or lowered[after] == "_"):
                first.append((at, name))
                break
            at = lowered.find(needle, at + 1)
    return [name for _, name in sorted(first)]


def ours_new_roster(text: str, names: Sequence[str]) -> list[str]:
    """mentions_in as on the first message after the roster changed: its pattern is built."""
    mentions._mention_pattern.cache_clear()
    re.purge()
    return mentions_in(text, names)


def reference_alternation_new_roster(text: str, names: Sequence[str]) -> list[str]:
    _alternations.clear()
    re.purge()
    return reference_alternation(text, names)


# --- timing --------------------------------------------------------------------------------

Impl = Callable[[str, Sequence[str]], list[str]]


@dataclass(frozen=True)
class Case:
    label: str
    text: str
    impls: dict[str, Impl]


def time_case(case: Case, seconds: float) -> dict[str, list[int]]:
    """Per-call times (ns) of each implementation, interleaved in a rotating order."""
    impls = list(case.impls.items())
    for _ in range(20):  # warm-up: caches filled, code paths hot
        for _, impl in impls:
            impl(case.text, NAMES)
    probe = time.perf_counter_ns()
    for _ in range(10):
        for _, impl in impls:
            impl(case.text, NAMES)
    per_round = (time.perf_counter_ns() - probe) / 10
    reps = max(200, min(5_000, int(seconds * 1e9 / max(per_round, 1))))
    samples: dict[str, list[int]] = {label: [] for label, _ in impls}
    clock = time.perf_counter_ns
    for rep in range(reps):
        shift = rep % len(impls)
        for label, impl in impls[shift:] + impls[:shift]:
            start = clock()
            impl(case.text, NAMES)
            samples[label].append(clock() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds-per-case", type=float, default=3.0)
    args = parser.parse_args()

    if len(NAMES) != 50:
        raise RuntimeError(f"the room should hold 50 agents, not {len(NAMES)}")
    refs: dict[str, Impl] = {
        "ours": mentions_in,
        "alternation": reference_alternation,
        "find loop": reference_find_loop,
    }
    message = realistic_message()
    cases = [
        Case("realistic", message, refs),
        Case(
            "realistic, roster changed",
            message,
            {"ours": ours_new_roster, "alternation": reference_alternation_new_roster},
        ),
        Case('dense "@@@@"', repeated("@"), refs),
        Case('name prefixes "@Researc "', repeated("@Researc "), refs),
        Case('real mentions "@Writer "', repeated("@Writer "), refs),
        Case('inline code "`@Writer` "', repeated("`@Writer` "), refs),
    ]

    print("mentions_in: 16,000-character message, 50 agents")
    print(f"machine: {machine_line()}")
    print(code_line())
    print(f"date: {time.strftime('%Y-%m-%d')}   {load_line()}")
    print()
    print("what each finds in the realistic message:")
    for label, impl in refs.items():
        found = impl(message, NAMES)
        print(f"  {label:<12} {len(found):2d}: {', '.join(found)}")
    print()
    header = f"{'case':<30} {'impl':<12} {'median':>10} {'p90':>10} {'reps':>6}  ours/ref"
    print(header)
    print("-" * len(header))
    for case in cases:
        samples = time_case(case, args.seconds_per_case)
        ours = summarize(samples["ours"])
        for i, (label, values) in enumerate(samples.items()):
            stats = summarize(values)
            ratio = "" if label == "ours" else f"{ours.median / stats.median:8.2f}x"
            first = case.label if i == 0 else ""
            print(
                f"{first:<30} {label:<12} {stats.median / 1e3:7.1f} µs {stats.p90 / 1e3:7.1f} µs"
                f" {stats.count:6d}  {ratio}"
            )
    print()
    print("ours/ref is the ratio of medians: below 1 means mentions_in is faster.")


if __name__ == "__main__":
    main()
