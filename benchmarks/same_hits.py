"""Whether two ``recall_latency.py --dump-hits`` files rank alike: the same refs in the
same order for every question (fused ``recall`` and ``recall_sessions``), and the largest
score difference. Exit 0 when every ranking is the same, 1 otherwise.

    .venv/bin/python benchmarks/same_hits.py BEFORE AFTER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _ranking(line: dict[str, Any]) -> tuple[list[Any], list[float]]:
    if "hits" in line:
        return [h[0] for h in line["hits"]], [float(h[1]) for h in line["hits"]]
    sessions = line["sessions"]
    return [[s[0], s[2]] for s in sessions], [float(s[1]) for s in sessions]


def main() -> None:
    before, after = (Path(p).read_text().splitlines() for p in sys.argv[1:3])
    if len(before) != len(after):
        print(json.dumps({"same": False, "lines": [len(before), len(after)]}))
        sys.exit(1)
    moved = []
    worst = 0.0
    for a, b in zip(before, after, strict=True):
        la, lb = json.loads(a), json.loads(b)
        (ra, sa), (rb, sb) = _ranking(la), _ranking(lb)
        if la["q"] != lb["q"] or ra != rb:
            moved.append(la["q"])
        worst = max([worst, *(abs(x - y) for x, y in zip(sa, sb, strict=False))])
    print(
        json.dumps(
            {
                "same": not moved,
                "rankings": len(before),
                "moved": len(moved),
                "first_moved": moved[:3],
                "max_score_diff": worst,
            }
        )
    )
    sys.exit(1 if moved else 0)


if __name__ == "__main__":
    main()
