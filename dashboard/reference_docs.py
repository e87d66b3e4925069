"""The generated parts of the reference in docs/, written from their sources.

    python -m dashboard.reference_docs           # rewrite every generated section
    python -m dashboard.reference_docs --check   # list the stale ones, exit 1 if any

A generated section sits between `<!-- generated: NAME -->` and
`<!-- end generated -->` in its page; everything else on the page is written
by hand. The sources:

- `openapi` (docs/api.md): the JSON API's OpenAPI document (`dashboard.api.api`),
  one line per operation, then each schema's fields;
- `events` (docs/websockets.md): the run event catalogue, the pydantic models
  of `optimizer/runs/event_types.py`;
- `cli` (docs/cli.md): each management command's argparse parser, what
  `manage.py <command> --help` prints.

tests/dashboard/test_reference_docs.py fails when a section is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
DOCS = "docs"
END = "<!-- end generated -->"
COMMAND = "python -m dashboard.reference_docs"


def begin_marker(name: str) -> str:
    return f"<!-- generated: {name} ({COMMAND}) -->"


# -- openapi: the JSON API ----------------------------------------------------------


def _schema_name(schema: dict) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"[{_schema_name(schema.get('items', {}))}]"
    if "anyOf" in schema:
        return " | ".join(_schema_name(option) for option in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(f'"{value}"' for value in schema["enum"])
    if schema.get("type") == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return "{string: " + (_schema_name(extra) if isinstance(extra, dict) else "any") + "}"
    return {
        "integer": "int",
        "number": "number",
        "string": "string",
        "boolean": "bool",
        "null": "null",
        "object": "object",
    }.get(schema.get("type", ""), "any")


def _json_body(part: dict) -> str | None:
    schema = part.get("content", {}).get("application/json", {}).get("schema")
    return None if schema is None else _schema_name(schema)


def _operation_line(method: str, path: str, operation: dict) -> str:
    query = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
    target = path + (f"?{'&'.join(query)}" if query else "")
    body = _json_body(operation.get("requestBody", {}))
    answers = []
    for status, response in sorted(
        operation.get("responses", {}).items(), key=lambda item: str(item[0])
    ):
        if str(status).startswith("2"):
            answers.append(
                f"{status} {_json_body(response) or response.get('description', '')}".strip()
            )
    words = " ".join((operation.get("description") or operation.get("summary") or "").split())
    signature = (
        f"`{method.upper()} {target}`" + (f" {body}" if body else "") + f" → {', '.join(answers)}"
    )
    return f"- {signature}: {words}" if words else f"- {signature}"


def _schema_line(name: str, schema: dict) -> str:
    if "enum" in schema:
        return f"- **{name}**: {_schema_name(schema)}"
    required = set(schema.get("required", []))
    fields = [
        f"`{field}`" + ("" if field in required else "?") for field in schema.get("properties", {})
    ]
    return f"- **{name}**: {', '.join(fields)}" if fields else f"- **{name}**"


def openapi_markdown() -> str:
    from dashboard.api import api

    document = api.get_openapi_schema()
    by_tag: dict[str, list[str]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append(_operation_line(method, path, operation))
    lines = ["Operations, by tag: `METHOD path?query` request body → success status and body.", ""]
    for tag, operation_lines in by_tag.items():
        lines += [f"### {tag}", "", *operation_lines, ""]
    lines += ["### Schemas", "", "Fields in order; `?` marks one that may be left out.", ""]
    lines += [
        _schema_line(name, schema)
        for name, schema in sorted(document["components"]["schemas"].items())
    ]
    return "\n".join(lines) + "\n"


# -- events: the run event catalogue ------------------------------------------------


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is list:
        return f"[{_type_name(args[0])}]"
    if origin is dict:
        return f"{{{_type_name(args[0])}: {_type_name(args[1])}}}"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "{" + ", ".join(annotation.model_fields) + "}"
    return {str: "string", int: "int", float: "number", bool: "bool"}.get(
        annotation, str(annotation)
    )


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside a field's type (a list of items, a dict of per-role usage), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _field_lines(model: type[BaseModel], indent: str) -> list[str]:
    lines = []
    for name, field in model.model_fields.items():
        note = field.description or ""
        if not field.is_required():
            note = f"{note}; may be absent" if note else "may be absent"
        lines.append(
            f"{indent}- `{name}`: {_type_name(field.annotation)}" + (f" — {note}" if note else "")
        )
        nested = _nested_model(field.annotation)
        if nested is not None:
            lines += _field_lines(nested, indent + "  ")
    return lines


def events_markdown() -> str:
    """One entry per event type, its model's fields in order (with the fields
    of a nested model, such as a trial item, under it)."""
    from optimizer.runs.event_types import PAYLOADS

    lines = []
    for type_, model in PAYLOADS.items():
        lines.append(f"- **`{type_}`** — {' '.join((model.__doc__ or '').split())}")
        lines += _field_lines(model, "  ")
    return "\n".join(lines) + "\n"


# -- cli: the management commands ---------------------------------------------------

#: Frontier's own commands, in the order a user meets them.
COMMANDS = ("demo_setup", "serve", "verifiers", "tasks", "optimize", "token")


def _django_options() -> set[str]:
    """The options every Django command has (--verbosity, --settings …): said once, not per command."""
    from django.core.management.base import BaseCommand

    return {action.dest for action in BaseCommand().create_parser("manage.py", "x")._actions}


def _metavar(metavar: str | tuple[str, ...] | None) -> str:
    """argparse's metavar: a name, or one per value of an option that takes several."""
    return " ".join(metavar) if isinstance(metavar, tuple) else (metavar or "")


def _option_line(action: argparse.Action) -> str:
    if action.option_strings:
        takes_value = action.nargs != 0
        metavar = _metavar(action.metavar) or action.dest.upper()
        name = " / ".join(action.option_strings) + (f" {metavar}" if takes_value else "")
    else:
        name = _metavar(action.metavar) or action.dest
    notes = []
    if action.required and action.option_strings:
        notes.append("required")
    if isinstance(action, argparse._AppendAction):
        notes.append("repeatable")
    if action.choices and not isinstance(action.choices, dict):
        notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices if c != ""))
    text = " ".join((action.help or "").split())
    shown = (
        action.default is not None
        and action.default is not False
        and action.default not in ("", argparse.SUPPRESS)
    )
    if shown and action.nargs != 0 and "default" not in text:
        notes.append(f"default `{action.default}`")
    suffix = f" ({'; '.join(notes)})" if notes else ""
    return f"- `{name}`{suffix}" + (f": {text}" if text else "")


def _parser_lines(
    parser: argparse.ArgumentParser, title: str, about: str, skip: set[str], level: int = 3
) -> list[str]:
    lines = [f"{'#' * level} {title}", ""]
    if about:
        lines += [" ".join(about.split()), ""]
    own = [
        a
        for a in parser._actions
        if a.dest not in skip and not isinstance(a, argparse._SubParsersAction)
    ]
    if own:
        lines += [_option_line(action) for action in own] + [""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, subparser in action.choices.items():
                lines += _parser_lines(
                    subparser, f"{title} {name}", helps.get(name, ""), {"help"}, level + 1
                )
    return lines


def cli_markdown() -> str:
    from django.core.management import get_commands, load_command_class

    skip = _django_options()
    apps = get_commands()
    lines = []
    for name in COMMANDS:
        command = load_command_class(apps[name], name)
        parser = command.create_parser("manage.py", name)
        lines += _parser_lines(parser, f"manage.py {name}", str(command.help), skip)
    return "\n".join(lines).rstrip("\n") + "\n"


# -- the pages ----------------------------------------------------------------------

#: Generated section → (its page in docs/, what writes it).
SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "openapi": ("api.md", openapi_markdown),
    "events": ("websockets.md", events_markdown),
    "cli": ("cli.md", cli_markdown),
}


def with_section(text: str, name: str, body: str) -> str:
    """`text` with the body of its generated section `name` replaced by `body`."""
    pattern = re.compile(rf"<!-- generated: {re.escape(name)}\b[^>]*-->\n.*?{re.escape(END)}", re.S)
    if not pattern.search(text):
        raise ValueError(f"no {begin_marker(name)} … {END} section")
    return pattern.sub(lambda _: f"{begin_marker(name)}\n{body}{END}", text, count=1)


def regenerate() -> dict[str, tuple[str, str]]:
    """Every page with generated sections: its path in the repository → (current text, regenerated text)."""
    pages: dict[str, tuple[str, str]] = {}
    for name, (file, render) in SECTIONS.items():
        page = f"{DOCS}/{file}"
        if page not in pages:
            text = (ROOT / page).read_text()
            pages[page] = (text, text)
        current, new = pages[page]
        pages[page] = (current, with_section(new, name, render()))
    return pages


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="only say which pages are stale (exit 1 if any)"
    )
    options = parser.parse_args(argv)
    stale = {page: new for page, (current, new) in regenerate().items() if current != new}
    for page, new in stale.items():
        if options.check:
            print(f"{page} is stale: run `{COMMAND}`")
        else:
            (ROOT / page).write_text(new)
            print(f"rewrote {page}")
    return 1 if options.check and stale else 0


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    django.setup()
    sys.exit(main(sys.argv[1:]))
