"""Regular expressions with a time limit.

Patterns come from users (``regex`` checks) and from task rows (the
``regex_match`` fn), so a catastrophic-backtracking pattern on a large output
must not stall a run. The ``regex`` package is used in its re-compatible mode
(``V0``): same syntax and ``search`` semantics as :mod:`re`, plus a per-call
``timeout``.

Compiling is bounded too: the ``regex`` package expands counted repeats when
it compiles (``a{1000000000}`` grew a server to 20 GB) and parses nested groups
recursively (1,000 nested ``(`` raised RecursionError), so
:func:`compile_pattern` measures a pattern before handing it over and refuses
one above :data:`MAX_PATTERN_LENGTH`, :data:`MAX_REPEAT`,
:data:`MAX_GROUP_DEPTH` or :data:`MAX_EXPANDED_SIZE` with a
:class:`RegexTooCostly` (a :data:`RegexError`, so every caller that reports a
pattern that does not compile reports this one the same way).
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

#: Longest pattern accepted, in characters.
MAX_PATTERN_LENGTH = 10_000
#: Largest count in a counted repeat (``{n}``, ``{n,}``, ``{n,m}``, ``{,m}``).
MAX_REPEAT = 1_000
#: Deepest nesting of groups (``(``, ``(?:``, lookarounds).
MAX_GROUP_DEPTH = 100
#: Largest size of the pattern once its counted repeats are expanded, counted in
#: pattern items (``(?:a{1000}){50}`` is 50,000). 100,000 measured ~0.25 s and
#: ~30 MB to compile here, so this stays well under that.
MAX_EXPANDED_SIZE = 50_000

IGNORECASE = regex.IGNORECASE
RegexError = regex.error


class RegexTooCostly(regex.error):  # type: ignore[misc]  # regex ships no type stubs: its error is Any
    """A pattern that would take too much memory or time to compile."""


# A counted repeat: {n}, {n,}, {,m}, {n,m} (anything else in braces is literal).
_COUNTED_REPEAT = regex.compile(r"\{\s*(\d*)\s*(?:(,)\s*(\d*)\s*)?\}")
# Escapes whose argument is in braces or angle brackets: \p{L}, \N{...}, \x{41}, \g<1>.
_BRACED_ESCAPE = regex.compile(r"\\(?:[pPNxuUX]\{[^}]*\}|g<[^>]*>)")


def check_pattern_cost(pattern: str) -> None:
    """Raise :class:`RegexTooCostly` when compiling ``pattern`` would cost more
    than the limits above allow. A linear scan that never compiles anything: it
    needs only to see groups, character classes, escapes and counted repeats,
    and errs on the side of counting too much (a brace inside a verbose-mode
    comment counts as a repeat)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RegexTooCostly(
            f"pattern is {len(pattern):,} characters long; the limit is {MAX_PATTERN_LENGTH:,}"
        )
    # One frame per open group: [total size so far, size of the last item].
    frames: list[list[int]] = [[0, 0]]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        frame = frames[-1]
        if ch == "\\":
            braced = _BRACED_ESCAPE.match(pattern, i)
            i = braced.end() if braced else i + 2
            frame[0] += 1
            frame[1] = 1
            continue
        if ch == "[":  # a character class is one item; skip to its closing ]
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            frame[0] += 1
            frame[1] = 1
            continue
        if ch == "(":
            if len(frames) > MAX_GROUP_DEPTH:
                raise RegexTooCostly(f"groups nested more than {MAX_GROUP_DEPTH} deep", pattern, i)
            if pattern.startswith("(?#", i):  # a comment: nothing to count
                end = pattern.find(")", i)
                i = n if end == -1 else end + 1
                continue
            frames.append([0, 0])
            i += 1
            continue
        if ch == ")":
            if len(frames) > 1:
                inner = frames.pop()[0]
                frames[-1][0] += inner
                frames[-1][1] = inner
            i += 1
            continue
        if ch == "{":
            counted = _COUNTED_REPEAT.match(pattern, i)
            if counted:
                low, _comma, high = counted.groups()
                for count in (low, high):
                    if count and int(count) > MAX_REPEAT:
                        raise RegexTooCostly(
                            f"counted repeat {counted.group()} is above the limit of "
                            f"{MAX_REPEAT:,} repetitions",
                            pattern,
                            i,
                        )
                times = max(int(low or 0), int(high or 0), 1)
                frame[0] += frame[1] * (times - 1)
                frame[1] *= times
                if frame[0] > MAX_EXPANDED_SIZE:
                    raise RegexTooCostly(
                        f"counted repeats expand the pattern to more than {MAX_EXPANDED_SIZE:,} "
                        "items",
                        pattern,
                        i,
                    )
                i = counted.end()
                continue
        if ch == "|":
            frame[1] = 0
        elif ch not in "*+?":
            frame[0] += 1
            frame[1] = 1
        i += 1
    total = sum(f[0] for f in frames)
    if total > MAX_EXPANDED_SIZE:
        raise RegexTooCostly(
            f"counted repeats expand the pattern to more than {MAX_EXPANDED_SIZE:,} items"
        )


class RegexTimeout(TimeoutError):
    """A search ran past :data:`REGEX_TIMEOUT_SECONDS`."""


def compile_pattern(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """Compile with re-compatible semantics; raises :class:`RegexError`
    (:class:`RegexTooCostly` for a pattern above the compile limits)."""
    check_pattern_cost(pattern)
    return regex.compile(pattern, flags | regex.V0)


@functools.lru_cache(maxsize=1024)
def cached_pattern(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """:func:`compile_pattern` for patterns that arrive per task row."""
    return compile_pattern(pattern, flags)


def search(
    compiled: regex.Pattern[str], text: str, left: float = REGEX_TIMEOUT_SECONDS
) -> regex.Match[str] | None:
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
        # search(string, pos, endpos, concurrent, partial, timeout), by position:
        # parsing a keyword argument costs more than a short search.
        return compiled.search(text, None, None, None, False, timeout)
    except TimeoutError:
        raise RegexTimeout(
            f"pattern {quote(compiled.pattern)} timed out after {timeout:.2g} s "
            f"on a {len(text):,}-character output"
        ) from None
