"""The simulated reflection: verifier feedback in, a prompt with sharper rules out.

For each component to update it reads the reflective dataset's records
(``Inputs``, ``Generated Outputs``, ``Feedback`` and any ``Reviewer note …``,
read as one more line of feedback), turns every feedback text into
asks (see ``feedback.py``) and edits the prompt:

- an ask that no rule covers yet becomes a new rule (written at level 2, e.g.
  ``Always mention "refund".``);
- an ask that a rule already covers means the model ignored it: the rule is
  *sharpened* one level (``You must always include the exact phrase "refund".``,
  then ``IMPORTANT: You MUST ALWAYS …``), in place when the line is one this
  reflection wrote, otherwise as an extra line (the repetition counts too);
- task-specific asks become *conditional* rules. When, in the same minibatch,
  another example's output lacks the phrase and its feedback does not ask for
  it, the phrase is evidently not wanted everywhere, so the rule is keyed on
  salient words of the asking inputs (words that do not occur in the other
  inputs): ``When the request mentions "flooded", "basement" or "storm", …``.
  A later ask from an input that does not trigger the rule adds that input's
  salient words; a rule with many triggers and no counter-evidence is promoted
  to an unconditional one. An ask that contradicts an unconditional rule (avoid
  what it includes, or the reverse) also becomes a conditional rule, which the
  task model lets override the unconditional one.

At most ``MAX_CHANGES`` edits per proposal (the most-asked first), so a run
improves over several iterations instead of all at once. Everything is a pure
function of the current text and the records; nothing here knows any data set.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .feedback import Ask, parse_feedback
from .rules import (
    MAX_PROMPT_CHARS,
    MAX_TRIGGERS,
    Rule,
    bullet_of,
    parse_rules,
    render,
    rendered_strength,
)
from .text import content_words, quote, quote_list, split_pair

MAX_RECORDS = 50
MAX_FIELD_CHARS = 20_000
MAX_CHANGES = 4
TRIGGERS_PER_INPUT = 3
PROMOTE_AT = 9
NEW_RULE_LEVEL = 2
RULES_HEADING = "Rules:"


@dataclass(frozen=True)
class Record:
    input_text: str
    output_text: str
    feedback: str


def _flatten(value: Any, budget: int = MAX_FIELD_CHARS) -> str:
    """The text of a record field (a string, or a dict/list of them), bounded."""
    if isinstance(value, str):
        return value[:budget]
    if isinstance(value, Mapping):
        parts = [_flatten(v, budget) for v in list(value.values())[:50]]
    elif isinstance(value, (list, tuple)):
        parts = [_flatten(v, budget) for v in list(value)[:50]]
    elif value is None:
        return ""
    else:
        parts = [str(value)]
    return "\n".join(p for p in parts if p)[:budget]


# The heading a reviewer's note has in a record (optimizer/runs/adapter.py, note_heading).
REVIEWER_NOTE_PREFIX = "Reviewer note"


def _with_notes(item: Mapping[str, Any]) -> str:
    """The record's feedback, then each reviewer's note on it as one more line:
    the simulated reflection reads a note as it reads a verifier's reason."""
    feedback = _flatten(item.get("Feedback", item.get("feedback", "")))
    notes = [
        _flatten(value)
        for key, value in item.items()
        if isinstance(key, str) and key.startswith(REVIEWER_NOTE_PREFIX)
    ]
    return "\n".join([feedback, *notes])[:MAX_FIELD_CHARS] if notes else feedback


def records_from_dataset(items: Sequence[Mapping[str, Any]] | None) -> list[Record]:
    records: list[Record] = []
    for item in list(items or [])[:MAX_RECORDS]:
        if not isinstance(item, Mapping):
            continue
        records.append(
            Record(
                input_text=_flatten(item.get("Inputs", item.get("inputs", ""))),
                output_text=_flatten(item.get("Generated Outputs", item.get("outputs", ""))),
                feedback=_with_notes(item),
            )
        )
    return records


@dataclass
class _Change:
    weight: int  # how many examples asked for it
    order: int
    reason: str
    new_rule: Rule
    level: int
    old_rule: Rule | None = None  # rewrite this rule's line in place when we wrote it
    repeat: bool = False
    sentence: str = field(default="")


def _level_of(rule: Rule) -> int:
    level = 0
    for candidate in range(1, 5):
        if rendered_strength(rule, candidate) <= rule.strength + 1e-9:
            level = candidate
    return level


def _sharper_level(rule: Rule) -> int | None:
    for candidate in range(1, 5):
        if rendered_strength(rule, candidate) > rule.strength + 0.01:
            return candidate
    return None


class _Reflector:
    def __init__(self, current: str, records: list[Record]) -> None:
        self.current = current
        self.records = records
        self.rules = parse_rules(current)
        self.asks: list[list[Ask]] = [parse_feedback(r.feedback) for r in records]
        self.inputs = [r.input_text.lower() for r in records]
        self.outputs = [r.output_text.lower() for r in records]
        self.changes: list[_Change] = []
        self.notes: list[str] = []

    # ---------------------------------------------------------------- helpers
    def _salient(self, askers: list[int], others: list[int], exclude: set[str]) -> tuple[str, ...]:
        other_words: set[str] = set()
        for j in others:
            other_words.update(content_words(self.records[j].input_text))
        chosen: list[str] = []
        for i in askers:
            words = content_words(self.records[i].input_text)
            if any(t in self.inputs[i] for t in exclude | set(chosen)):
                continue  # this input already triggers the rule
            counts = Counter(words)
            first = {w: n for n, w in reversed(list(enumerate(words)))}
            pool = [w for w in counts if w not in other_words and w not in exclude] or [
                w for w in counts if w not in exclude
            ]
            pool.sort(key=lambda w: (-counts[w], first[w]))
            chosen.extend(w for w in pool[:TRIGGERS_PER_INPUT] if w not in chosen)
        return tuple(chosen)

    def _add(self, change: _Change) -> None:
        change.order = len(self.changes)
        self.changes.append(change)

    def _sharpen(self, rule: Rule, weight: int, reason: str) -> None:
        level = _sharper_level(rule)
        if level is not None:
            self._add(_Change(weight, 0, reason, rule, level, old_rule=rule))
        elif rule.strength < 0.97 - 1e-9:
            self._add(_Change(weight, 0, reason, rule, 3, repeat=True))

    def _phrase_groups(self, kind: str) -> dict[str, tuple[str, set[str], list[int]]]:
        groups: dict[str, tuple[str, set[str], list[int]]] = {}
        known = {r.phrase.lower(): r.phrase for r in self.rules if r.kind == kind}
        for i, asks in enumerate(self.asks):
            for ask in asks:
                if ask.kind != kind or not ask.phrases:
                    continue
                alternatives = [ask.phrases] if kind == "include" else [(p,) for p in ask.phrases]
                for alts in alternatives:
                    canon = next((known[a.lower()] for a in alts if a.lower() in known), alts[0])
                    _phrase, alt_set, askers = groups.setdefault(canon.lower(), (canon, set(), []))
                    alt_set.update(a.lower() for a in alts)
                    if i not in askers:
                        askers.append(i)
        return groups

    # ---------------------------------------------------------------- phrases
    def plan_phrases(self, kind: str) -> None:
        opposite = "avoid" if kind == "include" else "include"
        opposite_asked = {
            p.lower() for asks in self.asks for a in asks if a.kind == opposite for p in a.phrases
        }
        n = len(self.records)
        for key, (phrase, alts, askers) in self._phrase_groups(kind).items():
            if kind == "include":
                counter = [
                    j
                    for j in range(n)
                    if j not in askers and not any(a in self.outputs[j] for a in alts)
                ]
            else:
                counter = [
                    j
                    for j in range(n)
                    if j not in askers
                    and any(
                        a.kind == "include" and key in {p.lower() for p in a.phrases}
                        for a in self.asks[j]
                    )
                ]
            clash = any(
                r.kind == opposite and not r.triggers and r.phrase.lower() in alts
                for r in self.rules
            )
            clash = clash or key in opposite_asked
            pair = split_pair(phrase) if kind == "include" else None
            if pair:  # "urgency": "high" clashes with an unconditional "urgency": "low"
                clash = clash or any(
                    r.kind == "include"
                    and not r.triggers
                    and (other := split_pair(r.phrase))
                    and other[0] == pair[0]
                    and other[1].lower() != pair[1].lower()
                    for r in self.rules
                )
            existing = [r for r in self.rules if r.kind == kind and r.phrase.lower() in alts]
            unconditional = next((r for r in existing if not r.triggers), None)
            conditional = sorted((r for r in existing if r.triggers), key=lambda r: -r.strength)
            count = f"{len(askers)} of {n} example{'s' if n != 1 else ''}"
            verb = "lacked" if kind == "include" else "contained"
            if unconditional is not None and not (clash and not conditional):
                self._sharpen(
                    unconditional,
                    len(askers),
                    f"{count} still {verb} {quote(phrase)} despite the rule",
                )
                continue
            if conditional:
                rule = conditional[0]
                triggered = [i for i in askers if rule.applies_to(self.inputs[i])]
                others = [j for j in range(n) if j not in askers]
                extra = self._salient(
                    [i for i in askers if i not in triggered],
                    others,
                    {t.lower() for t in rule.triggers},
                )
                triggers = tuple(dict.fromkeys(rule.triggers + extra))[:MAX_TRIGGERS]
                level = max(_level_of(rule), NEW_RULE_LEVEL)
                if triggered and _sharper_level(rule) is not None:
                    level = max(level, _sharper_level(rule) or level)
                if len(triggers) >= PROMOTE_AT and not counter and not clash:
                    new = replace(rule, triggers=())
                    reason = f"{quote(phrase)} is asked for across many different requests: rule made unconditional"
                elif extra or level > _level_of(rule):
                    new = replace(rule, triggers=triggers)
                    reason = (
                        f"{count} {verb} {quote(phrase)}"
                        + (
                            f"; added trigger words {quote_list(list(extra), 'and')}"
                            if extra
                            else ""
                        )
                        + ("; rule sharpened" if triggered else "")
                    )
                else:
                    continue
                self._add(_Change(len(askers), 0, reason, new, level, old_rule=rule))
                continue
            if counter or clash:
                others = [j for j in range(n) if j not in askers]
                triggers = self._salient(askers, others, set())[:MAX_TRIGGERS]
                new = Rule(kind=kind, phrase=phrase, triggers=triggers)
                why = (
                    "other examples do not need it"
                    if kind == "include"
                    else "other examples ask for it"
                )
                reason = (
                    f"{count} {verb} {quote(phrase)} ({why}): added a rule for requests like these"
                )
            else:
                new = Rule(kind=kind, phrase=phrase)
                reason = f"{count} {verb} {quote(phrase)}: added a rule"
            self._add(_Change(len(askers), 0, reason, new, NEW_RULE_LEVEL))

    # ---------------------------------------------------------------- format
    def plan_json(self) -> None:
        bad = [i for i, asks in enumerate(self.asks) if any(a.kind == "json" for a in asks)]
        keyed = [i for i, asks in enumerate(self.asks) if any(a.kind == "keys" for a in asks)]
        keys = tuple(
            dict.fromkeys(
                k for asks in self.asks for a in asks if a.kind == "keys" for k in a.phrases
            )
        )
        if not bad and not keyed:
            return
        askers = sorted(set(bad) | set(keyed))
        existing = next((r for r in self.rules if r.kind == "json" and not r.triggers), None)
        n = len(self.records)
        if existing is None:
            reason = f"{len(askers)} of {n} examples were not the JSON asked for: added a JSON format rule"
            self._add(
                _Change(len(askers) + 1, 0, reason, Rule(kind="json", keys=keys), NEW_RULE_LEVEL)
            )
            return
        missing = [k for k in keys if k.lower() not in {e.lower() for e in existing.keys}]
        if missing:
            new = replace(existing, keys=existing.keys + tuple(missing))
            reason = (
                f"outputs lacked the keys {quote_list(missing, 'and')}: added them to the JSON rule"
            )
            level = max(_level_of(existing), NEW_RULE_LEVEL)
            self._add(_Change(len(askers) + 1, 0, reason, new, level, old_rule=existing))
        else:
            self._sharpen(
                existing,
                len(askers) + 1,
                f"{len(askers)} of {n} examples still broke the JSON rule",
            )

    def plan_lengths(self) -> None:
        n = len(self.records)
        for kind in ("max_chars", "max_words", "min_chars", "min_words"):
            numbers = [
                (i, a.number) for i, asks in enumerate(self.asks) for a in asks if a.kind == kind
            ]
            if not numbers:
                continue
            askers = sorted({i for i, _ in numbers})
            unit = "words" if kind.endswith("words") else "characters"
            if kind.startswith("max_"):
                limit = min(num for _, num in numbers)
                target = max(1, int(limit * 0.9))
                fits = lambda r, limit=limit: r.number <= limit  # noqa: E731
            else:
                limit = max(num for _, num in numbers)
                target = math.ceil(limit * 1.1)
                fits = lambda r, limit=limit: r.number >= limit  # noqa: E731
            existing = next((r for r in self.rules if r.kind == kind and not r.triggers), None)
            if existing is not None and fits(existing):
                self._sharpen(
                    existing,
                    len(askers),
                    f"{len(askers)} of {n} examples broke the {limit} {unit} limit",
                )
            elif existing is not None:
                reason = f"the limit is {limit} {unit}: rule tightened to {target}"
                level = max(_level_of(existing), NEW_RULE_LEVEL)
                self._add(
                    _Change(
                        len(askers),
                        0,
                        reason,
                        replace(existing, number=target),
                        level,
                        old_rule=existing,
                    )
                )
            else:
                reason = f"{len(askers)} of {n} examples broke the {limit} {unit} limit: added a length rule ({target})"
                self._add(
                    _Change(len(askers), 0, reason, Rule(kind=kind, number=target), NEW_RULE_LEVEL)
                )

    # ---------------------------------------------------------------- apply
    def propose(self) -> tuple[str, str]:
        if not self.records:
            return self.current, "No examples with feedback: prompt unchanged."
        self.plan_json()
        self.plan_phrases("include")
        self.plan_phrases("avoid")
        self.plan_lengths()
        for asks in self.asks:
            for ask in asks:
                if ask.kind == "note" and ask.text not in self.notes:
                    self.notes.append(ask.text)

        chosen = sorted(self.changes, key=lambda c: (-c.weight, c.order))[:MAX_CHANGES]
        lines = self.current.split("\n")
        edited: dict[int, str] = {}
        appended: list[str] = []
        for change in chosen:
            sentence = render(change.new_rule, change.level)
            if change.repeat:
                sentence = "Remember: " + sentence[0].lower() + sentence[1:]
            line_no = (
                self._own_line(change.old_rule, lines) if change.old_rule is not None else None
            )
            if line_no is not None and line_no not in edited:
                edited[line_no] = bullet_of(lines[line_no]) + sentence
            elif len(self.current) + sum(len(a) for a in appended) < MAX_PROMPT_CHARS:
                appended.append(sentence)
            change.sentence = sentence

        for line_no, text in edited.items():
            lines[line_no] = text
        text = "\n".join(lines)
        if appended:
            if RULES_HEADING not in [line.strip() for line in lines]:
                text = text.rstrip() + ("\n\n" if text.strip() else "") + RULES_HEADING
            text = text.rstrip("\n") + "\n" + "\n".join(f"- {s}" for s in appended)

        reasoning = [f"- {c.reason} → {c.sentence}" for c in chosen]
        if len(self.changes) > len(chosen):
            reasoning.append(
                f"- {len(self.changes) - len(chosen)} more change(s) left for later iterations."
            )
        if self.notes:
            shown = "; ".join(self.notes[:3])
            reasoning.append(f"- Feedback the simulator cannot act on: {shown}")
        if not chosen:
            reasoning.insert(
                0,
                "- No actionable feedback (nothing quoted to include or avoid, no format or length).",
            )
        header = f"Simulated reflection over {len(self.records)} example(s):"
        return text, "\n".join([header, *reasoning]).replace("```", "'''")

    @staticmethod
    def _own_line(rule: Rule, lines: list[str]) -> int | None:
        """The line holding only ``rule`` as this reflection writes it (else None:
        a user's sentence is never rewritten, the sharper rule is added instead)."""
        if rule.alone_line is None or rule.alone_line >= len(lines):
            return None
        line = lines[rule.alone_line]
        body = line[len(bullet_of(line)) :].strip()
        if body.startswith("Remember: "):
            return None
        renders = {render(rule, level) for level in range(1, 5)}
        return rule.alone_line if body in renders else None


def reflect(current: str, records: list[Record]) -> tuple[str, str]:
    """(new prompt text, short reasoning) for one component."""
    return _Reflector(current, records).propose()


# ------------------------------------------------------------ gepa's reflection prompt

_HEAD = "I provided an assistant with the following instructions to perform a task for me:\n```\n"
_MID = (
    "\n```\n\nThe following are examples of different task inputs provided to the assistant along with the "
    "assistant's response for each of them, and some feedback on how the assistant's response could be better:\n```\n"
)
_TAIL = "\n```\n\nYour task is to write a new instruction for the assistant."
_EXAMPLE = re.compile(r"^# Example \d+\s*$", re.M)
_SECTION = re.compile(r"^## (.+?)\s*$", re.M)
_SUBHEADER = re.compile(r"^#{3,6} .*$", re.M)


def looks_like_reflection_prompt(text: str) -> bool:
    return _HEAD[:60] in text[:2000]


def _records_from_markdown(side: str) -> list[Record]:
    records: list[Record] = []
    chunks = [c for c in _EXAMPLE.split(side) if c.strip()]
    for chunk in chunks[:MAX_RECORDS]:
        sections: dict[str, str] = {}
        parts = _SECTION.split(chunk)
        for name, body in zip(parts[1::2], parts[2::2]):
            sections[name.strip().lower()] = _SUBHEADER.sub("", body).strip()[:MAX_FIELD_CHARS]
        if not sections:
            continue
        records.append(
            Record(
                input_text=sections.get("inputs", ""),
                output_text=sections.get("generated outputs", ""),
                feedback=sections.get("feedback", ""),
            )
        )
    if not records and side.strip():
        records.append(Record(input_text="", output_text="", feedback=side[:MAX_FIELD_CHARS]))
    return records


def parse_reflection_prompt(prompt: str) -> tuple[str, list[Record]] | None:
    """(current instruction, records) from gepa's default reflection prompt; with
    a custom template, the first fenced block is taken as the instruction and the
    rest as feedback. None when nothing resembling an instruction is found."""
    head = prompt.find(_HEAD)
    mid = prompt.find(_MID, head + len(_HEAD)) if head >= 0 else -1
    tail = prompt.rfind(_TAIL)
    if head >= 0 and mid > head and tail > mid:
        instruction = prompt[head + len(_HEAD) : mid]
        return instruction, _records_from_markdown(prompt[mid + len(_MID) : tail])
    block = re.search(r"```[^\n]*\n(.*?)\n```", prompt, re.S)
    if block is None:
        return None
    return block.group(1), _records_from_markdown(prompt[block.end() :])


def reflection_reply(prompt: str) -> tuple[str, str]:
    """(reply in gepa's ``` format, reasoning) for a reflection prompt."""
    parsed = parse_reflection_prompt(prompt)
    if parsed is None:
        # Better no proposal (gepa skips the iteration) than a made-up instruction.
        raise ValueError(
            "the simulated reflection found no ``` block holding the current instruction"
        )
    instruction, records = parsed
    new_text, reasoning = reflect(instruction, records)
    return f"{reasoning}\n\n```\n{new_text}\n```", reasoning
