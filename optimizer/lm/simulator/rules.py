"""The rule grammar the simulated task model understands, and how rules are written.

A system prompt is read sentence by sentence. A sentence becomes rules when it
quotes phrases ("…", “…” or `…`) or asks for a format or a length:

- include   ``Mention "refund".``  ``Always include "refund".``  (no negative cue)
- avoid     ``Never mention "gift card".``  ``Do not say "voucher".``  (never / not /
            don't / avoid / without / refrain … ; "do not forget" counts as include)
- json      ``Reply with only a valid JSON object with the keys "urgency", "sentiment".``
            (the word JSON; quoted names in that sentence are required keys;
            a quoted pair "urgency": "high" is a member to include)
- length    ``Keep the reply under 800 characters.``  ``Use at least 50 words.``
- condition ``When the request mentions "flood" or "leak", include "high".`` — the rule
            applies only when one of the quoted trigger words occurs in the task input;
            a triggered conditional rule overrides an unconditional one of the other
            polarity for the same phrase.

Each rule carries a *strength*: the probability that the simulated model follows
it. Plain statements start at 0.5; each distinct strong cue (must, always, never,
required, exact(ly), verbatim, make sure, …) adds 0.15 (two at most); SHOUTED
words (IMPORTANT, MUST, ALWAYS …) add 0.15; hedges (try to, if possible,
consider, maybe …) take 0.2 away; a format (JSON) rule gets 0.1 extra; each
repetition of the same rule elsewhere in the prompt adds 0.08 (twice at most).
The result is clamped to [0.05, 0.97] — even a perfect prompt is not obeyed
every single time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .text import (
    PLACEHOLDER,
    mask_quotes,
    placeholders_in,
    quote,
    quote_list,
    split_pair,
)

MAX_PROMPT_CHARS = 100_000
MAX_RULES = 400
MAX_TRIGGERS = 12

BASE_STRENGTH = 0.5
CUE_BONUS = 0.15
SHOUT_BONUS = 0.15
HEDGE_PENALTY = 0.2
FORMAT_BONUS = 0.1
REPEAT_BONUS = 0.08
MIN_STRENGTH, MAX_STRENGTH = 0.05, 0.97

_STRONG_CUES = [
    re.compile(p, re.I)
    for p in (
        r"\bmust\b",
        r"\balways\b",
        r"\bnever\b",
        r"\brequired?\b",
        r"\bexact(?:ly)?\b",
        r"\bverbatim\b",
        r"\b(?:make|be) sure\b",
        r"\bunder no circumstances\b",
        r"\bwithout exception\b",
        r"\bmandatory\b",
    )
]
_HEDGE = re.compile(
    r"\b(?:try to|if possible|where possible|consider|maybe|perhaps|optionally|might|may want|could|"
    r"when appropriate|if relevant|where relevant|ideally)\b",
    re.I,
)
_SHOUT = re.compile(r"\b[A-Z]{3,}\b")
_NOT_SHOUTING = {
    "JSON",
    "API",
    "URL",
    "HTML",
    "CSV",
    "XML",
    "USD",
    "EUR",
    "GBP",
    "FAQ",
    "PDF",
    "SMS",
    "ETA",
}

_POSITIVE_DOUBLE_NEGATIVE = re.compile(
    r"\b(?:do not|don't|never|not) (?:forget|omit|leave out|skip|fail)\b", re.I
)
_NEGATIVE = re.compile(
    r"\b(?:never|not|don't|dont|avoid|without|refrain|exclude|forbid\w*|prohibit\w*|nothing)\b|\bno\s+\x00",
    re.I,
)
_JSON = re.compile(r"\bjson\b", re.I)
_UNIT = r"\s*(characters|chars?|words?)\b"
_MAX_LEN = re.compile(
    r"\b(?:at most|no more than|not more than|under|fewer than|less than|maximum of|max(?:imum)?|up to|within|"
    r"not exceed|shorter than|below)\s+(\d{1,6})" + _UNIT,
    re.I,
)
_MIN_LEN = re.compile(
    r"\b(?:at least|no fewer than|no less than|not less than|minimum of|min(?:imum)?|more than|longer than|over)"
    r"\s+(\d{1,6})" + _UNIT,
    re.I,
)
_CONDITION = re.compile(
    r"^\W*(?:\w+:\s*)?(?:when|whenever|if)\b(?P<cond>[^\x00,]*(?:\x00\d+\x00[\s,]*(?:or\s+|and\s+)?)+[^\x00,]*?),"
    r"\s*(?:then\s+)?(?P<act>.+)$",
    re.I | re.S,
)
_CLAUSE_SPLIT = re.compile(
    r";|,?\s+but\s+|,?\s+however,?\s+|,?\s+and\s+(?=(?:never|do not|don't|avoid)\b)|,?\s+while\s+",
    re.I,
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
_BULLET = re.compile(r"^(\s*(?:[-*•]|\d+[.)])\s+)")

KINDS = ("include", "avoid", "json", "max_chars", "min_chars", "max_words", "min_words")


@dataclass(frozen=True)
class Rule:
    kind: str
    phrase: str = ""
    keys: tuple[str, ...] = ()
    number: int = 0
    triggers: tuple[str, ...] = ()
    strength: float = BASE_STRENGTH
    # where the rule was read from: every line holding it, and one line that holds
    # only this rule (so a reflection can rewrite that line in place)
    lines: tuple[int, ...] = field(default=(), compare=False)
    alone_line: int | None = field(default=None, compare=False)

    @property
    def identity(self) -> tuple:
        if self.kind in ("include", "avoid"):
            return (self.kind, self.phrase.lower(), frozenset(t.lower() for t in self.triggers))
        if self.kind == "json":
            return ("json", frozenset(t.lower() for t in self.triggers))
        return (self.kind, frozenset(t.lower() for t in self.triggers))

    def applies_to(self, task_lower: str) -> bool:
        return not self.triggers or any(t.lower() in task_lower for t in self.triggers)


def explicitness(masked_sentence: str) -> float:
    """How strongly a sentence is stated (quoted phrases already masked out)."""
    plain = PLACEHOLDER.sub(" ", masked_sentence)
    cues = sum(1 for cue in _STRONG_CUES if cue.search(plain))
    strength = BASE_STRENGTH + CUE_BONUS * min(cues, 2)
    if any(word not in _NOT_SHOUTING for word in _SHOUT.findall(plain)):
        strength += SHOUT_BONUS
    if _HEDGE.search(plain):
        strength -= HEDGE_PENALTY
    return strength


def _clamp(value: float) -> float:
    return max(MIN_STRENGTH, min(MAX_STRENGTH, value))


def _clause_rules(
    clause: str, phrases: list[str], strength: float, triggers: tuple[str, ...]
) -> list[Rule]:
    rules: list[Rule] = []
    quoted = placeholders_in(clause, phrases)
    plain = PLACEHOLDER.sub(" ", clause)
    for match in _MAX_LEN.finditer(plain):
        unit = "words" if match.group(2).lower().startswith("word") else "chars"
        rules.append(
            Rule(
                kind=f"max_{unit}", number=int(match.group(1)), triggers=triggers, strength=strength
            )
        )
    for match in _MIN_LEN.finditer(plain):
        unit = "words" if match.group(2).lower().startswith("word") else "chars"
        rules.append(
            Rule(
                kind=f"min_{unit}", number=int(match.group(1)), triggers=triggers, strength=strength
            )
        )
    negative = bool(_NEGATIVE.search(clause)) and not _POSITIVE_DOUBLE_NEGATIVE.search(clause)
    if _JSON.search(plain):
        if negative and not quoted:
            return rules  # "do not answer in JSON": nothing the simulator models
        keys = tuple(dict.fromkeys(p for p in quoted if not split_pair(p)))
        rules.append(
            Rule(kind="json", keys=keys, triggers=triggers, strength=strength + FORMAT_BONUS)
        )
        quoted = [p for p in quoted if split_pair(p)]  # members still count as phrases
    for phrase in dict.fromkeys(quoted):
        rules.append(
            Rule(
                kind="avoid" if negative else "include",
                phrase=phrase,
                triggers=triggers,
                strength=strength,
            )
        )
    return rules


def _sentence_rules(masked: str, phrases: list[str]) -> list[Rule]:
    if "\x00" not in masked and not _JSON.search(masked) and not re.search(r"\d", masked):
        return []
    strength = explicitness(masked)
    triggers: tuple[str, ...] = ()
    action = masked
    condition = _CONDITION.match(masked)
    if condition:
        found = placeholders_in(condition.group("cond"), phrases)
        if found:
            triggers = tuple(dict.fromkeys(found))[:MAX_TRIGGERS]
            action = condition.group("act")
    rules: list[Rule] = []
    for clause in _CLAUSE_SPLIT.split(action):
        if clause and clause.strip():
            rules.extend(_clause_rules(clause, phrases, strength, triggers))
    return rules


def parse_rules(prompt: str) -> list[Rule]:
    """All rules of a prompt, merged: repeated rules get stronger, JSON keys unite."""
    raw: list[Rule] = []
    for index, line in enumerate(prompt[:MAX_PROMPT_CHARS].split("\n")):
        if not line.strip():
            continue
        masked, phrases = mask_quotes(line)
        line_rules: list[Rule] = []
        for sentence in _SENTENCE_SPLIT.split(masked):
            line_rules.extend(_sentence_rules(sentence, phrases))
        for rule in line_rules:
            raw.append(
                replace(rule, lines=(index,), alone_line=index if len(line_rules) == 1 else None)
            )
        if len(raw) >= MAX_RULES:
            break

    merged: dict[tuple, list[Rule]] = {}
    for rule in raw:
        merged.setdefault(rule.identity, []).append(rule)
    result: list[Rule] = []
    for group in merged.values():
        best = max(group, key=lambda r: r.strength)
        strength = best.strength + REPEAT_BONUS * min(len(group) - 1, 2)
        keys: tuple[str, ...] = tuple(dict.fromkeys(k for r in group for k in r.keys))
        number = best.number
        if best.kind.startswith("max_"):
            number = min(r.number for r in group)
        elif best.kind.startswith("min_"):
            number = max(r.number for r in group)
        alone = next(
            (
                r.alone_line
                for r in sorted(group, key=lambda r: -r.strength)
                if r.alone_line is not None
            ),
            None,
        )
        result.append(
            replace(
                best,
                strength=_clamp(strength),
                keys=keys,
                number=number,
                lines=tuple(sorted({i for r in group for i in r.lines})),
                alone_line=alone,
            )
        )
    return result


# ---------------------------------------------------------------- rendering


def _action(rule: Rule, level: int) -> str:
    phrase = quote(rule.phrase) if rule.phrase else ""
    if rule.kind == "include":
        return [
            f"mention {phrase}.",
            f"always mention {phrase}.",
            f"you must always include the exact phrase {phrase}.",
            f"you MUST ALWAYS include the exact phrase {phrase}.",
        ][level - 1]
    if rule.kind == "avoid":
        return [
            f"do not mention {phrase}.",
            f"never mention {phrase}.",
            f"you must never write {phrase}.",
            f"you MUST NEVER write {phrase}, not even in passing.",
        ][level - 1]
    if rule.kind == "json":
        keys = f" with the keys {quote_list(list(rule.keys), 'and')}" if rule.keys else ""
        return [
            f"reply with a JSON object{keys}.",
            f"always reply with only a valid JSON object{keys}, and no text before or after it.",
            f"you must always reply with only a valid JSON object{keys}; no prose, no code fences.",
            f"you MUST ALWAYS reply with only a valid JSON object{keys}; no prose, no code fences.",
        ][level - 1]
    unit = "words" if rule.kind.endswith("words") else "characters"
    if rule.kind.startswith("max_"):
        return [
            f"keep the reply under {rule.number} {unit}.",
            f"always keep the reply under {rule.number} {unit}.",
            f"the reply must always stay under {rule.number} {unit}.",
            f"the reply MUST ALWAYS stay under {rule.number} {unit}.",
        ][level - 1]
    return [
        f"write at least {rule.number} {unit}.",
        f"always write at least {rule.number} {unit}.",
        f"you must always write at least {rule.number} {unit}.",
        f"you MUST ALWAYS write at least {rule.number} {unit}.",
    ][level - 1]


def render(rule: Rule, level: int) -> str:
    """One sentence stating ``rule`` at explicitness level 1 (plain) … 4 (shouted)."""
    level = max(1, min(4, level))
    action = _action(rule, level)
    if rule.triggers:
        sentence = f"When the request mentions {quote_list(list(rule.triggers))}, {action}"
        return ("IMPORTANT: " + sentence) if level == 4 else sentence
    sentence = action[0].upper() + action[1:]
    return ("IMPORTANT: " + sentence) if level == 4 else sentence


def rendered_strength(rule: Rule, level: int) -> float:
    parsed = [r for r in parse_rules(render(rule, level)) if r.kind == rule.kind]
    return parsed[0].strength if parsed else BASE_STRENGTH


def bullet_of(line: str) -> str:
    match = _BULLET.match(line)
    return match.group(1) if match else ""
