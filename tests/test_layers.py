"""Dependencies point down only: dashboard (web) → optimizer → verifiers_app →
verifiers_app.engine (pure Python). Every import statement of the three
packages is read with `ast`, those inside functions included, so a shortcut
back up the layers fails here before it tangles the code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dashboard", "optimizer", "verifiers_app")
ENGINE = "verifiers_app.engine"
LIB = "dashboard.lib"  # shared helpers: below every app, above the engine
# Higher numbers may import lower ones, never the reverse.
RANK = {"dashboard": 3, "optimizer": 2, "verifiers_app": 1, LIB: 0.5, ENGINE: 0}


def layer_of(module: str) -> str | None:
    for low in (ENGINE, LIB):
        if module == low or module.startswith(low + "."):
            return low
    top = module.split(".")[0]
    return top if top in RANK else None


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
                # `from . import x` may name a submodule: check each name as one.
                found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names] if not node.module else [(node.lineno, module)]
            else:
                found.append((node.lineno, node.module or ""))
    return found


def upward_imports(files: list[Path], root: Path = ROOT) -> list[str]:
    problems = []
    for path in files:
        own = layer_of(module_name(path, root))
        for line, module in imported_modules(path, root):
            target = layer_of(module)
            where = f"{path.relative_to(root)}:{line}"
            if target is not None and RANK[target] > RANK[own]:
                problems.append(f"{where} ({own}) imports {module} ({target}), a higher layer")
            if own == ENGINE and module.split(".")[0] == "django":
                problems.append(f"{where} imports {module}: the scoring engine is pure Python")
    return problems


def source_files() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_no_module_imports_from_a_higher_layer():
    assert upward_imports(source_files()) == []


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("optimizer/runs/events.py", "def f():\n    from dashboard.selectors import x\n", "optimizer/runs/events.py:2 (optimizer) imports dashboard.selectors (dashboard)"),
        ("verifiers_app/services.py", "from optimizer.models import Run\n", "verifiers_app/services.py:1 (verifiers_app) imports optimizer.models (optimizer)"),
        ("verifiers_app/engine/checks.py", "from ..models import Verifier\n", "verifiers_app/engine/checks.py:1 (verifiers_app.engine) imports verifiers_app.models (verifiers_app)"),
        ("verifiers_app/engine/checks.py", "import django.conf\n", "verifiers_app/engine/checks.py:1 imports django.conf: the scoring engine is pure Python"),
        ("verifiers_app/engine/__init__.py", "from .. import services\n", "verifiers_app/engine/__init__.py:1 (verifiers_app.engine) imports verifiers_app.services"),
    ],
)
def test_an_upward_import_is_reported_with_its_file_and_line(tmp_path, path, source, expected):
    file = tmp_path / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(source)
    problems = upward_imports([file], root=tmp_path)
    assert len(problems) == 1 and problems[0].startswith(expected)


def test_imports_down_the_layers_are_allowed(tmp_path):
    file = tmp_path / "dashboard/pages/runs.py"
    file.parent.mkdir(parents=True)
    file.write_text("from optimizer.models import Run\nfrom verifiers_app.engine import score\nfrom . import home\n")
    assert upward_imports([file], root=tmp_path) == []
