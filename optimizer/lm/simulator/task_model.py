"""The simulated task model: a reply composed from the task input and the rules
it finds in the system prompt.

It never sees expected answers or verifier specs — only the chat messages.

Determinism: whether a rule is followed for a task is decided by comparing the
rule's strength with a stable uniform number drawn from (seed, rule kind, rule
phrase, task text). Keying the draw on the rule rather than on the whole prompt
means that sharpening one rule flips only that rule's outcomes — from "ignored"
to "followed", never the other way — and adding a rule leaves the others alone,
so a better prompt scores better instead of merely scoring differently. The one
exception is a rule at full strength (0.97): a task whose draw is above it gets
a second draw keyed on the whole prompt, so that no task is one the model can
never be taught a rule, while even a perfect prompt is still missed now and
then (and may be missed again after an unrelated edit). The wording of the reply (opener, filler, order) is drawn from (seed, whole prompt,
task), so every (prompt, task, seed) gives exactly one reply.

A re-asked task (docs/verifier-semantics.md "The verify loop": ``task + "\\n\\nFeedback: " + verdict``)
is read as the task plus feedback the model tries hard (0.75) to act on.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from .feedback import parse_feedback
from .rules import MAX_STRENGTH, Rule, parse_rules
from .text import content_words, digest, fraction, split_pair

MAX_TASK_SCAN = 200_000  # characters of the task searched for trigger words
MAX_ECHO_SOURCE = 2_000
MAX_ECHO = 220
INLINE_FEEDBACK_STRENGTH = 0.75
ECHO_PROBABILITY = 0.85

OPENERS = [
    "Thank you for your message.",
    "Thanks for getting in touch.",
    "I understand your request.",
    "Thanks for reaching out.",
    "I have read your message carefully.",
]
CLOSINGS = [
    "Let me know if there is anything else I can help with.",
    "I hope this helps.",
    "Please reply if you have further questions.",
    "Kind regards.",
]
FILLER = [
    "I have reviewed the details you provided.",
    "Here is what I can tell you at this point.",
    "Our team looks at every case individually.",
    "We want to make sure this is handled properly.",
    "I appreciate your patience while we look into this.",
    "The next step depends on a few details of your situation.",
    "We usually handle requests like this within a few business days.",
    "You will receive a confirmation once everything is settled.",
    "If anything changes on your side, just let us know.",
    "I have noted all of this in your file.",
    "Our goal is to resolve this as quickly as possible.",
    "Thank you again for explaining the situation so clearly.",
]
INCLUDE_TEMPLATES = ["{p}.", "Please note: {p}.", "To be clear: {p}.", "I can confirm: {p}."]
TEXT_KEYS = re.compile(
    r"reply|response|answer|message|summary|text|body|content|explanation|reason|notes?|comment|description",
    re.I,
)


def split_inline_feedback(user: str) -> tuple[str, str]:
    task, sep, feedback = user.rpartition("\n\nFeedback: ")
    return (task, feedback) if sep else (user, "")


def _inline_rules(feedback: str) -> list[Rule]:
    rules: list[Rule] = []
    for ask in parse_feedback(feedback):
        if ask.kind == "include" and ask.phrases:
            rules.append(
                Rule(kind="include", phrase=ask.phrases[0], strength=INLINE_FEEDBACK_STRENGTH)
            )
        elif ask.kind == "avoid":
            rules.extend(
                Rule(kind="avoid", phrase=p, strength=INLINE_FEEDBACK_STRENGTH) for p in ask.phrases
            )
        elif ask.kind in ("json", "keys"):
            rules.append(
                Rule(
                    kind="json",
                    keys=ask.phrases if ask.kind == "keys" else (),
                    strength=INLINE_FEEDBACK_STRENGTH,
                )
            )
        elif ask.kind.startswith(("max_", "min_")):
            rules.append(Rule(kind=ask.kind, number=ask.number, strength=INLINE_FEEDBACK_STRENGTH))
    return rules


def _first_sentence(task: str) -> str:
    text = " ".join(task[:MAX_ECHO_SOURCE].split())
    sentences = re.split(r"(?<=[.!?])\s", text, maxsplit=2)
    sentence = " ".join(sentences[:2])
    if len(sentence) > MAX_ECHO:
        sentence = sentence[:MAX_ECHO].rsplit(" ", 1)[0] + " …"
    return sentence.rstrip(".!?")


class _Decider:
    def __init__(self, seed: int, task_key: str, prompt_key: str) -> None:
        self.seed, self.task_key, self.prompt_key = seed, task_key, prompt_key

    def follows(self, strength: float, *key: object) -> bool:
        if fraction(self.seed, self.task_key, *key) < strength:
            return True
        # A rule at full strength is still missed now and then, but that miss is
        # drawn per prompt: were it fixed per task, the few tasks drawn above
        # MAX_STRENGTH could never be taught the rule, whatever the prompt said.
        return strength >= MAX_STRENGTH - 1e-9 and (
            fraction(self.seed, self.task_key, self.prompt_key, *key) < strength
        )


def _resolve_phrases(rules: list[Rule]) -> tuple[list[Rule], list[Rule]]:
    """Active include and avoid rules, one per phrase: a conditional rule beats an
    unconditional one; otherwise the stronger wins."""
    best: dict[str, Rule] = {}
    for rule in rules:
        if rule.kind not in ("include", "avoid"):
            continue
        key = rule.phrase.lower()
        current = best.get(key)
        if current is None or (bool(rule.triggers), rule.strength) > (
            bool(current.triggers),
            current.strength,
        ):
            best[key] = rule
    includes = [r for r in best.values() if r.kind == "include"]
    avoids = [r for r in best.values() if r.kind == "avoid"]
    return includes, avoids


def _scrub(text: str, avoided: list[str]) -> str:
    for phrase in avoided:
        text = re.sub(re.escape(phrase), "that", text, flags=re.I)
    return text


def _scrub_value(value: Any, avoided: list[str]) -> Any:
    if isinstance(value, str):
        return _scrub(value, avoided)
    if isinstance(value, dict):
        return {k: _scrub_value(v, avoided) for k, v in value.items()}
    return value


def _limit_length(segments: list[tuple[int, str]], limit: int, words: bool) -> str:
    """Drop the least important segments, then cut, until the reply fits."""

    def size(parts: list[tuple[int, str]]) -> int:
        text = " ".join(s for _, s in parts)
        return len(text.split()) if words else len(text)

    parts = list(segments)
    while len(parts) > 1 and size(parts) > limit:
        worst = max(range(len(parts)), key=lambda i: (parts[i][0], i))
        parts.pop(worst)
    text = " ".join(s for _, s in parts)
    if words:
        return " ".join(text.split()[: max(1, limit)])
    if len(text) > limit:
        text = text[: max(1, limit - 1)].rsplit(" ", 1)[0]
    return text


def simulate_reply(system: str, user: str, seed: int = 0) -> str:
    """The simulated model's reply to one (system prompt, user message)."""
    task, inline_feedback = split_inline_feedback(user)
    rules = parse_rules(system)
    if inline_feedback:
        rules += _inline_rules(inline_feedback)
    task_lower = task[:MAX_TASK_SCAN].lower()
    rules = [r for r in rules if r.applies_to(task_lower)]
    decide = _Decider(seed, digest(user), digest(system))
    rng = random.Random(f"{seed}|{digest(system)}|{decide.task_key}")

    include_rules, avoid_rules = _resolve_phrases(rules)
    # unconditional first: for one JSON key, a triggered (conditional) member is written last and wins
    include_rules.sort(key=lambda r: bool(r.triggers))
    includes = [
        r.phrase for r in include_rules if decide.follows(r.strength, "include", r.phrase.lower())
    ]
    avoided = [
        r.phrase for r in avoid_rules if decide.follows(r.strength, "avoid", r.phrase.lower())
    ]
    # a phrase the model decided to include is not scrubbed by a weaker avoid rule
    avoided = [p for p in avoided if p.lower() not in {i.lower() for i in includes}]

    limits: dict[str, int] = {}
    for rule in rules:
        if rule.kind.startswith(("max_", "min_")) and decide.follows(
            rule.strength, rule.kind, rule.number
        ):
            if rule.kind not in limits:
                limits[rule.kind] = rule.number
            elif rule.kind.startswith("max_"):
                limits[rule.kind] = min(limits[rule.kind], rule.number)
            else:
                limits[rule.kind] = max(limits[rule.kind], rule.number)

    json_rules = [r for r in rules if r.kind == "json"]
    if json_rules:
        return _json_reply(json_rules, includes, avoided, limits, task, decide, rng)
    return _prose_reply(includes, avoided, limits, task, rng)


def _prose_reply(includes, avoided, limits, task, rng) -> str:
    segments: list[tuple[int, str]] = [(1, rng.choice(OPENERS))]
    segments += [(0, rng.choice(INCLUDE_TEMPLATES).format(p=p)) for p in includes]
    echo = _first_sentence(task)
    if echo and rng.random() < ECHO_PROBABILITY:
        segments.append((2, f"You wrote: “{echo}”."))
    segments += [(4, s) for s in rng.sample(FILLER, rng.randint(2, 6))]
    segments.append((3, rng.choice(CLOSINGS)))
    segments = [(priority, _scrub(text, avoided)) for priority, text in segments]

    if "min_chars" in limits or "min_words" in limits:
        extra = [s for s in FILLER if s not in {t for _, t in segments}] + FILLER
        i = 0

        def short() -> bool:
            text = " ".join(t for _, t in segments)
            return (
                len(text) < limits.get("min_chars", 0) * 1.05
                or len(text.split()) < limits.get("min_words", 0) * 1.05
            )

        while short() and i < 2000:
            segments.insert(len(segments) - 1, (4, extra[i % len(extra)]))
            i += 1
    text = " ".join(t for _, t in segments)
    if "max_chars" in limits:
        segments = [(0, _limit_length(segments, limits["max_chars"], words=False))]
        text = segments[0][1]
    if "max_words" in limits:
        text = _limit_length(segments, limits["max_words"], words=True)
    return text


def _default_value(key: str, task: str, rng: random.Random) -> str:
    if TEXT_KEYS.search(key):
        echo = _first_sentence(task)
        return f"Reply regarding: {echo}" if echo else "Reply to the request."
    words = content_words(task[:MAX_ECHO_SOURCE])
    return rng.choice(words[:8]) if words else "unknown"


def _json_reply(json_rules, includes, avoided, limits, task, decide, rng) -> str:
    strength = max(r.strength for r in json_rules)
    keys = list(dict.fromkeys(k for r in json_rules for k in r.keys))
    obj: dict[str, Any] = {}
    for key in keys:
        if decide.follows(min(0.97, strength + 0.1), "key", key.lower()):
            obj[key] = _default_value(key, task, rng)
    free: list[str] = []
    for phrase in includes:
        pair = split_pair(phrase)
        if pair:
            obj[pair[0]] = pair[1]
        else:
            free.append(phrase)
    if free:
        target = next((k for k in obj if TEXT_KEYS.search(k)), "notes")
        previous = obj.get(target)
        obj[target] = "; ".join(
            ([previous] if isinstance(previous, str) and target != "notes" else []) + free
        )
    if not obj:
        obj = {"response": _default_value("response", task, rng)}
    obj = _scrub_value(obj, avoided)

    limit = limits.get("max_chars")
    while limit and len(json.dumps(obj, ensure_ascii=False)) > limit:
        longest = max(obj, key=lambda k: len(str(obj[k])))
        value = str(obj[longest])
        if len(value) <= 8:
            break
        obj[longest] = value[: len(value) // 2]
    if decide.follows(strength, "json-valid"):
        return json.dumps(obj, ensure_ascii=False)
    return (
        "Here is the requested information:\n```json\n"
        + json.dumps(obj, ensure_ascii=False, indent=2)
        + "\n```"
    )
