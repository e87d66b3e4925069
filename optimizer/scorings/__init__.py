"""Re-scoring a run: a new, named scoring of its stored val outputs with other
verifier specs, with no model call (docs/guide.md "Re-scoring a run").

Nothing measured is overwritten: the run's Evaluation and Candidate rows (the
"original" scoring) are only read. A Scoring row is made when asked for
(`scoring_create`), a worker fills it (`scoring_execute`, one pass over the
outputs, progress written about once a second) and writes one
ScoringCandidate per candidate plus the summary the page shows, in one
transaction at the end.

Each output is scored exactly as the run scored it: one compiled scorer (the
specs, with the run's aggregator and thresholds), the run's frozen task rows
(their expectations and row verifiers), the candidate's system prompt. With the
run's own specs a re-scoring gives back every stored score.

An output stored cut for size is scored as stored and flagged (`cut_tasks`); an
evaluation with no stored output (the task model failed, or an external
client sent none) cannot be scored again: it keeps its original score and is
counted (`kept`).

Modules: `services` (ask for a scoring: check the specs, refuse what cannot be
re-scored, queue it), `execute` (the worker's pass over the outputs and the
results it writes), `reads` (a scoring as the API, the pages and the export
show it).
"""
