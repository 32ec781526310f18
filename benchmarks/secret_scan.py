"""The secret scanner on hostile input, beside ordinary text of the same size, same run.

Each input is ``--kb`` KiB (and twice that, to show the cost is linear: the ``x2`` ratio
should be about 2): ordinary text (prose, code and a few real-format secrets), and the
hostile kinds issue 17 names: near-misses of every vendor prefix, long base64 runs, many
``-----BEGIN`` lines, ``" = "`` repeated (every operator is a place a key name could end),
``password = "`` repeated (every one a hit) and one private-key block with no END line
before the rest of the text. Inputs are timed in turns, ``--rounds`` times, and the median
is reported, so drift on a noisy machine falls on all of them alike. Prints one JSON line
per input and a summary line.

    nice -n 10 .venv/bin/python benchmarks/secret_scan.py [--kb 600] [--rounds 7]

It uses only ``tether.scan.redact``, so the same script measures an older checkout
(``PYTHONPATH=../main/src``) for a before/after.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable

from tether.scan import redact

ORDINARY = (
    "We moved the nightly job to 03:00 UTC because the backups ran long. "
    "def retry(fn, tries=3):\n    for n in range(tries):\n        return fn()\n"
    "The token budget is 3000 tokens; the password reset page says to wait an hour. "
    "config: timeout = 120, url = http://127.0.0.1:8080, secret santa on Friday.\n"
)
SECRETS = (
    "export AWS_ACCESS_KEY_ID=AKIA" + "IOSFODNN7EXAMPLE\n",
    'DB_PASSWORD = "corr3ct-h0rse' + '-battery"\n',
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8\n",
)


def _ordinary(size: int) -> str:
    rng = random.Random(1)
    parts: list[str] = []
    total = 0
    while total < size:
        piece = rng.choice(SECRETS) if rng.random() < 0.02 else ORDINARY
        parts.append(piece)
        total += len(piece)
    return "".join(parts)[:size]


def _near_misses(size: int) -> str:
    unit = (
        "sk-"
        + "a" * 19
        + " ghp_"
        + "A" * 35
        + " xoxb-"
        + "abcdefghij"
        + " AKIA"
        + "Q" * 15
        + " eyJ"
        + "abc.def"
        + " sk_live_"
        + "x" * 15
        + " -----END RSA PRIVATE"
        + " "
    )
    return (unit * (size // len(unit) + 1))[:size]


def _base64(size: int) -> str:
    rng = random.Random(2)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return "".join(rng.choice(alphabet) for _ in range(size))


def _begin_lines(size: int) -> str:
    line = "-----BEGIN " + "RSA PRIVATE KEY-----\n"
    return (line * (size // len(line) + 1))[:size]


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


def _unclosed_key(size: int) -> str:
    head = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + ("MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQ\n" * 40)
    return head + _ordinary(size - len(head))


KINDS: dict[str, Callable[[int], str]] = {
    "ordinary": _ordinary,
    "near_misses": _near_misses,
    "base64_run": _base64,
    "begin_lines": _begin_lines,
    "operators": _repeat(" = "),
    "password_quotes": _repeat('password = "'),
    "unclosed_key": _unclosed_key,
}


def _time(text: str) -> float:
    start = time.perf_counter()
    redact(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kb", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    size = args.kb * 1024
    inputs = {(kind, n): make(size * n) for kind, make in KINDS.items() for n in (1, 2)}
    times: dict[tuple[str, int], list[float]] = {key: [] for key in inputs}
    for _ in range(args.rounds):
        for key, text in inputs.items():
            times[key].append(_time(text))
    median = {key: statistics.median(t) for key, t in times.items()}
    base = median[("ordinary", 1)]
    worst = 0.0
    for kind in KINDS:
        one, two = median[(kind, 1)], median[(kind, 2)]
        worst = max(worst, one / base)
        row = {
            "input": kind,
            "kib": args.kb,
            "ms": round(one * 1000, 1),
            "mb_per_s": round(size / one / 1e6, 1),
            "vs_ordinary": round(one / base, 2),
            "x2": round(two / one, 2),
        }
        print(json.dumps(row))
    print(
        json.dumps({"summary": "secret_scan", "kib": args.kb, "worst_vs_ordinary": round(worst, 2)})
    )


if __name__ == "__main__":
    main()
