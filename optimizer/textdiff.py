"""Word-level diffs of prompt text and sentence attribution along a lineage.

Pure Python (difflib), no Django: the compare view renders the ops with
autoescaping, so nothing here produces HTML.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

# A token is a word or one other character with the whitespace before it (or
# trailing whitespace), so joining the tokens gives back the exact text and a diff
# never splits a word. Whitespace rides along instead of being tokens of its own:
# as the most common token it made SequenceMatcher ~40x slower (3 s for two
# 4,000-word prompts, measured), and autojunk would drop it as an anchor.
_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")
# A sentence ends at . ! or ? followed by whitespace, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

SAME, ADDED, REMOVED = "same", "added", "removed"
# SequenceMatcher still grows faster than linearly: about 0.1 s for two 4,000-word
# texts here. An imported component may hold 200,000 characters.
MAX_WORD_TOKENS = 20_000


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """The edit from `old` to `new` as (op, text) pieces, op in same/added/removed.
    Concatenating the same+removed pieces gives `old`; same+added gives `new`."""
    a, b = _TOKEN.findall(old or ""), _TOKEN.findall(new or "")
    if len(a) + len(b) > MAX_WORD_TOKENS:  # beyond ~10,000 words a side, diff whole lines
        a, b = (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True)
    ops: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            ops.append((SAME, "".join(a[i1:i2])))
            continue
        if i2 > i1:
            ops.append((REMOVED, "".join(a[i1:i2])))
        if j2 > j1:
            ops.append((ADDED, "".join(b[j1:j2])))
    return ops


def split_sentences(text: str) -> list[str]:
    """The non-empty sentences of a text, stripped."""
    return [s.strip() for s in _SENTENCE_END.split(text or "") if s.strip()]


@dataclass(frozen=True)
class LineageNode:
    """What attribution needs to know of one candidate."""

    index: int
    parents: tuple[int, ...]
    components: Mapping[str, str]


def sentence_origins(nodes: Mapping[int, LineageNode], index: int, component: str) -> list[tuple[str, int]]:
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
    return [(s, memo[index][s]) for s in split_sentences(nodes[index].components.get(component, ""))]
