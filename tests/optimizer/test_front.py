import pytest

from optimizer.front import front_members
from tests.optimizer.front_cases import FRONT_CASES


@pytest.mark.parametrize(
    ("name", "scores", "expected"), FRONT_CASES, ids=[c[0] for c in FRONT_CASES]
)
def test_the_front_holds_only_non_dominated_task_leaders_with_ties_resolved_to_the_first(
    name, scores, expected
):
    assert front_members(scores) == expected
