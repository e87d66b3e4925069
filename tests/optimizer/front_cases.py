"""Cases of the "on the front" rule, shared by the Python test and the browser
test of static/js/front.js: (name, {index: {task: score}}, expected members)."""

FRONT_CASES = [
    ("every candidate tied on every task: only the first", {0: {"a": 1.0, "b": 1.0}, 1: {"a": 1.0, "b": 1.0}, 2: {"a": 1.0, "b": 1.0}}, [0]),
    ("tied on one task but worse on another: dominated", {0: {"a": 1.0, "b": 0.5}, 1: {"a": 1.0, "b": 0.2}}, [0]),
    ("each leads a different task: both", {0: {"a": 1.0, "b": 0.0}, 1: {"a": 0.0, "b": 1.0}}, [0, 1]),
    ("non-dominated but leading no task: not on the front", {0: {"a": 1.0, "b": 0.0}, 1: {"a": 0.0, "b": 1.0}, 2: {"a": 0.6, "b": 0.6}}, [0, 1]),
    ("a later, better candidate pushes the seed off", {0: {"a": 0.4, "b": 0.4}, 1: {"a": 0.9, "b": 0.5}}, [1]),
    ("a difference below the third decimal is a tie", {0: {"a": 0.5001, "b": 0.3}, 1: {"a": 0.5004, "b": 0.3}}, [0]),
    ("a task one candidate was not scored on counts as lowest", {0: {"a": 0.5}, 1: {"a": 0.5, "b": 0.1}}, [1]),
    ("no candidates", {}, []),
]
