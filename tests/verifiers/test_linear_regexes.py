"""RE2 for user regexes (verifiers_app/engine/linear_regexes.py): a pattern goes
to RE2 only when RE2 finds it in exactly the outputs the ``regex`` package
(V0, what a regex check means) finds it in; everything else keeps the timed
``regex`` search.

The differential tests generate patterns and texts where the engines' defaults
differ (Unicode digits, spaces and letters, newlines, a final newline before
``$``, case, astral characters) and require both engines to agree on every pair.
"""

from __future__ import annotations

import random
import string

import pytest
import regex

from verifiers_app.engine import Scorer, compile_specs, linear_regexes, regexes

re2 = pytest.importorskip("re2")

# Characters where RE2's and Python's defaults differ, and plain ones.
TEXT_CHARS = [
    *"aAbBzZ019_-. \n\t\r\f\v",
    "é",
    "É",
    "ß",
    "ſ",
    "K",  # non-ASCII letters, Kelvin sign
    "٣",
    "५",
    "１",
    "𝟗",  # non-ASCII decimal digits (Arabic-Indic, Devanagari, fullwidth, math)
    "\u00a0",
    "\u2003",
    "\u3000",
    "\x85",
    "\x1c",
    "\u2028",  # Unicode and odd ASCII whitespace
    "²",
    "½",
    "Ⅷ",  # digits that are not decimal
    "中",
    "😀",
    "\u0301",  # CJK, astral, combining accent
    '"',
    ":",
    "{",
    "}",
    "[",
    "]",
    "\\",
    "^",
    "$",
    "|",
]
ATOMS = [
    "a",
    "b",
    "A",
    "1",
    "_",
    " ",
    "é",
    "٣",
    "中",
    "😀",
    "-",
    ":",
    '"',
    r"\d",
    r"\D",
    r"\s",
    r"\S",
    r"\w",
    r"\W",
    ".",
    r"\.",
    r"\-",
    r"\n",
    r"\t",
    r"\ ",
    r"\x41",
    r"\u00e9",
    r"\$",
    r"\^",
    r"\\",
    r"\[",
    r"\{",
]
CLASS_ITEMS = [
    "a",
    "b",
    "A",
    "z",
    "0",
    "9",
    "_",
    " ",
    "é",
    "٣",
    ".",
    "$",
    "^",
    "|",
    r"\d",
    r"\s",
    r"\w",
    r"\n",
    r"\]",
    r"\\",
    r"\-",
    r"\x41",
    "a-z",
    "0-9",
    "A-Z",
    "à-ÿ",
    r"\x00-\x1f",
]
QUANTIFIERS = ["*", "+", "?", "*?", "+?", "??", "{2}", "{0,2}", "{1,}", "{2,3}?", "{0}"]


def _class(rng: random.Random) -> str:
    items = "".join(rng.choice(CLASS_ITEMS) for _ in range(rng.randint(1, 4)))
    return f"[{'^' if rng.random() < 0.3 else ''}{items}]"


def _sequence(rng: random.Random, depth: int) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.55:
            part = rng.choice(ATOMS)
        elif roll < 0.75:
            part = _class(rng)
        elif roll < 0.9 and depth < 3:
            inner = "|".join(_sequence(rng, depth + 1) for _ in range(rng.randint(1, 3)))
            part = f"({'?:' if rng.random() < 0.5 else ''}{inner})"
        else:
            part = rng.choice(["a", r"\d", "."])
        if rng.random() < 0.35:
            part += rng.choice(QUANTIFIERS)
        parts.append(part)
    return "".join(parts)


def _pattern(rng: random.Random) -> str:
    body = "|".join(_sequence(rng, 0) for _ in range(rng.randint(1, 2)))
    if rng.random() < 0.25:
        body = "^" + body
    if rng.random() < 0.3:
        body += "$"
    if rng.random() < 0.2:  # the whole pattern a lookahead at the start: ^(?!R), ^(?=R)
        body = f"^(?{rng.choice('!=')}{body})"
    return body


def _text(rng: random.Random) -> str:
    text = "".join(rng.choice(TEXT_CHARS) for _ in range(rng.randint(0, 12)))
    if rng.random() < 0.2:
        text += "\n"
    return text


def _agree(pattern: str, texts: list[str]) -> int:
    contains = linear_regexes.compile_linear(pattern)
    if contains is None:
        return 0
    python = regex.compile(pattern, regex.V0)
    for text in texts:
        expected = python.search(text) is not None
        assert contains(text) is expected, (pattern, linear_regexes.translate(pattern), text)
    return 1


def test_re2_finds_a_generated_pattern_in_the_same_texts_as_the_regex_package() -> None:
    """3,000 generated patterns × 60 texts each (plus texts built from the
    pattern's own characters, so that matches are common): every pattern RE2
    is given agrees with ``regex`` V0 on every text."""
    rng = random.Random(7)
    translated = 0
    for _ in range(3000):
        pattern = _pattern(rng)
        try:
            regex.compile(pattern, regex.V0)
        except regex.error:
            continue
        texts = [_text(rng) for _ in range(50)]
        # Texts made of the pattern's literal characters and near them.
        own = [c for c in pattern if c not in "\\()[]{}|*+?^$"]
        texts += [
            "".join(rng.choice(own or ["a"]) for _ in range(rng.randint(1, 8))) for _ in range(10)
        ]
        translated += _agree(pattern, texts)
    assert translated > 1500  # most generated patterns are in the grammar: the test tests


@pytest.mark.parametrize("escape", ["d", "D", "s", "S", "w", "W"])
def test_a_class_escape_matches_the_same_code_points_in_both_engines(escape: str) -> None:
    """``\\d``, ``\\s``, ``\\w`` and their complements over every code point
    (surrogates aside): the same maximal runs in RE2 and in ``regex``."""
    every = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    pattern = f"\\{escape}+"
    translated = linear_regexes.translate(pattern)
    assert translated is not None
    python = [m.span() for m in regex.finditer(pattern, every, flags=regex.V0)]
    ours = [m.span() for m in re2.compile(translated).finditer(every)]
    assert ours == python


@pytest.mark.parametrize("char", sorted(string.punctuation + " "))
def test_an_escaped_punctuation_character_is_that_character_in_both_engines(char: str) -> None:
    contains = linear_regexes.compile_linear(f"\\{char}")
    assert contains is not None
    for text in [char, f"a{char}b", "a", "", "\\"]:
        assert contains(text) is (regex.search(f"\\{char}", text, flags=regex.V0) is not None)


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        ("a$", "xa\n", True),  # $ before a final newline
        ("a$", "xa\n\n", False),
        ("a$", "a\nb", False),
        ("^b", "a\nb", False),  # ^ is the start of the text only
        ("a.b", "a\nb", False),
        ("a[^x]b", "a\nb", True),
        (r"a\Db", "a\nb", True),
        (r"\d", "٣", True),
        (r"\d", "²", False),
        (r"\s", "\x1c", False),  # regex's \s is Unicode White_Space (re's is str.isspace)
        (r"\s", "\x85", True),
        (r"\s", "\u200b", False),
        (r"\w", "ſ", True),
        ("k", "\u212a", False),  # the Kelvin sign: no case folding without IGNORECASE
        ("k", "K", False),
        (r'"urgency":\s*"(high|medium|low)"', '{"urgency":\u3000"low"}', True),
        (r"^(?!.*TODO)", "fine\nTODO", True),  # . stops at the newline
        (r"^(?!.*TODO)", "a TODO", False),
        (r"^(?!.*TODO)", "", True),
        (r"^(?=\d)", "٣x", True),
    ],
)
def test_re2_agrees_with_the_regex_package_where_their_defaults_differ(
    pattern: str, text: str, found: bool
) -> None:
    contains = linear_regexes.compile_linear(pattern)
    assert contains is not None
    assert (regex.search(pattern, text, flags=regex.V0) is not None) is found
    assert contains(text) is found


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?!.*TODO)",  # lookahead not at the start
        r"a(?=b)",
        r"^(?!a)|b",  # the lookahead is not the whole pattern
        r"^(?!a)(b)",
        r"^(?<!a)",  # lookbehind
        r"(a)\1",  # backreference
        r"\bword\b",  # RE2's \b is ASCII
        r"(?i)abc",  # inline flags
        r"a$b",  # $ not at the end
        r"(a$)",
        r"a{,3}",  # a repeat RE2 spells otherwise
        r"a{1001}",
        r"a++",  # possessive
        r"[[:alpha:]]",  # nested set
        r"[a--b]",  # set operation
        r"[]a]",
        r"[a-",  # a class cut off after its dash (the regex package refuses it too)
        r"a}",
        r"\p{L}",
        r"\Z",
        "a" * (linear_regexes.MAX_PATTERN + 1),
        r"(a|aa)+$",  # a repeated group
        r"(?:ab)*",
        r"\w\W\w",  # too big a program
        "a?" * 101,  # too many items
    ],
)
def test_a_pattern_outside_the_grammar_keeps_the_regex_package(pattern: str) -> None:
    assert linear_regexes.compile_linear(pattern) is None


def _regex_check(pattern: str) -> Scorer:
    return compile_specs(
        {"id": "v", "checks": [{"id": "r", "type": "regex", "params": {"pattern": pattern}}]}
    )


def test_a_regex_check_with_a_translatable_pattern_runs_no_timed_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The point of RE2 here: no ``regex`` search, so no CPU-clock reads."""

    def timed(*args: object) -> None:
        raise AssertionError("the timed regex search ran")

    monkeypatch.setattr(regexes, "search", timed)
    scorer = _regex_check(r'"urgency":\s*"(high|medium|low)"')
    assert scorer.score('{"urgency": "high"}').score == 1.0
    result = scorer.score('{"urgency": "none"}')
    assert result.feedback == (
        'v/r: output does not match pattern "\\"urgency\\":\\\\s*\\"(high|medium|low)\\""'
    )


def test_a_check_for_no_todo_on_the_first_line_runs_no_timed_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``^(?!.*TODO)``, a whole-pattern lookahead at the start, goes to RE2 too
    (as the negation of ``^(?:.*TODO)``)."""

    def timed(*args: object) -> None:
        raise AssertionError("the timed regex search ran")

    monkeypatch.setattr(regexes, "search", timed)
    scorer = _regex_check(r"^(?!.*TODO)")
    assert scorer.score("done\nTODO later").score == 1.0
    assert scorer.score("TODO: call").feedback == 'v/r: output does not match pattern "^(?!.*TODO)"'


@pytest.mark.parametrize(
    "output",
    [
        '{"urgency": "high"} \ud800',  # a lone surrogate: not UTF-8
        '{"urgency": "high"}' + " " * linear_regexes.MAX_TEXT,  # longer than RE2 is given
    ],
)
def test_an_output_re2_is_not_given_is_searched_by_the_regex_package(output: str) -> None:
    scorer = _regex_check(r'"urgency":\s*"(high|medium|low)"')
    assert scorer.score(output).score == 1.0
    assert scorer.score(output.replace("high", "none")).score == 0.0


def test_a_translatable_pattern_after_the_regex_budget_is_spent_is_not_run() -> None:
    """The per-output regex budget still holds for checks RE2 would run."""
    scorer = compile_specs(
        {
            "id": "v",
            "checks": [
                *[
                    {"id": f"slow{i}", "type": "regex", "params": {"pattern": "(a|aa)+$"}}
                    for i in range(5)
                ],
                {"id": "fast", "type": "regex", "params": {"pattern": "a"}},
            ],
        }
    )
    check = scorer.score("a" * 40 + "b").verifiers[0].checks[-1]
    assert check.score == 0.0
    assert "not run" in (check.reason or "")


def test_reading_the_unicode_classes_holds_no_string_per_code_point() -> None:
    """The classes are read once per process by searching every code point; a
    str object for each of the 1.1 million made the traced peak 98 MB (a worker's
    RSS rose ~70 MB for ~70 ms as it read them). Now ~16 MB."""
    import tracemalloc

    tracemalloc.start()
    try:
        classes = linear_regexes._unicode_classes.__wrapped__()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert classes == linear_regexes._unicode_classes()
    assert peak < 30_000_000
