"""Task-set files → validated task rows, streamed (no database here; see taskset_services).

One parser per format yields `(line, raw row)`:
- JSONL: one row object per line;
- JSON: an array of rows, or an object with the list under rows/data/examples/tasks;
- YAML: a list of rows, or a mapping with the list under tasks/rows/data/examples (docs/verifier-semantics.md "Row verifiers");
- CSV/TSV: a header row, then one row per record (delimiter sniffed from the
  header for .csv, a UTF-8 BOM is accepted; strict: an unterminated quote or a
  row with more or fewer values than the header is an error naming its line).

One field mapper (`FieldMapping.apply`) turns every raw row, whatever its
format, into a task row `{task_id, input, expected, params, metadata, verifier,
split}`: default source names (`question` → input, `answer` → expected, `id` →
task_id, Alpaca's `instruction` + `input` → one input …), each overridable;
fields it does not know are kept in `metadata`. Each row is then checked here
and by the engine's `validate_task`. Every problem names the file, its line and
the field: `tasks.jsonl line 7: invalid JSON (…)`. Parsing never evaluates
anything: JSON, `yaml.safe_*` and the csv module only.

JSONL and CSV are read line by line from a binary stream, so a 100,000-row file
is scanned in bounded memory (`scan_task_file` for the preview report,
`iter_task_rows` for writing); JSON and YAML are parsed whole and are capped lower.
"""

from __future__ import annotations

import codecs
import csv
import functools
import io
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, BinaryIO, TypeVar

import yaml

from dashboard.lib.storable import (
    MAX_JSON_DEPTH,
    JsonTooDeep,
    depth_problem,
    parse_json,
    storage_problems,
)
from optimizer.tasksets.models import Split
from verifiers_app.engine import SpecError, validate_task
from verifiers_app.engine.json_types import JSONObject
from verifiers_app.engine.reads import task_field_readers

#: A row as a parser read it, before mapping: YAML keys need not be strings.
RawRow = dict[Any, Any]
#: What a parser notes about the file as it reads it (format, delimiter, columns).
FileFacts = dict[str, Any]
Item = TypeVar("Item")

MAX_FILE_BYTES = 64 * 1024 * 1024  # JSONL, CSV, TSV: streamed
MAX_DOCUMENT_BYTES = 10 * 1024 * 1024  # JSON, YAML: parsed whole
MAX_ROWS = 200_000
MAX_INPUT_CHARS = 100_000
MAX_PROBLEMS = 50
MAX_YAML_VALUES = 2_000_000
FORMATS = ("jsonl", "json", "yaml", "csv", "tsv")
EXTENSIONS = {
    "jsonl": "jsonl",
    "ndjson": "jsonl",
    "json": "json",
    "yaml": "yaml",
    "yml": "yaml",
    "csv": "csv",
    "tsv": "tsv",
    "tab": "tsv",
}
WHOLE_DOCUMENT = ("json", "yaml")
ROW_LIST_KEYS = ("rows", "data", "examples", "tasks")
CSV_DELIMITERS = (",", ";", "\t", "|")
ROW_FIELDS = ("task_id", "input", "expected", "params", "metadata", "verifier", "split")
PASSTHROUGH_FIELDS = ("params", "metadata", "verifier")
SPLITS = tuple(Split.values)
# Source names each task field is read from when the mapping does not name one (first present wins).
DEFAULT_SOURCES = {
    "task_id": ("task_id", "id"),
    "input": ("input", "prompt", "question", "query"),
    "instruction": ("instruction",),
    "expected": ("expected", "output", "answer", "completion", "target"),
    "split": ("split",),
}
#: The default rule for rows without a split: from HOLDOUT_MIN_ROWS rows to deal
#: up, a fifth is held out (tasks GEPA never sees, scored at the end of a run to
#: check its val lift); below that, a held-out split would be one or two tasks
#: that confirm nothing, so every row goes to train and val.
HOLDOUT_MIN_ROWS = 10
RULE_RATIOS = {"train": 0.5, "val": 0.3, "holdout": 0.2}
SMALL_SET_RATIOS = {"train": 0.6, "val": 0.4, "holdout": 0.0}


@dataclass(frozen=True)
class FieldMapping:
    """Which source field (a JSON/YAML key or a CSV column) fills which task field.
    Empty = the first of `DEFAULT_SOURCES[field]` the row has. `instruction` is
    put before `input` with a blank line between (Alpaca); either alone is the input."""

    task_id: str = ""
    input: str = ""
    instruction: str = ""
    expected: str = ""
    split: str = ""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def overrides(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in self.names() if getattr(self, name)}

    def sources(self, keys: Iterable[object]) -> dict[str, str]:
        """task field → the key of `keys` it is read from ("" = none)."""
        return _sources(self, tuple(keys))

    def _resolve(self, keys: tuple[object, ...]) -> dict[str, str]:
        found = {}
        for name in self.names():
            chosen = getattr(self, name)
            found[name] = (
                chosen if chosen else next((k for k in DEFAULT_SOURCES[name] if k in keys), "")
            )
        return found

    def apply(self, raw: RawRow) -> tuple[JSONObject, dict[str, str], list[str]]:
        """The task-row fields of one raw row (before validation), the source
        label of each field for problems, and the problems found mapping it."""
        src = self.sources(raw)
        used = {s for s in src.values() if s}
        labels = {name: src.get(name) or name for name in ROW_FIELDS}
        problems: list[str] = []
        row: dict[str, Any] = {}
        for name in ("task_id", "expected", "split"):
            if src[name] and src[name] in raw:
                row[name] = raw[src[name]]
        instruction = raw.get(src["instruction"]) if src["instruction"] else None
        text = raw.get(src["input"]) if src["input"] else None
        if instruction is not None and not isinstance(instruction, str):
            problems.append(f"{src['instruction']}: must be text, got {type(instruction).__name__}")
        elif instruction is not None and (
            text is None or (isinstance(text, str) and not text.strip())
        ):
            row["input"], labels["input"] = instruction, src["instruction"]
        elif instruction is not None and isinstance(text, str):
            row["input"] = f"{instruction}\n\n{text}"
        elif text is not None:
            row["input"] = text
        elif src["input"] and src["input"] in raw:
            problems.append(f"{src['input']}: must be non-empty text")
        else:
            wanted = (
                f"no {self.input!r} field"
                if self.input
                else ("no field named " + ", ".join(DEFAULT_SOURCES["input"]) + " or instruction")
            )
            problems.append(f"input: is required ({wanted}; choose the input field in the mapping)")
        for name in PASSTHROUGH_FIELDS:
            if name in raw and name not in used:
                row[name] = raw[name]
        extra = {
            key: value
            for key, value in raw.items()
            if key not in used and key not in PASSTHROUGH_FIELDS
        }
        if extra:
            metadata = row.get("metadata")
            if metadata is None:
                row["metadata"] = extra
            elif isinstance(metadata, dict):
                row["metadata"] = {**extra, **metadata}
        return row, labels, problems


@functools.lru_cache(maxsize=1024)
def _sources(mapping: FieldMapping, keys: tuple[object, ...]) -> dict[str, str]:
    # Rows of one file nearly always share their keys: resolve each key set once.
    return mapping._resolve(keys)


@dataclass(frozen=True)
class DefaultSplit:
    """How rows without a split are dealt: shuffled with `seed`, then dealt by
    `ratios` (every split with a ratio > 0 gets at least one row when there are
    enough). No `ratios`: by the default rule, `rule_ratios(rows to deal)`."""

    ratios: dict[str, float] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.ratios is not None:
            check_ratios(self.ratios)

    @property
    def by_rule(self) -> bool:
        return self.ratios is None

    def ratios_for(self, rows: int) -> dict[str, float]:
        """The ratios that deal `rows` rows."""
        return dict(self.ratios) if self.ratios is not None else rule_ratios(rows)

    def describe(self, rows: int) -> str:
        """How `rows` rows are dealt, in words: "by the rule: 50/30/20 from 10 rows, seed 0"."""
        if self.ratios is None:
            return f"by the rule: {rule_text(rows)}, seed {self.seed}"
        given = ", ".join(f"{s} {self.ratios.get(s, 0):g}" for s in SPLITS if self.ratios.get(s, 0))
        return f"as asked: {given}, seed {self.seed}"


def rule_ratios(rows: int) -> dict[str, float]:
    """The default rule's ratios for `rows` rows to deal."""
    return dict(RULE_RATIOS if rows >= HOLDOUT_MIN_ROWS else SMALL_SET_RATIOS)


def _percents(ratios: Mapping[str, float]) -> str:
    return "/".join(f"{ratios[s] * 100:g}" for s in SPLITS)


def rule_text(rows: int | None = None) -> str:
    """The default rule in words (train/val/holdout percentages); with `rows`,
    the branch those rows take."""
    held = f"{_percents(RULE_RATIOS)} from {HOLDOUT_MIN_ROWS} rows"
    small = f"{_percents(SMALL_SET_RATIOS)} below {HOLDOUT_MIN_ROWS} rows"
    if rows is None:
        return f"{held}, {small}"
    return held if rows >= HOLDOUT_MIN_ROWS else small


def check_ratios(ratios: Mapping[str, float]) -> None:
    unknown = set(ratios) - set(SPLITS)
    if unknown:
        raise SpecError(f"ratios: unknown split {sorted(unknown)[0]!r}; use {', '.join(SPLITS)}")
    if (
        any(
            isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0
            for r in ratios.values()
        )
        or sum(ratios.values()) <= 0
    ):
        raise SpecError("ratios: each ratio must be a number ≥ 0 and they must not all be 0")


def deal_splits(
    items: Iterable[Item], ratios: Mapping[str, float], seed: int
) -> dict[str, list[Item]]:
    """Shuffle `items` with `seed` and deal them by `ratios` (the same seed gives
    the same deal). Each split with a ratio > 0 gets at least one item when
    there are at least as many items as such splits; rounding never drops one."""
    check_ratios(ratios)
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    names = [s for s in SPLITS if ratios.get(s, 0) > 0]
    total = sum(ratios[s] for s in names)
    sizes = [round(len(shuffled) * ratios[s] / total) for s in names]
    sizes[-1] = len(shuffled) - sum(sizes[:-1])
    while sizes[-1] < 0:  # rounding up earlier splits overshot
        biggest = max(range(len(sizes) - 1), key=lambda i: sizes[i])
        sizes[biggest] -= 1
        sizes[-1] += 1
    if len(shuffled) >= len(names):
        for i in range(len(sizes)):
            if sizes[i] == 0:
                biggest = max(range(len(sizes)), key=lambda j: sizes[j])
                sizes[biggest] -= 1
                sizes[i] += 1
    dealt: dict[str, list[Item]] = {}
    start = 0
    for name, size in zip(names, sizes):
        dealt[name] = shuffled[start : start + size]
        start += size
    return dealt


def detect_format(filename: str) -> str:
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    fmt = EXTENSIONS.get(suffix)
    if fmt is None:
        raise SpecError(
            f"{filename}: unknown file type; use .jsonl, .json, .yaml/.yml, .csv or .tsv"
        )
    return fmt


class TaskFile:
    """An uploaded file that can be read more than once (a preview pass, then a
    write pass): bytes/str in memory, or a seekable binary file (an upload on disk)."""

    def __init__(self, filename: str, content: bytes | str | BinaryIO) -> None:
        self.filename = filename
        if isinstance(content, str):
            content = content.encode("utf-8")
        self._content = content
        if isinstance(content, bytes):
            self.size = len(content)
        else:
            content.seek(0, io.SEEK_END)
            self.size = content.tell()

    def open(self) -> BinaryIO:
        if isinstance(self._content, bytes):
            return io.BytesIO(self._content)
        self._content.seek(0)
        return self._content


class _Bad(str):
    """A row that could not be parsed: the problem, in place of the row."""


def _text_lines(filename: str, stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """Decoded lines with their numbers; invalid UTF-8 names its line."""
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError(
                f"{filename} line {number}: not UTF-8 text (byte {exc.start + 1} of the line); "
                "save the file as UTF-8"
            ) from None


def _read_text(filename: str, stream: BinaryIO) -> str:
    data = stream.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(f"{filename} line {line}: not UTF-8 text; save the file as UTF-8") from None


def _json_error(exc: json.JSONDecodeError) -> str:
    """json's message and column: `Expecting ',' delimiter at column 47` (some of
    its messages end in "at" already: `Unterminated string starting at column 11`)."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def _jsonl_rows(
    filename: str, stream: BinaryIO, mapping: FieldMapping, report: FileFacts
) -> Iterator[tuple[int, Any]]:
    for number, line in _text_lines(filename, stream):
        if not line.strip():
            continue
        # Without its line break: json counts a "\n" as the start of a second line,
        # so an error at the end of the row would read "column 1" of a line that
        # is not there, where `json.loads` of the row itself names the column.
        line = line.rstrip("\r\n")
        try:
            yield number, parse_json(line)
        except json.JSONDecodeError as exc:
            yield number, _Bad(f"invalid JSON ({_json_error(exc)})")
        except JsonTooDeep as exc:
            where, _, message = str(exc).partition(": ")
            yield number, _Bad(f"invalid JSON ({message})" if where == "value" else str(exc))


def _json_rows(
    filename: str, stream: BinaryIO, mapping: FieldMapping, report: FileFacts
) -> Iterator[tuple[int, Any]]:
    """An array of rows, or an object with the array under one of ROW_LIST_KEYS.
    Walks the top level with `raw_decode` so each row keeps its line number."""
    text = _read_text(filename, stream)
    decoder = json.JSONDecoder()
    lines = _LineCounter(text)

    def skip(pos: int) -> int:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        return pos

    def value_at(pos: int) -> tuple[Any, int]:
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise SpecError(
                f"{filename} line {exc.lineno}: invalid JSON ({_json_error(exc)})"
            ) from None
        except RecursionError:
            raise SpecError(
                f"{filename} line {lines.at(pos)}: invalid JSON (nested more than {MAX_JSON_DEPTH} "
                "levels deep)"
            ) from None
        problem = depth_problem(value)
        if problem:  # the same cap as every other untrusted JSON (dashboard.lib.storable)
            raise SpecError(
                f"{filename} line {lines.at(pos)}: invalid JSON ({problem.partition(': ')[2]})"
            )
        return value, end

    def expect(pos: int, chars: str) -> int:
        pos = skip(pos)
        if pos >= len(text) or text[pos] not in chars:
            raise SpecError(
                f"{filename} line {lines.at(pos)}: invalid JSON (expected {' or '.join(repr(c) for c in chars)})"
            )
        return pos

    start = skip(0)
    if text[start : start + 1] == "{":
        pos, found = skip(start + 1), None
        while text[pos : pos + 1] != "}":
            key, pos = value_at(pos)
            pos = expect(pos, ":") + 1
            pos = skip(pos)
            if found is None and key in ROW_LIST_KEYS and text[pos : pos + 1] == "[":
                found = pos
            _, pos = value_at(pos)
            pos = expect(pos, ",}")
            if text[pos] == ",":
                pos = skip(pos + 1)
        if found is None and text[skip(pos + 1) : skip(pos + 1) + 1] == "{":
            raise SpecError(
                f"{filename} line {lines.at(skip(pos + 1))}: a second JSON object after the "
                "first: one row object per line is JSONL; name the file .jsonl (or choose the "
                "format jsonl)"
            )
        if found is None:
            raise SpecError(
                f"{filename} line {lines.at(start)}: a JSON object needs its rows in a list under "
                + ", ".join(ROW_LIST_KEYS)
            )
        end_of_document, start = pos + 1, found
    elif text[start : start + 1] != "[":
        raise SpecError(
            f"{filename} line {lines.at(start)}: expected an array of rows, or an object with a list "
            "under " + ", ".join(ROW_LIST_KEYS)
        )
    else:
        end_of_document = None
    pos = skip(start + 1)
    while text[pos : pos + 1] != "]":
        row, end = value_at(pos)
        yield lines.at(pos), row
        pos = expect(end, ",]")
        if text[pos] == ",":
            pos = skip(pos + 1)
            if text[pos : pos + 1] == "]":
                raise SpecError(
                    f"{filename} line {lines.at(pos)}: invalid JSON (a comma before ']')"
                )
    trailing = skip(end_of_document if end_of_document is not None else pos + 1)
    if trailing < len(text):
        raise SpecError(
            f"{filename} line {lines.at(trailing)}: invalid JSON (extra data after the rows)"
        )


class _LineCounter:
    """Line number of a position, for positions that only grow (linear overall)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _yaml_rows(
    filename: str, stream: BinaryIO, mapping: FieldMapping, report: FileFacts
) -> Iterator[tuple[int, Any]]:
    text = _read_text(filename, stream)
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
    if isinstance(data, dict) and isinstance(root, yaml.MappingNode):
        key = next((k for k in ("tasks", *ROW_LIST_KEYS) if isinstance(data.get(k), list)), None)
        if key is not None:
            root = next(value for k, value in root.value if k.value == key)
            data = data[key]
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise SpecError(
            f"{filename} line 1: expected a list of task rows (or a mapping with the list under "
            + ", ".join(ROW_LIST_KEYS)
            + ")"
        )
    for node, row in zip(root.value, data, strict=True):
        yield node.start_mark.line + 1, row


def _yaml_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_aliases(filename: str, root: yaml.Node | None) -> None:
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
                raise SpecError(
                    f"{filename} line {node.start_mark.line + 1}: YAML aliases expand to more than "
                    f"{MAX_YAML_VALUES:,} values; write the rows out instead"
                )
            continue
        if key in expanded:
            continue
        if key in visiting:  # popped again before its own children are done: it contains itself
            raise SpecError(
                f"{filename} line {node.start_mark.line + 1}: a YAML alias refers to a value that "
                "contains it; a task row must not contain itself"
            )
        visiting.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _yaml_children(node))


def _sniff_delimiter(header: str) -> str:
    """The candidate that splits the header line most often (outside quotes); `,` by default."""
    unquoted = "".join(part for i, part in enumerate(header.split('"')) if i % 2 == 0)
    counts = {d: unquoted.count(d) for d in CSV_DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _csv_rows(
    filename: str, stream: BinaryIO, mapping: FieldMapping, report: FileFacts, *, tsv: bool = False
) -> Iterator[tuple[int, Any]]:
    lines = _text_lines(filename, stream)
    first = next(lines, None)
    if first is None or not first[1].strip():
        raise SpecError(f"{filename} line 1: no header row")
    delimiter = "\t" if tsv else _sniff_delimiter(first[1])
    report["delimiter"] = delimiter

    def physical() -> Iterator[str]:
        yield first[1]
        for _, text in lines:
            yield text

    reader = csv.reader(physical(), delimiter=delimiter, strict=True)
    start = 1
    try:
        header = [name.strip() for name in next(reader)]
        duplicates = [name for name, n in Counter(header).items() if n > 1]
        if "" in header:
            raise SpecError(
                f"{filename} line 1: column {header.index('') + 1} has no name in the header row"
            )
        if duplicates:
            raise SpecError(
                f"{filename} line 1: column {duplicates[0]!r} appears more than once in the header row"
            )
        report["columns"] = header
        missing = [
            f"{name}: column {column!r} not found (columns: {', '.join(header)})"
            for name, column in mapping.overrides().items()
            if column not in header
        ]
        if missing:
            raise SpecError([f"{filename} line 1: {problem}" for problem in missing])
        start = reader.line_num + 1
        for values in reader:
            if not values:  # a blank line
                start = reader.line_num + 1
                continue
            if len(values) != len(header):
                yield (
                    start,
                    _Bad(
                        f"row: {len(values)} values but the header has {len(header)} columns "
                        f"(delimiter {delimiter!r}; a value holding it must be quoted)"
                    ),
                )
            else:
                # An empty cell is a missing value: the default for that field applies.
                yield start, {name: value for name, value in zip(header, values) if value != ""}
            start = reader.line_num + 1
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise SpecError(
                f"{filename} line {start}: unterminated quote: the quoted value that starts on this "
                "line never ends"
            ) from None
        if "field larger than field limit" in str(exc):
            raise SpecError(
                f"{filename} line {start}: a value longer than {csv.field_size_limit():,} characters "
                "(an unterminated quote on this line?)"
            ) from None
        raise SpecError(f"{filename} line {reader.line_num}: invalid CSV ({exc})") from None


#: A format's parser: ``(filename, stream, mapping, facts) → (line, raw row or _Bad), …``.
Parser = Callable[[str, BinaryIO, FieldMapping, FileFacts], Iterator[tuple[int, Any]]]

PARSERS: dict[str, Parser] = {
    "jsonl": _jsonl_rows,
    "json": _json_rows,
    "yaml": _yaml_rows,
    "csv": _csv_rows,
    "tsv": lambda *args: _csv_rows(*args, tsv=True),
}


def _validate_row(
    raw: Any, index: int, mapping: FieldMapping
) -> tuple[JSONObject | None, list[str]]:
    """One raw row → a task row (split None = none given) and its problems."""
    if isinstance(raw, _Bad):
        return None, [str(raw)]
    if not isinstance(raw, dict):
        return None, [f"row: must be an object with an input field, got {type(raw).__name__}"]
    mapped, labels, problems = mapping.apply(raw)
    text = mapped.get("input")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{labels['input']}: must be non-empty text")
        elif len(text) > MAX_INPUT_CHARS:
            problems.append(f"{labels['input']}: longer than {MAX_INPUT_CHARS} characters")
    split = mapped.get("split")
    if split is not None and split not in SPLITS:
        problems.append(f"{labels['split']}: must be one of {', '.join(SPLITS)}, got {split!r}")
    for name in ("params", "metadata"):
        if mapped.get(name) is not None and not isinstance(mapped[name], dict):
            problems.append(f"{name}: must be an object, got {type(mapped[name]).__name__}")
    task_id = mapped.get("task_id", f"task-{index}")
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    try:
        validate_task({**mapped, "task_id": task_id})
    except SpecError as exc:
        problems += [
            p.replace("task_id:", f"{labels['task_id']}:", 1) if p.startswith("task_id:") else p
            for p in exc.problems
            if not p.startswith(("params:", "metadata:"))
        ]
    for name in ROW_FIELDS:  # what the database cannot hold: NaN, NUL, YAML dates and binary
        if name in mapped:
            problems += storage_problems(mapped[name], labels.get(name, name))
    if problems:
        return None, problems
    if len(task_id) > 200:
        return None, [f"{labels['task_id']}: longer than 200 characters"]
    return {
        "task_id": task_id,
        "input": text,
        "expected": mapped.get("expected"),
        "params": mapped.get("params") or {},
        "metadata": mapped.get("metadata") or {},
        "verifier": mapped.get("verifier"),
        "split": split,
    }, []


@dataclass
class ScanReport:
    """What one pass over a file found: the preview of an import."""

    filename: str
    format: str
    delimiter: str = ""
    columns: list[str] = field(default_factory=list)
    total: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    mapping: dict[str, list[str]] = field(default_factory=dict)  # task field → source fields seen
    kept_in_metadata: list[str] = field(default_factory=list)  # unknown fields, kept in metadata
    # Stored task field the rows carry → what reads it when a run scores an output.
    read_by: dict[str, str] = field(default_factory=dict)
    split_counts: dict[str, int] = field(default_factory=dict)  # rows that name a split
    unsplit_ids: list[str] = field(default_factory=list)  # rows without one, in file order
    page_rows: list[JSONObject] = field(default_factory=list)

    def add_problem(self, problem: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)

    def problem_lines(self) -> list[str]:
        more = self.problem_count - len(self.problems)
        return self.problems + ([f"… and {more} more problems"] if more > 0 else [])


def _numbered_rows(
    task_file: TaskFile, fmt: str, mapping: FieldMapping, report: FileFacts
) -> Iterator[tuple[int, Any]]:
    fmt = fmt or detect_format(task_file.filename)
    if fmt not in FORMATS:
        raise SpecError(f"format: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    limit = MAX_DOCUMENT_BYTES if fmt in WHOLE_DOCUMENT else MAX_FILE_BYTES
    if task_file.size > limit:
        raise SpecError(
            f"{task_file.filename}: larger than {limit // (1024 * 1024)} MB"
            + (
                " (JSON and YAML are read whole; use JSONL or CSV for bigger sets)"
                if fmt in WHOLE_DOCUMENT
                else ""
            )
        )
    report["format"] = fmt
    return PARSERS[fmt](task_file.filename, task_file.open(), mapping, report)


def scan_task_file(
    task_file: TaskFile,
    *,
    fmt: str = "",
    mapping: FieldMapping | None = None,
    page: tuple[int, int] = (0, 20),
    visit: Callable[[JSONObject], None] | None = None,
) -> ScanReport:
    """One pass over the file: every problem (by line and field, at most
    MAX_PROBLEMS kept), counts, the rows `page` = (offset, limit) as they would be
    stored (split None = to be dealt by the default split), and `visit(row)` for
    each valid row. Raises `SpecError` only when the file cannot be read at all."""
    mapping = mapping or FieldMapping()
    context: FileFacts = {}
    report = ScanReport(task_file.filename, fmt)
    seen: dict[str, int] = {}
    sources: dict[str, set[str]] = {name: set() for name in FieldMapping.names()}
    extra: set[str] = set()
    shapes: set[tuple[object, ...]] = set()
    carried: set[str] = {"input"}
    offset, limit = page
    for index, (line, raw) in enumerate(_numbered_rows(task_file, fmt, mapping, context), start=1):
        if index > MAX_ROWS:
            raise SpecError(
                f"{task_file.filename} line {line}: more than {MAX_ROWS:,} rows; at most {MAX_ROWS:,} per import"
            )
        report.total = index
        row, problems = _validate_row(raw, index, mapping)
        for problem in problems:
            report.add_problem(f"{task_file.filename} line {line}: {problem}")
        if (
            isinstance(raw, dict)
            and len(extra) < 50
            and len(shapes) < 1000
            and (shape := tuple(raw)) not in shapes
        ):
            shapes.add(shape)  # rows of one shape map the same way: look once
            src = mapping.sources(raw)
            for name, key in src.items():
                if key and key in raw:
                    sources[name].add(key)
            used = set(src.values())
            extra.update(
                k
                for k in raw
                if k not in used and k not in PASSTHROUGH_FIELDS and isinstance(k, str)
            )
        if row is None:
            continue
        if row["task_id"] in seen:
            report.add_problem(
                f"{task_file.filename} line {line}: {'task_id'}: duplicate id {row['task_id']!r} "
                f"(first on line {seen[row['task_id']]})"
            )
            continue
        seen[row["task_id"]] = line
        carried.update(_carried_fields(row))
        if row["split"] is None:
            report.unsplit_ids.append(row["task_id"])
        else:
            report.split_counts[row["split"]] = report.split_counts.get(row["split"], 0) + 1
        if offset < index <= offset + limit:
            report.page_rows.append({"line": line, **row})
        if visit is not None:
            visit(row)
    if report.total == 0:
        raise SpecError(f"{task_file.filename}: no task rows")
    report.format = context.get("format", fmt)
    report.delimiter = context.get("delimiter", "")
    report.columns = context.get("columns", [])
    report.mapping = {name: sorted(keys) for name, keys in sources.items() if keys}
    report.kept_in_metadata = sorted(extra)[:50]
    report.read_by = {name: text for name, text in task_field_readers().items() if name in carried}
    return report


def _carried_fields(row: JSONObject) -> Iterator[str]:
    """The stored fields of a valid row that hold something, as `task_field_readers` names them."""
    if row["expected"] is not None:
        yield "expected"
    for name in ("params", "verifier"):
        if row[name]:
            yield name
    for key in row["metadata"]:
        yield (f"metadata.{key}" if key in ("expectations", "expectedOutputSchema") else "metadata")


def iter_task_rows(
    task_file: TaskFile, *, fmt: str = "", mapping: FieldMapping | None = None
) -> Iterator[JSONObject]:
    """The valid rows of a file already scanned without problems (a second pass, for writing)."""
    mapping = mapping or FieldMapping()
    for index, (line, raw) in enumerate(_numbered_rows(task_file, fmt, mapping, {}), start=1):
        row, problems = _validate_row(raw, index, mapping)
        if row is None:  # the file changed between the passes
            raise SpecError(f"{task_file.filename} line {line}: {problems[0]}")
        yield row


def parse_task_file(
    filename: str,
    content: bytes | str,
    *,
    fmt: str = "",
    mapping: FieldMapping | None = None,
    default_split: DefaultSplit | None = None,
) -> list[JSONObject]:
    """Every row of a small file, validated, rows without a split dealt by
    `default_split`; `SpecError` listing every problem otherwise."""
    task_file = TaskFile(filename, content)
    report = scan_task_file(task_file, fmt=fmt, mapping=mapping, page=(0, 0))
    if report.problem_count:
        raise SpecError(report.problem_lines())
    default_split = default_split or DefaultSplit()
    ratios = default_split.ratios_for(len(report.unsplit_ids))
    dealt = {
        task_id: split
        for split, ids in deal_splits(report.unsplit_ids, ratios, default_split.seed).items()
        for task_id in ids
    }
    return [
        {**row, "split": row["split"] or dealt[row["task_id"]]}
        for row in iter_task_rows(task_file, fmt=fmt, mapping=mapping)
    ]
