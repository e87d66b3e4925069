"""What the simulated reflection can never learn on a run, and the score that leaves.

The simulated reflection only learns what the verifiers' feedback on the train
tasks spells out: quoted phrases to write or avoid, JSON and its keys, length
limits (``feedback.py``). Whatever else a verifier checks — a regex, an exact
answer, a row verifier's gold value, a phrase only val tasks ask for — no
simulated run can learn, however long it runs; a real reflection model is not
limited this way.

``simulator_limits`` measures that from a run's own specs and tasks: it reads
the feedback every train task gives an empty reply (what a reflection could
ever be told), writes for each val task the best reply built from it alone
(every learnable phrase that task asks for, in JSON with the learnable keys when
JSON is asked for, long enough), and scores those replies with the run's real
scorer. Their mean is the run's ceiling; the checks they still miss are what
the simulator cannot learn. An upper bound: the simulated task model still
misses a rule now and then, and a phrase learnt as a conditional rule may not
reach every val task that wants it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verifiers_app.engine import ROW_VERIFIER_ID, Scorer, SpecError

from .feedback import Ask, parse_feedback
from .rules import parse_rules
from .text import quote, quote_list, split_pair

MAX_ROWS = 300  # tasks read per split: the page stays fast on a 10,000-task set
MAX_LISTED = 4  # phrases (and checks) named; more phrases are counted
FILLER = "Thank you for your message, we will look into it."
_FEEDBACK_LINE = re.compile(r"^(?P<where>[^:\n]{1,200}): (?P<reason>.*)$")


@dataclass(frozen=True)
class SimulatorLimits:
    """``ceiling``: the mean val score of the best replies built from the train
    feedback; ``cannot_learn``: what those replies still miss, as short phrases
    (most val tasks first); ``val_tasks``: how many val tasks were read."""

    ceiling: float
    cannot_learn: list[str] = field(default_factory=list)
    val_tasks: int = 0


@dataclass
class _Learnable:
    phrases: dict[str, str] = field(default_factory=dict)  # lower → as written
    json: bool = False
    keys: dict[str, str] = field(default_factory=dict)
    min_chars: int = 0
    min_words: int = 0

    def learn(self, asks: Sequence[Ask]) -> None:
        for ask in asks:
            if ask.kind == "include":
                for phrase in ask.phrases:
                    self.phrases.setdefault(phrase.lower(), phrase)
            elif ask.kind in ("json", "keys"):
                self.json = True
                for key in ask.phrases if ask.kind == "keys" else ():
                    self.keys.setdefault(key.lower(), key)
            elif ask.kind == "min_chars":
                self.min_chars = max(self.min_chars, ask.number)
            elif ask.kind == "min_words":
                self.min_words = max(self.min_words, ask.number)


def _seed_knowledge(seed_components: Mapping[str, str], learnable: _Learnable) -> None:
    """Rules the seed prompt already states count as known."""
    for text in seed_components.values():
        for rule in parse_rules(str(text)):
            if rule.kind == "include" and rule.phrase:
                learnable.phrases.setdefault(rule.phrase.lower(), rule.phrase)
            elif rule.kind == "json":
                learnable.json = True
                for key in rule.keys:
                    learnable.keys.setdefault(key.lower(), key)


def _best_reply(asks: Sequence[Ask], known: _Learnable) -> str:
    """The best reply to a val task that uses only what is known."""
    phrases: list[str] = []
    for ask in asks:
        if ask.kind == "include":
            written = next(
                (known.phrases[p.lower()] for p in ask.phrases if p.lower() in known.phrases), None
            )
            if written is not None and written not in phrases:
                phrases.append(written)
    wants_json = known.json and any(a.kind in ("json", "keys") for a in asks)
    if wants_json:
        obj: dict[str, Any] = {}
        for ask in asks:
            if ask.kind == "keys":
                for key in ask.phrases:
                    if key.lower() in known.keys:
                        obj[known.keys[key.lower()]] = "…"
        free: list[str] = []
        for phrase in phrases:
            pair = split_pair(phrase)
            if pair:
                obj[pair[0]] = pair[1]
            else:
                free.append(phrase)
        obj["notes"] = "; ".join(free) if free else FILLER
        while (
            len(json.dumps(obj)) < known.min_chars or len(json.dumps(obj).split()) < known.min_words
        ):
            obj["notes"] = f"{obj['notes']} {FILLER}"
        return json.dumps(obj, ensure_ascii=False)
    text = " ".join(f"{p}." for p in phrases) or FILLER
    while len(text) < known.min_chars or len(text.split()) < known.min_words:
        text = f"{text} {FILLER}"
    return text


def _misses(feedback: str) -> tuple[list[str], list[str]]:
    """(phrases the task asks for that nothing taught, other checks missed) of a
    best reply's feedback, one reason per line."""
    phrases: list[str] = []
    checks: list[str] = []
    for line in feedback.splitlines():
        match = _FEEDBACK_LINE.match(line.strip())
        if match is None:
            continue
        where, reason = match.group("where"), match.group("reason")
        if where.startswith(f"{ROW_VERIFIER_ID}/"):
            where = f"the tasks' own {where.partition('/')[2]} verifiers"
        if re.search(r"\bdoes not (?:exactly )?equal\b", reason):
            checks.append(f"exact answers ({where})")
            continue
        wanted = [a.phrases[0] for a in parse_feedback(reason) if a.kind == "include" and a.phrases]
        if wanted:
            phrases.extend(wanted)
        elif "pattern" in reason:
            checks.append(f"patterns ({where}: its feedback quotes a regex, not words to write)")
        else:
            checks.append(f"{where} (its feedback names nothing to write)")
    return phrases, checks


def _listed(names: dict[str, int], limit: int) -> tuple[list[str], int]:
    ranked = sorted(names, key=lambda name: -names[name])
    return ranked[:limit], max(0, len(ranked) - limit)


def simulator_limits(
    scorer: Scorer,
    train_rows: Sequence[Mapping[str, Any]],
    val_rows: Sequence[Mapping[str, Any]],
    seed_components: Mapping[str, str] | None = None,
) -> SimulatorLimits | None:
    """The ceiling of a simulated run, or None without val tasks (or with tasks
    the scorer cannot read: the run itself will say why)."""
    val_rows = list(val_rows)[:MAX_ROWS]
    if not val_rows:
        return None
    known = _Learnable()
    _seed_knowledge(seed_components or {}, known)
    total = 0.0
    phrases: dict[str, int] = {}
    checks: dict[str, int] = {}
    try:
        for row in list(train_rows)[:MAX_ROWS]:
            known.learn(parse_feedback(scorer.score("", task=dict(row)).feedback))
        for row in val_rows:
            task = dict(row)
            asks = parse_feedback(scorer.score("", task=task).feedback)
            result = scorer.score(_best_reply(asks, known), task=task)
            total += result.score
            missed_phrases, missed_checks = _misses(result.feedback)
            for phrase in dict.fromkeys(missed_phrases):
                phrases[phrase] = phrases.get(phrase, 0) + 1
            for check in dict.fromkeys(missed_checks):
                checks[check] = checks.get(check, 0) + 1
    except SpecError:
        return None
    cannot_learn: list[str] = []
    if phrases:
        shown, more = _listed(phrases, MAX_LISTED)
        named = ", ".join(quote(p) for p in shown) + f" and {more} more" if more else None
        cannot_learn.append(f"phrases only val tasks ask for ({named or quote_list(shown, 'and')})")
    cannot_learn.extend(_listed(checks, MAX_LISTED)[0])
    return SimulatorLimits(
        ceiling=total / len(val_rows), cannot_learn=cannot_learn, val_tasks=len(val_rows)
    )
