"""Word-level diffs of prompt text and sentence attribution along a lineage.

No Django: the compare view escapes the ops as it renders them, so nothing
here produces HTML. The matching is difflib's SequenceMatcher as compiled by
cydifflib (the same algorithm, so the same matches, several times faster).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from cydifflib import SequenceMatcher

# A token is a word or one other character with the whitespace before it (or
# trailing whitespace), so joining the tokens gives back the exact text and a diff
# never splits a word. Whitespace rides along instead of being tokens of its own:
# as the most common token it made SequenceMatcher ~40x slower (3 s for two
# 4,000-word prompts, measured), and autojunk would drop it as an anchor.
_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")
# A sentence ends at . ! or ? followed by whitespace, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# For the coarser diff: a run of text up to and including its end punctuation or
# line breaks (the whitespace before it rides along, as with words).
_SENTENCE_TOKEN = re.compile(r"[^\n.!?]*[.!?\n]*")

SAME, ADDED, REMOVED = "same", "added", "removed"
# SequenceMatcher still grows faster than linearly: about 0.1 s for two 4,000-word
# texts here. An imported component may hold 200,000 characters.
MAX_WORD_TOKENS = 20_000
# What bounds the time, whatever the text: SequenceMatcher's cost is the number
# of (token in a, same token in b) pairs its longest-match search visits, and on
# text of one repeated word that is ~n² per search, with up to n searches (two
# 4 KB prompts of one word took 6.8 s, 12 KB took 70 s). The searches are run
# here one by one against this budget of visits; a diff that would need more
# falls back to whole sentences, then whole lines, then to "all removed, all
# added". The coarser levels get half the budget each (bench/compare.py
# prints the worst case).
MAX_MATCH_WORK = 2_000_000


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """The edit from `old` to `new` as (op, text) pieces, op in same/added/removed.
    Concatenating the same+removed pieces gives `old`; same+added gives `new`.

    Word by word when that fits the work budget, else sentence by sentence,
    else line by line, else the whole of `old` removed and the whole of `new`
    added."""
    old, new = old or "", new or ""
    if len(old) + len(new) > MAX_CACHED_CHARS:
        return _diff(old, new)
    return list(_cached_diff(old, new))


# A candidate's prompt never changes, and the compare page diffs the same pairs
# again on every filter, sort and page of its task table: the last diffs are
# kept (two pages' worth of 8 candidates). Each holds its two texts and its
# pieces, so at most 16 × 2 × MAX_CACHED_CHARS characters in all.
MAX_CACHED_CHARS = 200_000


@functools.lru_cache(maxsize=16)
def _cached_diff(old: str, new: str) -> tuple[tuple[str, str], ...]:
    return tuple(_diff(old, new))


def _diff(old: str, new: str) -> list[tuple[str, str]]:
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    if len(a) + len(b) <= MAX_WORD_TOKENS:  # beyond ~10,000 words a side, diff whole lines
        ops = _bounded_diff(a, b, MAX_MATCH_WORK)
        if ops is not None:
            return ops
        ops = _bounded_diff(
            _SENTENCE_TOKEN.findall(old), _SENTENCE_TOKEN.findall(new), MAX_MATCH_WORK // 2
        )
        if ops is not None:
            return ops
    ops = _bounded_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), MAX_MATCH_WORK // 2
    )
    if ops is not None:
        return ops
    return [(op, text) for op, text in ((REMOVED, old), (ADDED, new)) if text]


def _bounded_diff(a: list[str], b: list[str], work: int) -> list[tuple[str, str]] | None:
    """The diff of two token lists, or None when it needs more than `work`."""
    # A shared beginning and end cost nothing to find and are most of a typical edit.
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    blocks = _matching_blocks(middle_a, middle_b, work)
    if blocks is None:
        return None
    ops: list[tuple[str, str]] = []

    def add(op: str, text: str) -> None:
        if not text:
            return
        if ops and ops[-1][0] == op:  # a prefix or suffix next to a middle block
            ops[-1] = (op, ops[-1][1] + text)
        else:
            ops.append((op, text))

    add(SAME, "".join(a[:head]))
    i = j = 0
    for bi, bj, size in blocks:
        add(REMOVED, "".join(middle_a[i:bi]))
        add(ADDED, "".join(middle_b[j:bj]))
        add(SAME, "".join(middle_a[bi : bi + size]))
        i, j = bi + size, bj + size
    add(REMOVED, "".join(middle_a[i:]))
    add(ADDED, "".join(middle_b[j:]))
    add(SAME, "".join(a[len(a) - tail :]))
    return ops


def _matching_blocks(a: list[str], b: list[str], budget: int) -> list[tuple[int, int, int]] | None:
    """difflib's get_matching_blocks (same results), with each longest-match
    search paid for from `budget` before it runs; None when it runs out."""
    if not a or not b:
        return []
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    # How often each token occurs in b: with no junk and autojunk off, the
    # length of each of SequenceMatcher's b2j lists.
    in_b = Counter(b)
    # work_before[i]: the pairs a search over a[0:i] visits at most.
    work_before = [0]
    for token in a:
        work_before.append(work_before[-1] + in_b[token])
    queue, found = [(0, len(a), 0, len(b))], []
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        budget -= work_before[ahi] - work_before[alo] + 1
        if budget < 0:
            return None
        i, j, k = matcher.find_longest_match(alo, ahi, blo, bhi)
        if k:
            found.append((i, j, k))
            if alo < i and blo < j:
                queue.append((alo, i, blo, j))
            if i + k < ahi and j + k < bhi:
                queue.append((i + k, ahi, j + k, bhi))
    found.sort()
    return found


def split_sentences(text: str) -> list[str]:
    """The non-empty sentences of a text, stripped."""
    return [s.strip() for s in _SENTENCE_END.split(text or "") if s.strip()]


@dataclass(frozen=True)
class LineageNode:
    """What attribution needs to know of one candidate."""

    index: int
    parents: tuple[int, ...]
    components: Mapping[str, str]


def sentence_origins(
    nodes: Mapping[int, LineageNode], index: int, component: str
) -> list[tuple[str, int]]:
    """For each sentence of `component` in candidate `index`, the candidate that
    introduced it: a sentence found in a parent's text is inherited from wherever
    the parent got it (the first parent that has it, for merges); otherwise this
    candidate introduced it. A seed, or a candidate whose parents are unknown,
    introduced all of its sentences."""
    memo: dict[int, dict[str, int]] = {}

    def origins(i: int) -> dict[str, int]:
        if i in memo:
            return memo[i]
        node = nodes[i]
        # Parents always have smaller indices in GEPA; the guard keeps a corrupt
        # (cyclic) lineage from recursing forever.
        inherited = [origins(p) for p in node.parents if p in nodes and p < i]
        found: dict[str, int] = {}
        for sentence in split_sentences(node.components.get(component, "")):
            if sentence in found:
                continue
            found[sentence] = next((o[sentence] for o in inherited if sentence in o), i)
        memo[i] = found
        return found

    for i in sorted(nodes):  # bottom-up keeps the recursion shallow on long chains
        if i <= index:
            origins(i)
    return [
        (s, memo[index][s]) for s in split_sentences(nodes[index].components.get(component, ""))
    ]
