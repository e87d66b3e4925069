"""Reading verifier feedback into concrete asks.

The feedback is the scoring engine's reasons, concatenated. The parser is
deliberately tolerant: it cuts the text into clauses (newlines, ";", "|",
sentence ends), masks quoted phrases, then classifies each clause by its cues:

- ``missing required keys: "a", "b"``                      → keys (implies JSON)
- ``… (found: "gift card")``, ``output contains "X"``,
  ``must not / should not / never / avoid … "X"``          → avoid X
- ``… (expected one of: "refund", "money back")``,
  ``output does not contain "X"``, ``missing "X"``,
  ``should mention "X"``, any other quoted phrase          → include X (alternatives kept)
- ``not valid JSON``, ``not a JSON object``                → json
- ``… 1200 characters; at most 800 allowed``, ``(1200 > 800)`` → max_chars (or words)
- ``at least 50 characters``                               → min_chars (or words)
- a regex mismatch or anything else                        → note (left for the reasoning)

When a clause has ``expected…:`` or ``found:``, only the phrases quoted after it
are asked for: the message before it may quote other words (``set "urgency" to
"high" (expected: …)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .text import PLACEHOLDER, mask_quotes, placeholders_in

MAX_FEEDBACK_CHARS = 20_000
MAX_ASKS = 100


@dataclass(frozen=True)
class Ask:
    kind: (
        str  # include | avoid | json | keys | max_chars | min_chars | max_words | min_words | note
    )
    phrases: tuple[
        str, ...
    ] = ()  # include: acceptable alternatives; avoid: phrases; keys: key names
    number: int = 0
    text: str = ""


_CLAUSE_SPLIT = re.compile(r"\n+|;|\s\|\s|(?<=[.!?])\s+(?=[A-Z(\x00])")
_SCORE_LINE = re.compile(r"^\W*(?:score|verdict|passed|attempts?)\b", re.I)
_KEYS = re.compile(
    r"missing (?:the )?(?:required )?(?:json )?(?:keys?|fields?|propert(?:y|ies))|required (?:keys?|fields?)|"
    r"(?:keys?|fields?) (?:are |is )?missing",
    re.I,
)
_FOUND = re.compile(
    r"(?<!not )(?<!n't )\bfound\s*:|\bforbidden\b|\bmust not contain\b|\bshould not contain\b", re.I
)
_EXPECTED = re.compile(r"\bexpected(?: one of| any of)?\s*:", re.I)
_INCLUDE_CUES = re.compile(
    r"\bexpected\b|\bnot found\b|\b(?:does|did)(?: not|n't) (?:contain|include|mention|equal|say)|\bmissing\b|"
    r"\blacks?\b|\b(?:should|must|needs? to) (?:contain|include|mention|say|offer|state)|\bno mention of\b|"
    r"\bwithout\b",
    re.I,
)
_AVOID_CUES = re.compile(
    r"\bfound\b|\bcontains?\b|\bmust not\b|\bshould not\b|\bshouldn't\b|\bdo not\b|\bdon't\b|\bnever\b|"
    r"\bavoid\b|\bnot allowed\b|\bunexpected\b|\bprohibited\b|\bmentions?\b",
    re.I,
)
_REGEX = re.compile(r"\bmatch(?:es|ed)?\b|\bpattern\b|\bregex\b|\bregular expression\b", re.I)
# reasons that quote names, not phrases to write: skipped checks, fn / class scores
_NOT_ACTIONABLE = re.compile(
    r"\(skipped\)|\bunknown check\b|\binvalid regular expression\b|\bgave reward\b|\bscored [\d.]+ against\b|\bcheck raised\b",
    re.I,
)
# what the output actually said ("got: …") is not something to ask for
_GOT = re.compile(r"\(?\bgot:?\s*\x00\d+\x00\)?", re.I)
_JSON_BAD = re.compile(
    r"not (?:valid |a )?json|invalid json|json (?:decode|parse)|could not (?:be )?parse|not a json object|"
    r"expecting value|is not an object|without a code fence|bare json",
    re.I,
)
_NUMBER = r"(\d[\d,]{0,9})"
_MAX = re.compile(
    r"(?:at most|maximum(?: of)?|max\.?|no more than|up to|limit(?: of| is)?|exceeds?(?: the limit of)?)\s*:?\s*"
    + _NUMBER,
    re.I,
)
_MIN = re.compile(
    r"(?:at least|minimum(?: of)?|min\.?|no fewer than|no less than)\s*:?\s*" + _NUMBER, re.I
)
_GT = re.compile(_NUMBER + r"\s*>\s*" + _NUMBER)
_LT = re.compile(_NUMBER + r"\s*<\s*" + _NUMBER)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _length_asks(plain: str) -> list[Ask]:
    lower = plain.lower()
    if "character" in lower or re.search(r"\bchars?\b", lower):
        unit = "chars"
    elif re.search(r"\bwords?\b", lower):
        unit = "words"
    else:
        return []
    asks: list[Ask] = []
    too_long = re.search(r"too long|exceed|longer than", lower)
    too_short = re.search(r"too short|shorter than", lower)
    if (m := _MAX.search(plain)) or (too_long and (m := _GT.search(plain))):
        asks.append(Ask(kind=f"max_{unit}", number=_int(m.group(m.lastindex or 1))))
    if (m := _MIN.search(plain)) or (too_short and (m := _LT.search(plain))):
        asks.append(Ask(kind=f"min_{unit}", number=_int(m.group(m.lastindex or 1))))
    return asks


def _after(cue: re.Pattern[str], masked: str, phrases: list[str]) -> tuple[str, ...]:
    """The phrases quoted after ``cue`` ("expected one of:", "found:"): a message
    before it may quote other words ('set "urgency" to "high" (expected:
    "\\"urgency\\": \\"high\\"")'), which are not the phrase to write or avoid."""
    match = cue.search(masked)
    return tuple(dict.fromkeys(placeholders_in(masked[match.end() :], phrases))) if match else ()


def clause_asks(masked: str, phrases: list[str]) -> list[Ask]:
    masked = _GOT.sub(" ", masked)
    plain = PLACEHOLDER.sub(" ", masked).strip()
    quoted = tuple(dict.fromkeys(placeholders_in(masked, phrases)))
    if _SCORE_LINE.match(plain) and not quoted:
        return []
    asks = _length_asks(plain)
    if asks:
        return asks
    if quoted and _KEYS.search(plain):
        return [Ask(kind="keys", phrases=quoted)] + (
            [Ask(kind="json")] if _JSON_BAD.search(plain) else []
        )
    if _JSON_BAD.search(plain):
        return [Ask(kind="json")]
    if not quoted or _NOT_ACTIONABLE.search(plain):
        text = " ".join(PLACEHOLDER.sub(lambda m: phrases[int(m.group(1))], masked).split())
        return [Ask(kind="note", text=text[:200])] if len(text.split()) >= 4 else []
    if _FOUND.search(plain):
        return [Ask(kind="avoid", phrases=_after(_FOUND, masked, phrases) or quoted)]
    if _EXPECTED.search(plain):
        return [Ask(kind="include", phrases=_after(_EXPECTED, masked, phrases) or quoted)]
    if _REGEX.search(plain) and not _INCLUDE_CUES.search(plain.replace("match", "")):
        text = " ".join(PLACEHOLDER.sub(lambda m: phrases[int(m.group(1))], masked).split())
        return [Ask(kind="note", text=text[:200])]
    if _INCLUDE_CUES.search(plain):
        return [Ask(kind="include", phrases=quoted)]
    if _AVOID_CUES.search(plain):
        return [Ask(kind="avoid", phrases=tuple(quoted))]
    return [Ask(kind="include", phrases=quoted)]


_LENGTH_PAIR = re.compile(
    _NUMBER + r"\s*(characters?|chars?|words?)\s*[;,:]?\s*(?:are |is )?(?:allowed\s*)?[;,:]?\s*"
    r"(at most|maximum(?: of)?|max\.?|no more than|up to|at least|minimum(?: of)?|min\.?|no fewer than)\s*:?\s*"
    + _NUMBER,
    re.I,
)


def _length_pairs(masked: str) -> tuple[str, list[Ask]]:
    """'1200 characters; at most 800 allowed' spans a ';': read those before splitting."""
    asks: list[Ask] = []

    def take(match: re.Match[str]) -> str:
        unit = "words" if match.group(2).lower().startswith("word") else "chars"
        bound = (
            "max"
            if match.group(3).lower().startswith(("at most", "max", "no more", "up to"))
            else "min"
        )
        asks.append(Ask(kind=f"{bound}_{unit}", number=_int(match.group(4))))
        return " "

    return _LENGTH_PAIR.sub(take, masked), asks


# The adapter's "Score 0.40 (fail). " lead-in, glued to the first reason: drop it, or
# a first reason starting in lower case is read as part of the score line and lost.
_SCORE_PREFIX = re.compile(r"^\s*score\s+[\d.]+\s*(?:\([a-z ]*\))?\s*[.:]?\s*", re.I)


def parse_feedback(feedback: str) -> list[Ask]:
    """Every ask in a feedback text, in order, without duplicates."""
    masked, phrases = mask_quotes(
        _SCORE_PREFIX.sub("", str(feedback)[:MAX_FEEDBACK_CHARS], count=1)
    )
    masked, asks = _length_pairs(masked)
    for clause in _CLAUSE_SPLIT.split(masked):
        if clause and clause.strip():
            for ask in clause_asks(clause, phrases):
                if ask not in asks:
                    asks.append(ask)
        if len(asks) >= MAX_ASKS:
            break
    return asks
