"""How reasons quote the phrases they talk about.

Every phrase a reason mentions (a value to include, a phrase found, a key, a
pattern) is written as a JSON string literal: double quotes, with ``"`` and
``\\`` escaped, so a reader (human or the demo simulator) can pull phrases out
of feedback with one regular expression: ``"((?:[^"\\\\]|\\\\.)*)"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from json.encoder import encode_basestring

#: Outputs quoted back in a reason ("got: …") are clipped to this many characters.
CLIP_CHARS = 60


def quote(phrase: object) -> str:
    """``refund`` → ``"refund"`` (a JSON string literal, non-ASCII kept).

    What ``json.dumps(str(phrase), ensure_ascii=False)`` returns, without the
    encoder it builds on every call (which cost more than the rest of a
    typical reason)."""
    return encode_basestring(str(phrase))


def quote_all(phrases: Iterable[object]) -> str:
    """``["a", "b"]`` → ``"a", "b"``."""
    return ", ".join(quote(phrase) for phrase in phrases)


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """The start of ``text``, with an ellipsis when it was longer than ``limit``."""
    return text if len(text) <= limit else text[:limit] + "…"
