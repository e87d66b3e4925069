"""DSPy's GEPA optimizer, watched live in Frontier.

    pip install dspy ./clients/python
    python examples/external/track_dspy_gepa.py --url http://127.0.0.1:8000 --token ft_…

dspy.GEPA passes `gepa_kwargs` straight to `gepa.optimize` (dspy 3.4.1,
dspy/teleprompt/gepa/gepa.py), so the tracker and its stopper go there:

    dspy.GEPA(metric=..., reflection_lm=..., max_metric_calls=...,
              gepa_kwargs={"callbacks": [tracker], "stop_callbacks": [tracker.stopper]})

The models here are DSPy's scripted DummyLM so the example runs offline (the
task model answers from a fixed table, the reflection model always proposes
the same rewrite, which gepa then rejects); use your own `dspy.LM(...)`s.
Prints a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import dspy
from dspy.utils.dummies import DummyLM

from frontier_tracker import FrontierTracker

QUESTIONS = {
    "What is the capital of France?": "Paris",
    "What is 2 + 2?": "4",
    "What colour is a clear daytime sky?": "blue",
    "How many legs has a spider?": "8",
}
# The task model's fixed answers: right on two questions, wrong on the others.
ANSWERS = {
    "What is the capital of France?": {"answer": "Paris"},
    "What is 2 + 2?": {"answer": "5"},
    "What colour is a clear daytime sky?": {"answer": "blue"},
    "How many legs has a spider?": {"answer": "six"},
}


def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
    """GEPA's feedback metric: a score and the reason for it."""
    right = pred.answer.strip().lower() == gold.answer.lower()
    feedback = "Correct." if right else f"Expected {gold.answer!r}, got {pred.answer!r}."
    return dspy.Prediction(score=1.0 if right else 0.0, feedback=feedback)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--name", default="DSPy GEPA example")
    parser.add_argument("--budget", type=int, default=24, help="max metric calls")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    examples = [
        dspy.Example(question=q, answer=a).with_inputs("question") for q, a in QUESTIONS.items()
    ]
    dspy.configure(lm=DummyLM(ANSWERS))
    reflection = DummyLM(
        {"": {"new_instruction": "Answer with one word or number, and check it."}},
        adapter=dspy.JSONAdapter(),
    )
    # DSPy examples are objects, not dicts: name each task by its question.
    tracker = FrontierTracker(
        args.url, args.token, name=args.name, valset=examples, task_key=lambda ex: ex.question
    )

    optimizer = dspy.GEPA(
        metric=metric,
        reflection_lm=reflection,
        max_metric_calls=args.budget,
        reflection_minibatch_size=2,
        num_threads=1,
        gepa_kwargs={"callbacks": [tracker], "stop_callbacks": [tracker.stopper]},
    )
    program = optimizer.compile(
        dspy.Predict("question -> answer"), trainset=examples, valset=examples
    )
    delivered = tracker.close()
    print(
        json.dumps(
            {
                "run_id": tracker.run_id,
                "delivered": delivered,
                "dropped": tracker.dropped,
                "instructions": program.signature.instructions,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
