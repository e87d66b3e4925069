"""Small text helpers shared by the simulated task model and reflection.

Quoted phrases are the currency of the simulator: rules quote what to include or
avoid, feedback quotes what was expected or found. A phrase is delimited by
"double quotes" (backslash escapes allowed), “curly quotes” or `backticks`; a
quoted JSON pair such as "urgency": "high" is read as one phrase.
"""

from __future__ import annotations

import hashlib
import json
import re

MAX_PHRASE = 300

# "key": "value" — one phrase (a JSON member), kept exactly as json.dumps writes it.
_PAIR = re.compile(r'"([^"\\\n]{1,100})"\s*:\s*"([^"\\\n]{1,200})"')
_QUOTED = re.compile(
    rf'"((?:[^"\\\n]|\\.){{1,{MAX_PHRASE}}})"|“([^”\n]{{1,{MAX_PHRASE}}})”|`([^`\n]{{1,{MAX_PHRASE}}})`'
)
PLACEHOLDER = re.compile(r"\x00(\d+)\x00")

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "i'm",
        "if",
        "in",
        "into",
        "is",
        "it",
        "it's",
        "its",
        "itself",
        "just",
        "let",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "please",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "thank",
        "thanks",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "hello",
        "dear",
        "regards",
        "hi",
        "hey",
        "would",
        "could",
        "might",
        "must",
        "shall",
        "since",
        "still",
        "were",
        "want",
        "wants",
        "need",
        "needs",
        "like",
        "get",
        "got",
        "just",
        "really",
        "also",
        "sure",
        "know",
        "think",
        "yesterday",
        "today",
        "tomorrow",
        "week",
        "weeks",
        "month",
        "days",
        "day",
        "time",
    ]
)


def pair_phrase(key: str, value: str) -> str:
    return f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"


def split_pair(phrase: str) -> tuple[str, str] | None:
    """('urgency', 'high') for the phrase '"urgency": "high"', else None."""
    match = _PAIR.fullmatch(phrase.strip())
    return (match.group(1), match.group(2)) if match else None


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return raw.replace('\\"', '"')


def mask_quotes(text: str) -> tuple[str, list[str]]:
    """Replace every quoted phrase by a placeholder \\x00N\\x00; return (masked, phrases)."""
    phrases: list[str] = []

    def keep(phrase: str) -> str:
        phrases.append(phrase)
        return f"\x00{len(phrases) - 1}\x00"

    text = text.replace("\x00", " ")
    text = _PAIR.sub(lambda m: keep(pair_phrase(m.group(1), m.group(2))), text)

    def single(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            phrase = _unescape(match.group(1))
        else:
            phrase = match.group(2) if match.group(2) is not None else match.group(3)
        phrase = phrase.strip()
        if PLACEHOLDER.fullmatch(phrase):  # ""a": "b"" — a pair in naive outer quotes
            return phrase
        # a phrase that swallowed a pair: put the pair's text back
        phrase = PLACEHOLDER.sub(lambda m: phrases[int(m.group(1))], phrase)
        return keep(phrase) if phrase else match.group(0)

    return _QUOTED.sub(single, text), phrases


def placeholders_in(masked: str, phrases: list[str]) -> list[str]:
    return [phrases[int(i)] for i in PLACEHOLDER.findall(masked) if int(i) < len(phrases)]


def quote(phrase: str) -> str:
    """Render a phrase so mask_quotes reads it back unchanged."""
    if split_pair(phrase):
        return phrase
    if '"' not in phrase and "\\" not in phrase:
        return f'"{phrase}"'
    if "`" not in phrase:
        return f"`{phrase}`"
    return f"“{phrase}”"


def quote_list(phrases: list[str], conjunction: str = "or") -> str:
    quoted = [quote(p) for p in phrases]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + f" {conjunction} " + quoted[-1]


def fraction(*parts: object) -> float:
    """A stable uniform number in [0, 1) from its parts (never Python's salted hash)."""
    digest = hashlib.blake2b(
        "\x1f".join(str(p) for p in parts).encode("utf-8", "replace"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") / 2**64


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=12).hexdigest()


_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]{2,30}")


def content_words(text: str) -> list[str]:
    """Lower-cased content words in order of appearance (duplicates kept)."""
    return [
        w.lower().strip("'-")
        for w in _WORD.findall(text)
        if w.lower() not in STOPWORDS and len(w) >= 4
    ]
