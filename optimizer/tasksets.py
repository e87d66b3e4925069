"""Task-set files → validated task rows (no database here; see taskset_services).

Formats: JSONL (one row object per line), YAML (a list of rows, or `{tasks:
[...]}`, rows as in seed 001) and CSV (one row per record, columns mapped to
fields by `CsvMapping`). A row is `{task_id, input | instruction, expected,
params, metadata, verifier, split}`; each is checked here and by the engine's
`validate_task` (row verifiers against the fn registry). Every problem names the
file, its line and the field: `tasks.jsonl line 7: invalid JSON (…)`. Parsing
never evaluates anything: JSON, `yaml.safe_*` and the csv module only.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from optimizer.models import Split
from verifiers_app.engine import SpecError, validate_task
from verifiers_app.storable import JsonTooDeep, parse_json, storage_problems

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_ROWS = 20_000
MAX_INPUT_CHARS = 100_000
MAX_PROBLEMS = 20
MAX_YAML_VALUES = 2_000_000
FORMATS = ("jsonl", "yaml", "csv")
ROW_FIELDS = ("task_id", "input", "instruction", "expected", "params", "metadata", "verifier", "split")
SPLITS = tuple(Split.values)


@dataclass(frozen=True)
class CsvMapping:
    """Which CSV columns hold which task fields. Empty = the column of that name,
    if present; `metadata` columns become string fields of `metadata`."""

    input: str = ""
    task_id: str = ""
    expected: str = ""
    split: str = ""
    metadata: tuple[str, ...] = field(default_factory=tuple)


def detect_format(filename: str) -> str:
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    fmt = {"jsonl": "jsonl", "ndjson": "jsonl", "yaml": "yaml", "yml": "yaml", "csv": "csv"}.get(suffix)
    if fmt is None:
        raise SpecError(f"{filename}: unknown file type; use .jsonl, .yaml/.yml or .csv")
    return fmt


def parse_task_file(filename: str, content: bytes | str, *, fmt: str = "", mapping: CsvMapping | None = None) -> list[dict]:
    """Every row of the file, validated; `SpecError` listing every problem otherwise."""
    fmt = fmt or detect_format(filename)
    if fmt not in FORMATS:
        raise SpecError(f"format: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if len(content) > MAX_FILE_BYTES:
        raise SpecError(f"{filename}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SpecError(f"{filename}: not UTF-8 text (byte {exc.start})") from None
    if fmt == "jsonl":
        numbered = _jsonl_rows(filename, content)
    elif fmt == "yaml":
        numbered = _yaml_rows(filename, content)
    else:
        numbered = _csv_rows(filename, content, mapping or CsvMapping())
    return _validate_rows(filename, numbered)


def _jsonl_rows(filename: str, text: str) -> list[tuple[int, Any]]:
    rows, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, parse_json(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"{filename} line {number}: invalid JSON ({exc.msg} at column {exc.colno})")
        except JsonTooDeep as exc:
            where, _, message = str(exc).partition(": ")
            problem = f"invalid JSON ({message})" if where == "value" else str(exc)
            problems.append(f"{filename} line {number}: {problem}")
    _raise(problems)
    return rows


def _yaml_rows(filename: str, text: str) -> list[tuple[int, Any]]:
    try:
        # compose() gives every node's line; safe_load() the plain values.
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        _check_aliases(filename, root)  # before safe_load builds anything from them
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{filename}{where}: invalid YAML ({problem})") from None
    except RecursionError:
        raise SpecError(f"{filename}: invalid YAML (nested too deeply)") from None
    if isinstance(data, dict) and isinstance(root, yaml.MappingNode) and "tasks" in data:
        root = next(value for key, value in root.value if key.value == "tasks")
        data = data["tasks"]
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise SpecError(f"{filename} line 1: expected a list of task rows (or a mapping with a tasks: list)")
    return [(node.start_mark.line + 1, row) for node, row in zip(root.value, data, strict=True)]


def _yaml_children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_aliases(filename: str, root) -> None:
    """Refuse YAML whose aliases refer back to themselves (a row that contains
    itself cannot be stored) or multiply into a huge document (a few hundred
    bytes of nested aliases can stand for a billion values). Sizes are counted
    once per node, so this is linear in the file."""
    if root is None:
        return
    expanded: dict[int, int] = {}  # node id → values it stands for, aliases expanded
    visiting: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            visiting.discard(key)
            expanded[key] = 1 + sum(expanded[id(child)] for child in _yaml_children(node))
            if expanded[key] > MAX_YAML_VALUES:
                raise SpecError(f"{filename} line {node.start_mark.line + 1}: YAML aliases expand to more than "
                                f"{MAX_YAML_VALUES:,} values; write the rows out instead")
            continue
        if key in expanded:
            continue
        if key in visiting:  # popped again before its own children are done: it contains itself
            raise SpecError(f"{filename} line {node.start_mark.line + 1}: a YAML alias refers to a value that "
                            "contains it; a task row must not contain itself")
        visiting.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _yaml_children(node))


def _csv_rows(filename: str, text: str, mapping: CsvMapping) -> list[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = reader.fieldnames or []
    if not columns:
        raise SpecError(f"{filename} line 1: no header row")

    def column(chosen: str, *defaults: str) -> str:
        if chosen:
            if chosen not in columns:
                raise SpecError(f"{filename} line 1: column {chosen!r} not found (columns: {', '.join(columns)})")
            return chosen
        return next((name for name in defaults if name in columns), "")

    input_col = column(mapping.input, "input", "instruction")
    if not input_col:
        raise SpecError(f"{filename} line 1: no input column; name one in the column mapping (columns: {', '.join(columns)})")
    id_col, expected_col, split_col = column(mapping.task_id, "task_id"), column(mapping.expected, "expected"), column(mapping.split, "split")
    metadata_cols = [column(name) for name in mapping.metadata]
    rows = []
    try:
        for record in reader:
            if None in record:
                raise SpecError(f"{filename} line {reader.line_num}: more values than header columns")
            row: dict[str, Any] = {"input": record[input_col]}
            if id_col and record[id_col]:
                row["task_id"] = record[id_col]
            if expected_col and record[expected_col]:
                row["expected"] = record[expected_col]
            if split_col and record[split_col]:
                row["split"] = record[split_col]
            if metadata_cols:
                row["metadata"] = {name: record[name] for name in metadata_cols if record[name]}
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise SpecError(f"{filename} line {reader.line_num}: invalid CSV ({exc})") from None
    return rows


def _validate_rows(filename: str, numbered: list[tuple[int, Any]]) -> list[dict]:
    if not numbered:
        raise SpecError(f"{filename}: no task rows")
    if len(numbered) > MAX_ROWS:
        raise SpecError(f"{filename}: {len(numbered)} rows; at most {MAX_ROWS} per import")
    rows, problems, seen = [], [], {}
    for index, (line, raw) in enumerate(numbered, start=1):
        row, row_problems = _validate_row(raw, index)
        problems += [f"{filename} line {line}: {problem}" for problem in row_problems]
        if row is None:
            continue
        if row["task_id"] in seen:
            problems.append(f"{filename} line {line}: task_id: duplicate id {row['task_id']!r} (first on line {seen[row['task_id']]})")
        seen[row["task_id"]] = line
        rows.append(row)
    _raise(problems)
    return rows


def _validate_row(raw: Any, index: int) -> tuple[dict | None, list[str]]:
    if not isinstance(raw, dict):
        return None, [f"row: must be an object with task_id and input, got {type(raw).__name__}"]
    problems = [f"{key}: unknown field (fields: {', '.join(ROW_FIELDS)})" for key in raw if key not in ROW_FIELDS]
    if "input" in raw and "instruction" in raw:
        problems.append("instruction: give either input or instruction, not both")
    text = raw.get("input", raw.get("instruction"))
    text_field = "input" if "input" in raw else "instruction"
    if text is None:
        problems.append("input: is required (or instruction)")
    elif not isinstance(text, str) or not text.strip():
        problems.append(f"{text_field}: must be non-empty text")
    elif len(text) > MAX_INPUT_CHARS:
        problems.append(f"{text_field}: longer than {MAX_INPUT_CHARS} characters")
    split = raw.get("split", Split.TRAIN)
    if split not in SPLITS:
        problems.append(f"split: must be one of {', '.join(SPLITS)}, got {split!r}")
    for name in ("params", "metadata"):
        if raw.get(name) is not None and not isinstance(raw[name], dict):
            problems.append(f"{name}: must be an object, got {type(raw[name]).__name__}")
    task_id = raw.get("task_id", f"task-{index}")
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    try:
        validate_task({**raw, "task_id": task_id})
    except SpecError as exc:
        problems += [p for p in exc.problems if not p.startswith(("params:", "metadata:"))]
    for name in ROW_FIELDS:  # what the database cannot hold: NaN, NUL, YAML dates and binary
        if name in raw:
            problems += storage_problems(raw[name], name)
    if problems:
        return None, problems
    if len(task_id) > 200:
        return None, ["task_id: longer than 200 characters"]
    return {
        "task_id": task_id,
        "input": text,
        "expected": raw.get("expected"),
        "params": raw.get("params") or {},
        "metadata": raw.get("metadata") or {},
        "verifier": raw.get("verifier"),
        "split": split,
    }, []


def _raise(problems: list[str]) -> None:
    if problems:
        if len(problems) > MAX_PROBLEMS:
            problems = [*problems[:MAX_PROBLEMS], f"… and {len(problems) - MAX_PROBLEMS} more problems"]
        raise SpecError(problems)
