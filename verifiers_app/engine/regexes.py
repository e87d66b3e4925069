"""Regular expressions with a time limit.

Patterns come from users (``regex`` checks) and from task rows (the
``regex_match`` fn), so a catastrophic-backtracking pattern on a large output
must not stall a run. The ``regex`` package is used in its re-compatible mode
(``V0``): same syntax and ``search`` semantics as :mod:`re`, plus a per-call
``timeout``.
"""

from __future__ import annotations

import functools

import regex

from .quoting import quote

#: Seconds a single regex search may take before it is abandoned (scores 0).
REGEX_TIMEOUT_SECONDS = 0.25
#: Seconds all the regex checks of one scoring may take together: a spec with
#: many catastrophic patterns stays bounded too (later searches are not run).
REGEX_BUDGET_SECONDS = 1.0

IGNORECASE = regex.IGNORECASE
RegexError = regex.error


class RegexTimeout(TimeoutError):
    """A search ran past :data:`REGEX_TIMEOUT_SECONDS`."""


def compile_pattern(pattern: str, flags: int = 0) -> regex.Pattern:
    """Compile with re-compatible semantics; raises :class:`RegexError`."""
    return regex.compile(pattern, flags | regex.V0)


@functools.lru_cache(maxsize=1024)
def cached_pattern(pattern: str, flags: int = 0) -> regex.Pattern:
    """:func:`compile_pattern` for patterns that arrive per task row."""
    return compile_pattern(pattern, flags)


def search(compiled: regex.Pattern, text: str, left: float = REGEX_TIMEOUT_SECONDS):
    """``compiled.search(text)`` or :class:`RegexTimeout` naming the pattern.

    ``left``: what remains of the scoring's regex budget; the search gets at most
    that (and at most :data:`REGEX_TIMEOUT_SECONDS`), and is not started at 0."""
    if left <= 0:
        raise RegexTimeout(
            f"pattern {quote(compiled.pattern)} not run: earlier patterns used up the "
            f"{REGEX_BUDGET_SECONDS} s regex budget for one output"
        )
    timeout = left if left < REGEX_TIMEOUT_SECONDS else REGEX_TIMEOUT_SECONDS
    try:
        return compiled.search(text, timeout=timeout)
    except TimeoutError:
        raise RegexTimeout(
            f"pattern {quote(compiled.pattern)} timed out after {timeout:.2g} s "
            f"on a {len(text):,}-character output"
        ) from None
