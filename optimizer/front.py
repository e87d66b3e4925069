"""Which candidates are "on the front" (the ★ of the run page, `Candidate.on_front`).

The rule, the same on the server (this function) and in the browser
(`static/js/front.js`, `frontMembers`): a candidate is on the front when

1. it has the top val score on at least one task (GEPA's per-task Pareto front),
2. no other candidate dominates it (scores at least as well on every val task
   and strictly better on one), and
3. no *earlier* candidate has exactly the same score on every val task: among
   candidates tied on every task only the lowest index (the one GEPA found
   first, the one it keeps) stands for the group.

Scores are compared at the precision the page shows (3 decimals), so a page
and the database never disagree over a difference nobody can see. A task a
candidate was not scored on counts as the lowest score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

PRECISION = 1000  # 3 decimals, rounded half up as the browser's Math.round does


def front_members(scores: Mapping[int, Mapping[str, float | None]]) -> list[int]:
    """Indices on the front, ascending. `scores`: candidate index → {task key: score}."""
    keys = sorted({key for per_task in scores.values() for key in per_task})
    if not keys:
        return []
    low = float("-inf")
    vectors = {
        index: tuple(
            low
            if (score := per_task.get(k)) is None
            else math.floor(score * PRECISION + 0.5) / PRECISION
            for k in keys
        )
        for index, per_task in scores.items()
    }
    tops = [max(vector[k] for vector in vectors.values()) for k in range(len(keys))]
    members: list[int] = []
    seen: set[tuple] = set()
    for index in sorted(vectors):
        vector = vectors[index]
        if vector in seen:
            continue  # an earlier candidate with the same scores stands for this one
        seen.add(vector)
        if not any(v == top and v != low for v, top in zip(vector, tops, strict=True)):
            continue
        if any(_dominates(other, vector) for other in vectors.values()):
            continue
        members.append(index)
    return members


def _dominates(a: tuple, b: tuple) -> bool:
    return all(x >= y for x, y in zip(a, b, strict=True)) and any(
        x > y for x, y in zip(a, b, strict=True)
    )
