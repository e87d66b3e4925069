"""User regexes that RE2 answers exactly, in linear time and without a timeout.

:mod:`.regexes` runs every user pattern with the ``regex`` package and a
per-search timeout; the timeout reads the process CPU clock twice per search
(two system calls, about 1.2 µs together), several times what the search
itself costs on a few hundred characters. RE2 (the ``pyre2`` package, which
wraps Google's library) cannot backtrack, so it needs no timeout.

Only the answer a check reads is used: whether the pattern is found anywhere
in the output (``regex.search(...) is not None``), never a match's span or
groups. RE2 runs a pattern only when :func:`translate` can spell it in RE2's
syntax with the same meaning; that is a whitelist on the pattern text, not an
analysis of it: anything outside the grammar below keeps the ``regex`` package
and its timeout (flags, inline flags, backreferences, ``\\b``, lookaround
other than a whole ``^(?!R)`` or ``^(?=R)`` (see :func:`compile_linear`), ``{``
outside a counted repeat, a ``$`` other than the pattern's last character, set
operations and nested sets in a class, ...).

A quantifier may follow a character, an escape, a class or ``.``, not a group:
``(a|aa)+$`` and ``(a+)+$``, the shapes the timeout and the per-output budget
are documented and tested with, keep the ``regex`` package, so what they score
stays as it was. Any other pattern that used to run out of time on an output
(``a*a*a*a*a*a*b`` on 40 ``a``) is now answered by RE2: the true answer
instead of "timed out"; on every output where the ``regex`` package answered,
the answer is the same.

Where the two engines differ, the translation spells out Python's meaning:

- ``\\d``, ``\\s``, ``\\w`` (and ``\\D``, ``\\S``, ``\\W``) are Unicode classes
  in Python and ASCII in RE2: they become explicit classes of the code points
  the installed ``regex`` package itself matches (read once, see
  :func:`_class_ranges`);
- ``.`` becomes ``[^\\n]``;
- a final ``$`` (end, or before a final newline, in Python) becomes ``\\n?\\z``
  (the pattern is searched, not matched, so consuming that newline finds the
  same outputs);
- every ASCII character other than a letter, digit or ``_`` is written as
  ``\\xHH``, so no character means something in one syntax and not the other.

RE2 reads UTF-8: an output holding a lone surrogate (possible in a Python str,
not in UTF-8) cannot be encoded and goes to the ``regex`` package instead, as
does an output longer than :data:`MAX_TEXT`. RE2's time is linear in the text
times the size of the pattern, which :data:`MAX_SIZE` and :data:`MAX_ITEMS`
bound: the slowest search measured within them (``[^\\d\\s]*\\w.{90}X``, whose
DFA RE2 gives up on, over 10,000 varied Unicode characters) took 75 ms, against
the 250 ms a ``regex`` search may take before it times out.
"""

from __future__ import annotations

import array
import functools
import string
import sys
from collections.abc import Callable

import regex

try:  # pyre2; google-re2 installs a module of the same name with another API
    import re2
except ImportError:  # pragma: no cover - pyre2 is a dependency
    re2 = None

#: Longest output (characters) searched with RE2; a longer one keeps the
#: ``regex`` package and its timeout (whose cost is nothing beside such a search).
MAX_TEXT = 10_000
#: RE2's memory for one pattern (its compiled program and DFA cache), bytes;
#: RE2 refuses a pattern whose program does not fit in about two thirds of it.
MAX_MEM = 8 << 20
#: Longest pattern (characters) given to RE2.
MAX_PATTERN = 1_000
#: Largest count in a counted repeat RE2 is given (RE2's own limit is 1,000).
MAX_REPEAT = 100
#: Largest translation given to RE2, in characters, counted repeats multiplied
#: out: it bounds the compiled program, and so the time of one search (a
#: translated ``\\w`` is 2,223 characters).
MAX_SIZE = 5_000
#: Largest number of items (characters, classes) given to RE2, counted repeats
#: multiplied out: a search that RE2's DFA cannot run (it runs out of memory on
#: some patterns) falls back to its NFA, whose time grows with the text times this.
MAX_ITEMS = 100

#: A search that answers whether the pattern is found: ``pattern.contains``.
Contains = Callable[[str], bool]

_WORD = frozenset(string.ascii_letters + string.digits + "_")
_PUNCTUATION = frozenset(string.punctuation + " ")
# Escapes of one character, the same in Python and in this translation.
_CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
_CLASS_ESCAPES = frozenset("dswDSW")
_SPECIAL = frozenset("\\.^$*+?()[]{}|")
_HEX = frozenset(string.hexdigits)


class _Untranslatable(Exception):
    """The pattern is outside the grammar RE2 is given."""


def _class_ranges(letter: str) -> tuple[tuple[int, int], ...]:
    """The code points ``regex`` (V0, str) matches with ``\\d``, ``\\s`` or
    ``\\w`` (``letter``), as inclusive ranges."""
    return _unicode_classes()[letter]


@functools.cache
def _unicode_classes() -> dict[str, tuple[tuple[int, int], ...]]:
    """``\\d``, ``\\s`` and ``\\w`` read from the ``regex`` package itself,
    by searching every code point (surrogates aside) once per process (~0.1 s),
    so the RE2 classes hold exactly what its Unicode tables say."""
    # Every code point but the surrogates, decoded from their UTF-32 (C unsigned
    # ints: 4 bytes): joining a str object per code point peaked at ~100 MB.
    codes = array.array("I", range(0xD800))
    codes.extend(range(0xE000, 0x110000))
    every = codes.tobytes().decode("utf-32-le" if sys.byteorder == "little" else "utf-32-be")
    gap = 0xE000 - 0xD800  # the surrogates, left out of `every`
    classes = {}
    for letter in "dsw":
        ranges = []
        for found in regex.finditer(rf"\{letter}+", every, flags=regex.V0):
            low, high = found.start(), found.end() - 1
            if low < 0xD800 <= high:  # a run across the surrogates: two ranges
                ranges += [(low, 0xD7FF), (0xE000, high + gap)]
            else:
                ranges.append(
                    (low + gap if low >= 0xD800 else low, high + gap if high >= 0xD800 else high)
                )
        classes[letter] = tuple(ranges)
    return classes


def _char(code: int) -> str:
    """One code point as RE2 reads it literally, inside or outside a class."""
    if code < 0x80:
        char = chr(code)
        return char if char in _WORD else f"\\x{code:02x}"
    return chr(code)


def _class_body(ranges: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> str:
    return "".join(
        _char(low) if low == high else f"{_char(low)}-{_char(high)}" for low, high in ranges
    )


def _escaped_char(pattern: str, i: int) -> tuple[int, int] | None:
    """The code point of the one-character escape at ``pattern[i]`` (after the
    backslash) and the index after it, or None when it is not one."""
    letter = pattern[i]
    if letter in _CHAR_ESCAPES:
        return ord(_CHAR_ESCAPES[letter]), i + 1
    if letter in _PUNCTUATION:
        return ord(letter), i + 1
    width = {"x": 2, "u": 4}.get(letter)
    if width is not None:
        digits = pattern[i + 1 : i + 1 + width]
        if len(digits) == width and all(d in _HEX for d in digits):
            code = int(digits, 16)
            if not 0xD800 <= code <= 0xDFFF:
                return code, i + 1 + width
    return None


def _class(pattern: str, i: int) -> tuple[str, int]:
    """``[...]`` starting at ``pattern[i]`` as an RE2 class, and the index after it."""
    n = len(pattern)
    i += 1
    negated = i < n and pattern[i] == "^"
    if negated:
        i += 1
    if i < n and pattern[i] == "]":  # `[]...]` and `[^]...]`: a literal ], left to regex
        raise _Untranslatable
    ranges: list[tuple[int, int]] = []
    previous: int | None = None  # the last single character, a possible range start
    while True:
        if i >= n:
            raise _Untranslatable
        char = pattern[i]
        if char == "]":
            break
        if char == "[" or (char in "-&~|" and pattern[i + 1 : i + 2] == char):
            raise _Untranslatable  # nested sets and set operations
        if char == "-" and previous is not None and pattern[i + 1 : i + 2] != "]":
            high, i = _class_item(pattern, i + 1, ranges, single=True)
            if high is None or high < previous:
                raise _Untranslatable
            ranges[-1] = (previous, high)
            previous = None
            continue
        previous, i = _class_item(pattern, i, ranges, single=False)
        if previous is None and pattern[i : i + 1] == "-" and pattern[i + 1 : i + 2] != "]":
            raise _Untranslatable  # `[\d-z]`
    if not ranges:
        raise _Untranslatable
    return f"[{'^' if negated else ''}{_class_body(ranges)}]", i + 1


def _class_item(
    pattern: str, i: int, ranges: list[tuple[int, int]], *, single: bool
) -> tuple[int | None, int]:
    """Add the class item at ``pattern[i]`` to ``ranges``: its code point (None
    for ``\\d``, ``\\s``, ``\\w``) and the index after it."""
    if i >= len(pattern):  # `[a-` cut off by the pattern's end
        raise _Untranslatable
    char = pattern[i]
    if char == "\\":
        if i + 1 >= len(pattern):
            raise _Untranslatable
        letter = pattern[i + 1]
        if letter in "dsw" and not single:
            ranges.extend(_class_ranges(letter))
            return None, i + 2
        escaped = _escaped_char(pattern, i + 1)
        if escaped is None:
            raise _Untranslatable
        code, i = escaped
    elif char in "[]" or 0xD800 <= ord(char) <= 0xDFFF:
        raise _Untranslatable
    else:
        code, i = ord(char), i + 1
    if not single:
        ranges.append((code, code))
    return code, i


def translate(pattern: str) -> str | None:
    """``pattern`` in RE2's syntax with the same search answer under ``regex``
    V0 without flags, or None when it is outside the grammar RE2 is given."""
    if len(pattern) > MAX_PATTERN:
        return None
    try:
        return _translate(pattern)
    except _Untranslatable:
        return None


def _translate(pattern: str) -> str:
    out: list[str] = []
    n = len(pattern)
    i = 0
    # The size of what RE2 compiles, counted repeats multiplied out (as
    # regexes.check_pattern_cost counts): one frame per open group, [characters
    # so far, items so far]. Only an atom is repeated (never a group), so a
    # quantifier repeats the last atom: `last` characters, one item.
    frames: list[list[int]] = [[0, 0]]
    last = 0  # characters of the last atom
    repeatable = False  # the last item is an atom a quantifier may follow

    def atom(text: str) -> None:
        nonlocal last
        out.append(text)
        last = len(text)
        frames[-1][0] += last
        frames[-1][1] += 1

    while i < n:
        char = pattern[i]
        if char not in _SPECIAL:
            if 0xD800 <= ord(char) <= 0xDFFF:
                raise _Untranslatable
            atom(_char(ord(char)))
            i += 1
            repeatable = True
        elif char == "\\":
            if i + 1 >= n:
                raise _Untranslatable
            letter = pattern[i + 1]
            if letter in _CLASS_ESCAPES:
                body = _class_body(_class_ranges(letter.lower()))
                atom(f"[{'^' if letter.isupper() else ''}{body}]")
                i += 2
            else:
                escaped = _escaped_char(pattern, i + 1)
                if escaped is None:
                    raise _Untranslatable
                code, i = escaped
                atom(_char(code))
            repeatable = True
        elif char == "[":
            body, i = _class(pattern, i)
            atom(body)
            repeatable = True
        elif char == ".":
            atom("[^\\x0a]")
            i += 1
            repeatable = True
        elif char == "(":
            if pattern.startswith("(?:", i):
                i += 3
            elif pattern.startswith("(?", i):
                raise _Untranslatable
            else:
                i += 1
            out.append("(?:")  # no captures: only whether it is found is read
            frames.append([3, 0])
            repeatable = False
        elif char == ")":
            if len(frames) == 1:
                raise _Untranslatable
            out.append(")")
            inner = frames.pop()
            frames[-1][0] += inner[0] + 1
            frames[-1][1] += inner[1]
            i += 1
            repeatable = False  # see the module's docstring: a group is not repeated
        elif char == "|":
            out.append("|")
            frames[-1][0] += 1
            i += 1
            repeatable = False
        elif char == "^":
            atom("^")
            i += 1
            repeatable = False
        elif char == "$":
            if i != n - 1 or len(frames) != 1:
                raise _Untranslatable
            atom("\\x0a?\\z")
            i += 1
            repeatable = False
        elif char in "*+?{":
            if not repeatable:
                raise _Untranslatable
            times = 1
            if char == "{":
                close = pattern.find("}", i)
                if close == -1:
                    raise _Untranslatable
                counts = pattern[i + 1 : close].split(",")
                if not 1 <= len(counts) <= 2 or not all(
                    c.isascii() and c.isdigit() for c in counts[1:] if c
                ):
                    raise _Untranslatable
                if not (counts[0].isascii() and counts[0].isdigit()):
                    raise _Untranslatable
                numbers = [int(c) for c in counts if c]
                if max(numbers) > MAX_REPEAT or numbers != sorted(numbers):
                    raise _Untranslatable
                times = max(*numbers, 1)
                out.append(pattern[i : close + 1])
                i = close + 1
            else:
                out.append(char)
                i += 1
            if pattern[i : i + 1] == "?":  # lazy: the same outputs are found
                out.append("?")
                i += 1
            frame = frames[-1]
            frame[0] += last * (times - 1)
            frame[1] += times - 1
            if frame[0] > MAX_SIZE or frame[1] > MAX_ITEMS:
                raise _Untranslatable
            repeatable = False
        else:  # ] and } outside a class and a repeat
            raise _Untranslatable
    if len(frames) != 1 or frames[0][0] > MAX_SIZE or frames[0][1] > MAX_ITEMS:
        raise _Untranslatable
    return "".join(out)


def compile_linear(pattern: str) -> Contains | None:
    """``contains(text) -> bool`` that answers ``regex.search(pattern, text) is
    not None`` (V0, no flags) with RE2, or None when RE2 cannot: the pattern is
    outside the grammar, RE2 is not installed, or the program is too large.
    ``contains`` raises ``UnicodeEncodeError`` for a text holding a lone
    surrogate; callers check :data:`MAX_TEXT` themselves. Not cached here:
    ``re2.compile`` keeps its last 100 patterns, and a pattern's DFA may hold
    up to :data:`MAX_MEM`, so a check's pattern lives as long as its check.

    A whole pattern ``^(?!R)`` ("the output does not start with R": with ``.``
    not crossing a newline, ``^(?!.*TODO)`` is "no TODO on the first line") is
    found exactly when ``R`` matches at no start but the text's, so RE2 answers
    it as the negation of ``^(?:R)``; ``^(?=R)`` as ``^(?:R)`` itself."""
    if re2 is None or not hasattr(re2, "FallbackPattern"):
        return None
    lookahead = pattern[:4] in ("^(?!", "^(?=") and pattern.endswith(")")
    # R's translation has balanced groups, so the last ) closes the lookahead.
    translated = translate(pattern[4:-1] if lookahead else pattern)
    if translated is None:
        return None
    try:
        compiled = re2.compile(f"^(?:{translated})" if lookahead else translated, 0, MAX_MEM)
    except re2.error:
        return None
    if not isinstance(compiled, re2.Pattern):  # pyre2 fell back to `re`
        return None
    contains: Contains = compiled.contains
    if lookahead and pattern[3] == "!":
        return lambda text: not contains(text)
    return contains
