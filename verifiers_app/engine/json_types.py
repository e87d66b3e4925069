"""The one name for a parsed JSON object (a spec, a check's params, a task row,
a run event's payload): keys are strings, values are whatever JSON holds."""

from __future__ import annotations

from typing import Any

JSONObject = dict[str, Any]
