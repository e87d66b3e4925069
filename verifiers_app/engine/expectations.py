"""Per-task ``metadata.expectations``: mustMention / mustNotMention entries.

An entry is a plain phrase (``"refund"``, the same as ``{"text": "refund"}``),
``{"text": phrase}`` or ``{"anyOf": [phrases]}``, each optionally with a
``message``; without one the reason is generated and names the phrase(s).

Parsed once per task (not per output) into lower-cased phrase tuples with the
miss reason already written, so the ``task_expectations`` check is a handful of
substring tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .quoting import quote, quote_all

DEFAULT_MENTION_MESSAGE = "output is missing an expected phrase"
DEFAULT_FORBID_MESSAGE = "output contains a phrase it must not"

_ENTRY_KEYS = {"anyOf", "text", "message"}
_LIST_KEYS = ("mustMention", "mustNotMention")


@dataclass(frozen=True, slots=True)
class Mention:
    lowered: tuple[str, ...]
    reason: str  # complete: message + the phrases that were expected


@dataclass(frozen=True, slots=True)
class Forbidden:
    phrases: tuple[str, ...]
    lowered: tuple[str, ...]
    message: str  # the "(found: …)" part depends on the output


@dataclass(frozen=True, slots=True)
class Expectations:
    mentions: tuple[Mention, ...] = ()
    forbidden: tuple[Forbidden, ...] = ()

    @property
    def total(self) -> int:
        return len(self.mentions) + len(self.forbidden)


NO_EXPECTATIONS = Expectations()


def parse_expectations(raw: Any, path: str) -> tuple[Expectations, list[str]]:
    """Parse ``raw`` (the value at ``path``); return it and every problem found.

    Entries with problems are left out of the result, so a caller that only
    wants what is usable can ignore the problems; validation callers raise them.
    """
    if raw is None:
        return NO_EXPECTATIONS, []
    if not isinstance(raw, dict):
        return NO_EXPECTATIONS, [
            f"{path}: must be an object with mustMention / mustNotMention lists"
        ]
    problems = [
        f"{path}.{key}: unknown field (expected mustMention or mustNotMention)"
        for key in raw
        if key not in _LIST_KEYS
    ]
    mentions: list[Mention] = []
    forbidden: list[Forbidden] = []
    for key in _LIST_KEYS:
        entries = raw.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            problems.append(f"{path}.{key}: must be a list of entries")
            continue
        for index, entry in enumerate(entries):
            entry_path = f"{path}.{key}[{index}]"
            phrases, message, entry_problems = _parse_entry(entry, entry_path)
            problems.extend(entry_problems)
            if entry_problems:
                continue
            if key == "mustMention":
                expected = (
                    f"expected: {quote(phrases[0])}"
                    if len(phrases) == 1
                    else f"expected one of: {quote_all(phrases)}"
                )
                reason = f"{message or DEFAULT_MENTION_MESSAGE} ({expected})"
                mentions.append(Mention(tuple(p.lower() for p in phrases), reason))
            else:
                forbidden.append(
                    Forbidden(
                        phrases,
                        tuple(p.lower() for p in phrases),
                        message or DEFAULT_FORBID_MESSAGE,
                    )
                )
    return Expectations(tuple(mentions), tuple(forbidden)), problems


ENTRY_SHAPES = '"refund", {"text": "refund"} or {"anyOf": ["refund", "money back"], "message": "offer a refund"}'


def _parse_entry(entry: Any, path: str) -> tuple[tuple[str, ...], str, list[str]]:
    if isinstance(entry, str):  # a plain phrase: the same as {"text": phrase}
        if not entry:
            return (), "", [f"{path}: must be a non-empty phrase"]
        return (entry,), "", []
    if not isinstance(entry, dict):
        return (
            (),
            "",
            [f"{path}: must be a phrase or an object with anyOf or text, e.g. {ENTRY_SHAPES}"],
        )
    problems = [f"{path}.{key}: unknown field" for key in entry if key not in _ENTRY_KEYS]
    message = entry.get("message", "")
    if not isinstance(message, str):
        problems.append(f"{path}.message: must be a string")
        message = ""
    has_any, has_text = "anyOf" in entry, "text" in entry
    phrases: tuple[str, ...] = ()
    if has_any and has_text:
        problems.append(f"{path}: give either anyOf or text, not both")
    elif has_any:
        any_of = entry["anyOf"]
        if not isinstance(any_of, list):
            problems.append(f"{path}.anyOf: must be a list of phrases")
        elif not any_of:
            problems.append(f"{path}.anyOf: must not be empty")
        else:
            for index, phrase in enumerate(any_of):
                if not isinstance(phrase, str) or not phrase:
                    problems.append(f"{path}.anyOf[{index}]: must be a non-empty string")
            phrases = tuple(any_of)
    elif has_text:
        text = entry["text"]
        if not isinstance(text, str) or not text:
            problems.append(f"{path}.text: must be a non-empty string")
        else:
            phrases = (text,)
    else:
        problems.append(f"{path}: needs anyOf (a list of phrases) or text (one phrase)")
    return phrases, message.strip(), problems
