import pytest
from hypothesis import given
from hypothesis import strategies as st

from optimizer import textdiff
from optimizer.textdiff import (
    ADDED,
    REMOVED,
    SAME,
    LineageNode,
    sentence_origins,
    split_sentences,
    word_diff,
)


@pytest.fixture(autouse=True)
def _no_remembered_diffs():
    """Each test computes its diffs (some change the budget or the matcher)."""
    textdiff._cached_diff.cache_clear()
    yield
    textdiff._cached_diff.cache_clear()


def _side(ops, keep):
    return "".join(text for op, text in ops if op in (SAME, keep))


def test_it_marks_an_inserted_word_as_added_and_keeps_the_rest():
    ops = word_diff("Answer the customer.", "Answer the customer politely.")
    assert (ADDED, " politely") in ops
    assert not [t for op, t in ops if op == REMOVED]


def test_it_marks_a_replaced_word_as_removed_then_added_without_splitting_words():
    ops = word_diff("Always refund within 30 days.", "Always refund within 14 days.")
    # The space before a word travels with it.
    assert ops == [
        (SAME, "Always refund within"),
        (REMOVED, " 30"),
        (ADDED, " 14"),
        (SAME, " days."),
    ]


def test_a_changed_line_break_is_shown_with_the_word_it_precedes():
    ops = word_diff("Be brief.\nQuote the policy.", "Be brief. Quote the policy.")
    assert ops == [
        (SAME, "Be brief."),
        (REMOVED, "\nQuote"),
        (ADDED, " Quote"),
        (SAME, " the policy."),
    ]


def test_texts_too_long_for_a_word_diff_are_diffed_by_whole_lines():
    lines = [f"Rule {i}: always quote the policy number {i}." for i in range(2500)]
    old, new = "\n".join(lines), "\n".join([*lines[:1000], "Rule X: be brief.", *lines[1000:]])
    ops = word_diff(old, new)
    assert [(op, t) for op, t in ops if op != SAME] == [(ADDED, "Rule X: be brief.\n")]
    assert _side(ops, REMOVED) == old and _side(ops, ADDED) == new


@given(st.text(max_size=80), st.text(max_size=80))
def test_both_texts_can_be_rebuilt_from_any_diff(old, new):
    ops = word_diff(old, new)
    assert _side(ops, REMOVED) == old
    assert _side(ops, ADDED) == new


def test_it_splits_sentences_at_end_punctuation_and_line_breaks():
    assert split_sentences("Be brief. Quote the policy!\nUse JSON? yes") == [
        "Be brief.",
        "Quote the policy!",
        "Use JSON?",
        "yes",
    ]


def test_each_sentence_is_attributed_to_the_candidate_that_introduced_it():
    nodes = {
        0: LineageNode(0, (), {"system": "You are a support agent."}),
        1: LineageNode(1, (0,), {"system": "You are a support agent. Mention the 30-day window."}),
        2: LineageNode(
            2,
            (1,),
            {"system": "You are a support agent. Mention the 30-day window. Reply in JSON."},
        ),
    }
    assert sentence_origins(nodes, 2, "system") == [
        ("You are a support agent.", 0),
        ("Mention the 30-day window.", 1),
        ("Reply in JSON.", 2),
    ]


def test_a_merge_child_inherits_sentences_from_either_parent():
    nodes = {
        0: LineageNode(0, (), {"p": "Base."}),
        1: LineageNode(1, (0,), {"p": "Base. Left rule."}),
        2: LineageNode(2, (0,), {"p": "Base. Right rule."}),
        3: LineageNode(3, (1, 2), {"p": "Base. Left rule. Right rule."}),
    }
    assert dict(sentence_origins(nodes, 3, "p")) == {"Base.": 0, "Left rule.": 1, "Right rule.": 2}


def test_a_sentence_removed_and_later_reintroduced_belongs_to_the_later_candidate():
    nodes = {
        0: LineageNode(0, (), {"p": "Keep. Drop me."}),
        1: LineageNode(1, (0,), {"p": "Keep."}),
        2: LineageNode(2, (1,), {"p": "Keep. Drop me."}),
    }
    assert dict(sentence_origins(nodes, 2, "p")) == {"Keep.": 0, "Drop me.": 2}


def test_two_prompts_of_one_repeated_word_are_diffed_in_bounded_time():
    # SequenceMatcher's worst case: 12 KB of one word took 70 s (4 KB: 6.8 s).
    import time

    old, new = "x " + "word " * 2400, "word " * 2400 + "y"
    started = time.perf_counter()
    ops = word_diff(old, new)
    assert time.perf_counter() - started < 5  # ~1 ms now; generous for a loaded machine
    assert _side(ops, REMOVED) == old and _side(ops, ADDED) == new


def test_a_word_diff_over_the_work_budget_falls_back_to_whole_sentences(monkeypatch):

    monkeypatch.setattr(textdiff, "MAX_MATCH_WORK", 2)  # the words in between need 4 pair visits
    old = "Be brief. Quote the policy now. Answer in English."
    new = "Be brief. Cite the rule today. Answer in English."
    ops = word_diff(old, new)
    assert ops == [
        (SAME, "Be brief."),
        (REMOVED, " Quote the policy now."),
        (ADDED, " Cite the rule today."),
        (SAME, " Answer in English."),
    ]
    monkeypatch.setattr(textdiff, "MAX_MATCH_WORK", 0)
    textdiff._cached_diff.cache_clear()
    assert word_diff(old, new) == [(REMOVED, old), (ADDED, new)]


def _texts_to_diff():
    """The pairs the tests above diff, a hypothesis-style handful of edge
    cases, and big random prompts (~4,000 words, a Zipf-like vocabulary, ~5% of
    the words and ~30% of the sentences rewritten) as GEPA's reflections make."""
    import random

    pairs = [
        ("Answer the customer.", "Answer the customer politely."),
        ("Always refund within 30 days.", "Always refund within 14 days."),
        ("Be brief.\nQuote the policy.", "Be brief. Quote the policy."),
        ("Be brief. Quote the policy now. Answer in English.", "Be brief. Cite the rule today."),
        ("x " + "word " * 300, "word " * 300 + "y"),
        ("", "Only new."),
        ("Only old.", ""),
        ("a b a b a b a b", "b a b a b a b a"),
    ]
    rng = random.Random(31)
    vocab = [f"w{i}" for i in range(2000)]
    weights = [1 / (i + 1) for i in range(2000)]
    for _ in range(3):
        sentences = [
            " ".join(rng.choices(vocab, weights, k=rng.randint(6, 20))) + "." for _ in range(300)
        ]
        words = " ".join(sentences).split(" ")
        reworded = [w if rng.random() > 0.05 else rng.choice(vocab) for w in words]
        rewritten = [
            s if rng.random() > 0.3 else " ".join(rng.choices(vocab, weights, k=9)) + "."
            for s in sentences
        ]
        pairs += [(" ".join(words), " ".join(reworded)), (" ".join(sentences), " ".join(rewritten))]
    return pairs


def test_the_compiled_matcher_finds_the_same_opcodes_as_difflib():
    """cydifflib is difflib's algorithm compiled: on word tokens of the same
    texts both give the very same opcodes, so the compare view's diffs are
    those difflib gives."""
    import difflib

    import cydifflib

    from optimizer.textdiff import _TOKEN

    for old, new in _texts_to_diff():
        a, b = _TOKEN.findall(old), _TOKEN.findall(new)
        ours = cydifflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        theirs = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        assert [tuple(op) for op in ours] == [tuple(op) for op in theirs]


def test_word_diffs_are_the_same_as_with_difflibs_own_matcher(monkeypatch):
    import difflib

    pairs = _texts_to_diff()
    ours = [word_diff(old, new) for old, new in pairs]
    monkeypatch.setattr(textdiff, "SequenceMatcher", difflib.SequenceMatcher)
    textdiff._cached_diff.cache_clear()
    assert ours == [word_diff(old, new) for old, new in pairs]
    assert any(len(ops) > 200 for ops in ours)  # the big prompts are diffed word by word


def test_a_diff_asked_for_again_is_not_computed_again_and_cannot_be_changed_by_its_caller():
    """The compare page diffs the same prompts on every filter and page."""
    old, new = "Always refund within 30 days.", "Always refund within 14 days."
    first = word_diff(old, new)
    first.clear()  # a caller's change stays its own
    misses = textdiff._cached_diff.cache_info().misses
    assert word_diff(old, new) == [
        (SAME, "Always refund within"),
        (REMOVED, " 30"),
        (ADDED, " 14"),
        (SAME, " days."),
    ]
    assert textdiff._cached_diff.cache_info().misses == misses
