"""The demo provider: an offline, deterministic simulator of a task model and of a
reflection model that turns verifier feedback into prompt rules."""

from __future__ import annotations

import json
import random
import time

import pytest

from optimizer.lm import (
    DEMO_LABEL,
    LMConfig,
    build_candidate_proposer,
    build_lm,
    build_reflection_lm,
    check_endpoint,
)
from optimizer.lm.simulator.feedback import parse_feedback
from optimizer.lm.simulator.rules import parse_rules

DEMO = {"provider": "demo", "model": "demo"}

TOPICS = [
    "my order arrived damaged and the box was crushed",
    "I was charged twice for the same subscription",
    "the app crashes every time I open the settings page",
    "I want to change the delivery address of my parcel",
    "the heating in my flat stopped working last night",
    "my password reset email never arrives",
    "the invoice shows the wrong company name",
    "I cannot find the warranty card for my kettle",
    "the courier left the package at the wrong house",
    "my booking confirmation has the wrong dates",
]


def synthetic_tasks(count: int) -> list[str]:
    rng = random.Random(7)
    return [
        f"Hello, {rng.choice(TOPICS)}. Case {i}: {rng.choice(TOPICS)}. Please help."
        for i in range(count)
    ]


def ask(lm, system: str, user: str) -> str:
    return lm.complete(
        [{"role": "system", "content": system}, {"role": "user", "content": user}]
    ).text


def rate(lm, system: str, tasks: list[str], predicate) -> float:
    return sum(1 for task in tasks if predicate(ask(lm, system, task))) / len(tasks)


# ---------------------------------------------------------------- identity


def test_it_is_labelled_as_a_simulator_everywhere():
    lm = build_lm(DEMO)
    assert lm.is_simulator is True
    assert lm.label == DEMO_LABEL == "demo simulator (offline, not a real model)"
    assert build_reflection_lm(DEMO).label == DEMO_LABEL
    assert build_candidate_proposer(DEMO).label == DEMO_LABEL
    assert LMConfig(**DEMO).label == DEMO_LABEL
    assert check_endpoint(DEMO) is None


def test_it_reports_approximate_usage_and_latency():
    response = build_lm(DEMO).complete(
        [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi there"}]
    )
    assert response.tokens_in > 0 and response.tokens_out > 0
    assert response.latency_ms >= 0 and response.attempts == 1 and response.model == "demo"


def test_the_simulated_latency_is_configurable():
    lm = build_lm({**DEMO, "simulated_latency_ms": 50})
    started = time.perf_counter()
    lm.complete([{"role": "user", "content": "Hi"}])
    assert time.perf_counter() - started >= 0.045


# ---------------------------------------------------------------- determinism


def test_the_same_prompt_task_and_seed_give_the_same_reply():
    system = 'Always mention "refund". Never say "voucher".'
    for task in synthetic_tasks(10):
        assert ask(build_lm(DEMO), system, task) == ask(build_lm(DEMO), system, task)


def test_another_seed_gives_other_replies():
    system = 'Mention "refund".'
    tasks = synthetic_tasks(10)
    a = [ask(build_lm({**DEMO, "seed": 1}), system, t) for t in tasks]
    b = [ask(build_lm({**DEMO, "seed": 2}), system, t) for t in tasks]
    assert a != b


# ---------------------------------------------------------------- rule following


def test_explicit_quoted_rules_are_followed_far_more_often_than_no_rule():
    lm, tasks = build_lm(DEMO), synthetic_tasks(60)
    has_phrase = lambda text: "tracking number" in text.lower()  # noqa: E731
    without = rate(lm, "You are a helpful support assistant.", tasks, has_phrase)
    plain = rate(
        lm, 'You are a helpful support assistant. Mention "tracking number".', tasks, has_phrase
    )
    explicit = rate(
        lm,
        'You are a helpful support assistant. IMPORTANT: You MUST ALWAYS include the exact phrase "tracking number".',
        tasks,
        has_phrase,
    )
    assert without == 0
    assert 0.3 <= plain <= 0.7
    assert explicit >= 0.85


def test_an_avoid_rule_keeps_a_tempting_phrase_out_of_the_reply():
    lm = build_lm(DEMO)
    tasks = [
        f"Could you send me a gift card for case {i}? The last one expired." for i in range(60)
    ]
    has_phrase = lambda text: "gift card" in text.lower()  # noqa: E731
    without = rate(
        lm, "You are a helpful assistant.", tasks, has_phrase
    )  # the reply echoes the request
    with_rule = rate(
        lm, 'You are a helpful assistant. You must never write "gift card".', tasks, has_phrase
    )
    assert without >= 0.6
    assert with_rule <= 0.35


def test_a_json_rule_yields_valid_json_with_the_named_keys_most_of_the_time():
    lm, tasks = build_lm(DEMO), synthetic_tasks(60)
    system = 'You must always reply with only a valid JSON object with the keys "urgency", "sentiment" and "summary".'

    def good(text: str) -> bool:
        try:
            value = json.loads(text)
        except ValueError:
            return False
        return isinstance(value, dict) and {"urgency", "sentiment", "summary"} <= set(value)

    assert rate(lm, system, tasks, good) >= 0.7
    assert rate(lm, "Answer the customer.", tasks, good) == 0


def test_a_json_member_rule_writes_that_member():
    lm = build_lm(DEMO)
    system = 'IMPORTANT: You MUST ALWAYS reply with only a valid JSON object with the keys "urgency". You MUST ALWAYS include "urgency": "high".'
    replies = [ask(lm, system, t) for t in synthetic_tasks(30)]
    assert sum('"urgency": "high"' in r for r in replies) >= 25


def test_a_length_limit_is_respected_when_followed():
    lm, tasks = build_lm(DEMO), synthetic_tasks(40)
    assert rate(lm, "Be helpful.", tasks, lambda t: len(t) <= 150) == 0
    assert (
        rate(
            lm,
            "IMPORTANT: The reply MUST ALWAYS stay under 150 characters.",
            tasks,
            lambda t: len(t) <= 150,
        )
        >= 0.85
    )


def test_a_conditional_rule_applies_only_when_its_trigger_words_appear():
    lm = build_lm(DEMO)
    system = 'IMPORTANT: When the request mentions "flood" or "leak", you MUST ALWAYS include the exact phrase "emergency crew".'
    flooded = [f"There is a flood in room {i}." for i in range(30)]
    dry = [f"The light in room {i} flickers." for i in range(30)]
    assert rate(lm, system, flooded, lambda t: "emergency crew" in t) >= 0.85
    assert rate(lm, system, dry, lambda t: "emergency crew" in t) == 0


def test_a_stronger_rule_never_turns_a_followed_case_into_an_ignored_one():
    lm, tasks = build_lm(DEMO), synthetic_tasks(40)
    weak = [("refund" in ask(lm, 'Mention "refund".', t)) for t in tasks]
    strong = [
        ("refund" in ask(lm, 'You must always include the exact phrase "refund".', t))
        for t in tasks
    ]
    assert all(s for w, s in zip(weak, strong) if w)


def test_verify_loop_feedback_in_the_user_message_is_acted_on():
    lm, tasks = build_lm(DEMO), synthetic_tasks(40)
    retried = [f'{t}\n\nFeedback: rejected: output does not contain "case number"' for t in tasks]
    assert rate(lm, "Be helpful.", retried, lambda t: "case number" in t) >= 0.6


def test_it_answers_a_one_megabyte_input_with_a_bounded_reply():
    lm = build_lm(DEMO)
    huge = ("flood " + "x" * 994 + ". ") * 1000
    text = ask(
        lm, 'When the request mentions "flood", mention "pump".\n' * 50 + "z" * 500_000, huge
    )
    assert len(text) < 5_000  # how long it takes is a figure of bench/suite_timings.py


def test_it_reads_the_rule_grammar():
    rules = {
        (r.kind, r.phrase, r.triggers)
        for r in parse_rules(
            'Always mention "refund" but never say "gift card".\n'
            'When the request mentions "flood" or "leak", include "urgency": "high".\n'
            'Do not forget to mention "order number".\n'
            "Keep the reply under 800 characters."
        )
    }
    assert ("include", "refund", ()) in rules
    assert ("avoid", "gift card", ()) in rules
    assert ("include", '"urgency": "high"', ("flood", "leak")) in rules
    assert ("include", "order number", ()) in rules
    assert ("max_chars", "", ()) in rules


# ---------------------------------------------------------------- feedback and reflection


def test_it_reads_the_scoring_engines_reasons():
    feedback = (
        'refund/expectations: the answer should offer a refund (expected one of: "refund", "money back"); '
        'do not push a gift card (found: "gift card")\n'
        'refund/no-voucher: output must not contain "voucher"\n'
        "triage/json: output is not valid JSON (Expecting value: line 1 column 1 (char 0))\n"
        'triage/keys: missing required keys: "urgency", "sentiment" (output is not valid JSON)\n'
        "triage/short: output is too long: 812 characters, must be at most 500\n"
        'triage/id: output does not match pattern "T-\\\\d+"'
    )
    kinds = {(a.kind, a.phrases, a.number) for a in parse_feedback(feedback)}
    assert ("include", ("refund", "money back"), 0) in kinds
    assert ("avoid", ("gift card",), 0) in kinds
    assert ("avoid", ("voucher",), 0) in kinds
    assert ("json", (), 0) in kinds
    assert ("keys", ("urgency", "sentiment"), 0) in kinds
    assert ("max_chars", (), 500) in kinds
    assert not any(a.kind == "include" and "T-" in a.phrases[0] for a in parse_feedback(feedback))


def test_words_a_message_quotes_before_expected_or_found_are_not_asked_for():
    """A mustMention message may quote words ('set "urgency" to "medium"'); the
    phrase to write is the one after "expected:", and to avoid the one after
    "found:". Asking for the message's words made the simulator write "urgency"
    alone, and avoid it, scrubbing the very key it had to write."""
    feedback = (
        'triage/labels: set "urgency" to "medium": no heat for days '
        '(expected one of: "\\"urgency\\": \\"medium\\"", "\\"urgency\\":\\"medium\\""); '
        'do not set "urgency" to "low" (found: "\\"urgency\\": \\"low\\"")'
    )
    asks = [(a.kind, a.phrases) for a in parse_feedback(feedback)]
    assert asks == [
        ("include", ('"urgency": "medium"', '"urgency":"medium"')),
        ("avoid", ('"urgency": "low"',)),
    ]


def test_the_first_reason_after_the_adapters_score_lead_in_is_read_too():
    from optimizer.runs.adapter import feedback_with_score

    reasons = 'qa-format/short: output is too long: 381 characters, must be at most 60\nrow/contains: output does not contain "<b>4</b>"'
    feedback = feedback_with_score({"feedback": reasons, "score": 0.0, "verdict": "fail"})
    assert feedback.startswith("Score 0.00 (fail). qa-format/short")
    kinds = [(a.kind, a.phrases, a.number) for a in parse_feedback(feedback)]
    assert kinds == [("max_chars", (), 60), ("include", ("<b>4</b>",), 0)]


def record(task: str, output: str, feedback: str) -> dict:
    return {"Inputs": {"input": task}, "Generated Outputs": output, "Feedback": feedback}


def test_the_proposer_adds_rules_that_quote_what_the_feedback_asks_for():
    proposer = build_candidate_proposer(DEMO)
    dataset = {
        "system_prompt": [
            record(
                "My toaster broke, I want my money.",
                "Thanks.",
                'offer a refund (expected one of: "refund", "money back")',
            ),
            record(
                "My kettle broke, I want my money.",
                "Thanks.",
                'offer a refund (expected: "refund")',
            ),
        ]
    }
    new = proposer(
        {"system_prompt": "Be helpful.", "other": "untouched"}, dataset, ["system_prompt"]
    )
    assert set(new) == {"system_prompt"}
    assert new["system_prompt"].startswith("Be helpful.")
    assert 'Always mention "refund".' in new["system_prompt"]
    assert '"refund"' in proposer.last_reasoning


def test_a_task_specific_expectation_becomes_a_conditional_rule():
    proposer = build_candidate_proposer(DEMO)
    dataset = {
        "p": [
            record(
                "Water is flooding the basement after the storm.",
                "Noted.",
                'set urgency (expected: "urgency: high")',
            ),
            record("Please update the billing address on my account.", "Noted.", ""),
        ]
    }
    text = proposer({"p": "Triage the request."}, dataset, ["p"])["p"]
    rule = next(r for r in parse_rules(text) if r.phrase == "urgency: high")
    assert rule.triggers and all(
        t in "water is flooding the basement after the storm." for t in rule.triggers
    )
    lm = build_lm(DEMO)
    assert "urgency: high" not in ask(lm, text, "Please update the billing address on my account.")


def test_feedback_on_an_existing_rule_sharpens_it_in_place():
    proposer = build_candidate_proposer(DEMO)
    dataset = {"p": [record("Where is my parcel?", "Hi.", 'output does not contain "tracking"')]}
    first = proposer({"p": "Help."}, dataset, ["p"])["p"]
    second = proposer({"p": first}, dataset, ["p"])["p"]
    third = proposer({"p": second}, dataset, ["p"])["p"]
    strengths = [
        next(r for r in parse_rules(t) if r.phrase == "tracking").strength
        for t in (first, second, third)
    ]
    assert strengths[0] < strengths[1] < strengths[2]
    assert third.count("tracking") == 1  # rewritten, not piled up


def test_asked_again_about_the_same_prompt_and_feedback_it_proposes_something_sharper():
    """gepa keeps the parent when a proposal does not help, and with one train task
    the minibatch (so the feedback) is the same every iteration: a proposer that
    answered the same again would never get past the rejected proposal."""
    proposer = build_candidate_proposer(DEMO)
    dataset = {"p": [record("Where is my parcel?", "Hi.", 'output does not contain "tracking"')]}
    first = proposer({"p": "Help."}, dataset, ["p"])["p"]
    again = proposer({"p": "Help."}, dataset, ["p"])["p"]
    strength = {
        text: next(r for r in parse_rules(text) if r.phrase == "tracking").strength
        for text in (first, again)
    }
    assert strength[again] > strength[first]
    assert "last proposal was not kept" in proposer.last_reasoning
    # With parallel proposals a round's proposals are asked together: none was rejected yet.
    parallel = build_candidate_proposer(DEMO, remember=False)
    assert parallel({"p": "Help."}, dataset, ["p"])["p"] == first
    assert parallel({"p": "Help."}, dataset, ["p"])["p"] == first


def test_no_task_is_one_a_full_strength_rule_can_never_reach():
    """Whether a rule is followed is drawn per (task, rule); a rule at full
    strength (0.97) must still reach a task whose draw is above 0.97 under some
    wording of the prompt, or that task is unteachable whatever the prompt says."""
    lm, tasks = build_lm(DEMO), synthetic_tasks(300)
    rule = 'IMPORTANT: You MUST ALWAYS include the exact phrase "refund".'
    prompts = [f"{rule}\n{rule}\n{rule}\n{opener}" for opener in ("Help.", "Be kind.", "Be brief.")]
    assert parse_rules(prompts[0])[0].strength == pytest.approx(0.97)
    never = [t for t in tasks if not any("refund" in ask(lm, p, t) for p in prompts)]
    assert never == []


def test_a_users_own_sentence_is_never_rewritten():
    proposer = build_candidate_proposer(DEMO)
    seed = 'You work for Acme; please mention "tracking" when you can.'
    dataset = {"p": [record("Where is my parcel?", "Hi.", 'output does not contain "tracking"')]}
    new = proposer({"p": seed}, dataset, ["p"])["p"]
    assert new.startswith(seed)
    assert next(r for r in parse_rules(new) if r.phrase == "tracking").strength > 0.5


def test_no_feedback_leaves_the_prompt_unchanged():
    proposer = build_candidate_proposer(DEMO)
    assert proposer({"p": "Help."}, {"p": []}, ["p"]) == {"p": "Help."}


def test_the_reflection_lm_understands_gepas_default_prompt_and_replies_in_its_format():
    from gepa.strategies.instruction_proposal import InstructionProposalSignature as Sig

    seed = "Answer the customer.\n```\nexample block inside the prompt\n```"
    dataset = [
        record(
            "My order is late.",
            "```json\n{}\n```",
            'the reply should apologise (expected: "sorry")',
        ),
        record(
            "My order is late again.",
            "Hello.",
            'the reply should apologise (expected: "sorry"); do not blame the courier (found: "courier")',
        ),
    ]
    prompt = Sig.prompt_renderer(
        {"current_instruction_doc": seed, "dataset_with_feedback": dataset, "prompt_template": None}
    )
    reflection_lm = build_reflection_lm(DEMO)
    reply = reflection_lm(prompt)
    new = Sig.output_extractor(reply)["new_instruction"]
    assert new.startswith("Answer the customer.\n```\nexample block inside the prompt\n```")
    assert 'Always mention "sorry".' in new and 'Never mention "courier".' in new
    assert "sorry" in reflection_lm.last_reasoning
    # the task-model side of the demo provider answers a reflection prompt the same way
    assert build_lm(DEMO).complete([{"role": "user", "content": prompt}]).text == reply


# ---------------------------------------------------------------- end to end


def stand_in_score(output: str, expectations: dict) -> tuple[float, str]:
    """A tiny mustMention / mustNotMention scorer with engine-style reasons."""
    lower, misses, total = output.lower(), [], 0
    for entry in expectations.get("mustMention", []):
        total += 1
        if not any(p.lower() in lower for p in entry["anyOf"]):
            quoted = ", ".join(json.dumps(p) for p in entry["anyOf"])
            misses.append(f"{entry['message']} (expected one of: {quoted})")
    for entry in expectations.get("mustNotMention", []):
        total += 1
        found = [p for p in entry["anyOf"] if p.lower() in lower]
        if found:
            misses.append(f"{entry['message']} (found: {', '.join(json.dumps(p) for p in found)})")
    return (total - len(misses)) / total if total else 1.0, "; ".join(misses)


def library_tasks() -> list[dict]:
    """Ten synthetic tasks: one expectation for all, some for a few, one trap phrase."""
    rows = [
        ("My book is overdue by three weeks, what happens now?", ["late fee"]),
        ("The novel I borrowed is overdue and I am travelling.", ["late fee"]),
        ("I lost the library book somewhere on the train.", ["replacement cost"]),
        ("My dog chewed the book and now it is lost for good.", ["replacement cost"]),
        ("Can I reserve the new thriller everyone talks about?", ["waiting list"]),
        ("Is there a queue to reserve the cookbook?", ["waiting list"]),
        ("What are your opening hours on Sunday? My password is hunter2.", []),
        ("How do I renew my membership card online? Password: swordfish.", []),
        ("Can children borrow audiobooks? I forgot my password again.", []),
        ("Do you have study rooms available for groups?", []),
    ]
    tasks = []
    for text, specific in rows:
        must = [
            {
                "anyOf": ["member number", "membership number"],
                "message": "ask for the member number",
            }
        ]
        must += [{"anyOf": [p], "message": f"explain the {p}"} for p in specific]
        must_not = [{"anyOf": ["password"], "message": "never repeat a password"}]
        tasks.append(
            {"input": text, "expectations": {"mustMention": must, "mustNotMention": must_not}}
        )
    return tasks


def evaluate(lm, prompt: str, tasks: list[dict]) -> list[tuple[str, float, str]]:
    results = []
    for task in tasks:
        output = ask(lm, prompt, task["input"])
        score, feedback = stand_in_score(output, task["expectations"])
        results.append((output, score, feedback))
    return results


def run_reflection_rounds(
    scorer, tasks, rounds=20, minibatch=3, seed=0, prompt="You are a helpful library assistant."
):
    """A GEPA-shaped loop: minibatch, reflect, accept only if the minibatch improves."""
    lm, proposer = build_lm({**DEMO, "seed": seed}), build_candidate_proposer(DEMO)
    rng = random.Random(seed)
    mean = lambda p: sum(s for _, s, _ in scorer(lm, p, tasks)) / len(tasks)  # noqa: E731
    start = mean(prompt)
    for _ in range(rounds):
        batch = rng.sample(tasks, minibatch)
        before = scorer(lm, prompt, batch)
        dataset = [record(t["input"], out, fb) for t, (out, _, fb) in zip(batch, before) if fb]
        if not dataset:
            continue
        new = proposer({"system_prompt": prompt}, {"system_prompt": dataset}, ["system_prompt"])[
            "system_prompt"
        ]
        after = scorer(lm, new, batch)
        if sum(s for _, s, _ in after) > sum(s for _, s, _ in before):
            prompt = new
    return start, mean(prompt), prompt


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reflection_on_feedback_raises_the_mean_score_substantially(seed):
    start, end, prompt = run_reflection_rounds(evaluate, library_tasks(), seed=seed)
    assert start < 0.5, start
    assert end > 0.8, (end, prompt)


def test_a_gepa_run_with_the_demo_proposer_improves_the_score():
    import gepa
    from gepa.core.adapter import EvaluationBatch

    tasks = library_tasks()
    lm = build_lm(DEMO)

    class Adapter:
        propose_new_texts = None

        def evaluate(self, batch, candidate, capture_traces=False):
            results = evaluate(lm, candidate["system_prompt"], batch)
            trajectories = [
                {"input": t["input"], "output": out, "feedback": fb}
                for t, (out, _, fb) in zip(batch, results)
            ]
            return EvaluationBatch(
                outputs=[out for out, _, _ in results],
                scores=[s for _, s, _ in results],
                trajectories=trajectories if capture_traces else None,
            )

        def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
            rows = [record(t["input"], t["output"], t["feedback"]) for t in eval_batch.trajectories]
            return dict.fromkeys(components_to_update, rows)

    class QuietLogger:
        def log(self, message):
            pass

    result = gepa.optimize(
        seed_candidate={"system_prompt": "You are a helpful library assistant."},
        trainset=tasks,
        valset=tasks,
        adapter=Adapter(),
        custom_candidate_proposer=build_candidate_proposer(DEMO),
        max_metric_calls=400,
        logger=QuietLogger(),
        seed=0,
    )
    assert result.val_aggregate_scores[0] < 0.5
    assert max(result.val_aggregate_scores) > 0.8


def test_reflection_improves_a_triage_task_set_scored_by_the_real_engine():
    engine = pytest.importorskip("verifiers_app.engine")
    scorer = engine.compile_specs(
        [
            {
                "id": "triage",
                "name": "Triage",
                "kind": "native",
                "checks": [
                    {"id": "labels", "type": "task_expectations", "weight": 4, "params": {}},
                    {"id": "json", "type": "json_valid", "weight": 2, "params": {}},
                    {
                        "id": "keys",
                        "type": "json_keys",
                        "params": {"requiredKeys": ["urgency", "sentiment", "summary"]},
                    },
                    {"id": "short", "type": "max_length", "params": {"value": 400}},
                ],
            }
        ]
    )
    rows = [
        ("Smoke is coming out of the electrical panel in the hallway.", "high"),
        ("There is a strong smell of gas near the boiler room.", "high"),
        ("Water is pouring through the ceiling of the server room.", "high"),
        ("The elevator is stuck between floors with people inside.", "high"),
        ("A light bulb in the car park needs replacing.", "low"),
        ("Could someone repaint the scuffed wall in meeting room B?", "low"),
        ("The coffee machine on floor two makes a strange noise.", "low"),
        ("Please order more paper towels for the kitchen.", "low"),
        ("One of the office chairs squeaks when I lean back.", "low"),
        ("The vending machine ate my coins again, no big deal.", "low"),
    ]
    tasks = [
        {
            "task_id": f"t{i}",
            "input": text,
            "metadata": {
                "expectations": {
                    "mustMention": [
                        {
                            "anyOf": [f'"urgency": "{level}"'],
                            "message": f"this request is {level} urgency",
                        }
                    ],
                    "mustNotMention": [
                        {"anyOf": ["lawsuit"], "message": "never threaten legal action"}
                    ],
                }
            },
        }
        for i, (text, level) in enumerate(rows)
    ]

    def engine_scores(lm, prompt, batch):
        results = []
        for task in batch:
            output = ask(lm, prompt, task["input"])
            result = scorer.score(output, task=task)
            results.append((output, result.score, result.feedback))
        return results

    start, end, prompt = run_reflection_rounds(
        engine_scores, tasks, rounds=25, prompt="Triage the facility request."
    )
    assert start < 0.5, start
    assert end > 0.8, (end, prompt)
