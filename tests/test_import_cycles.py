"""No import cycles in app code, imports inside functions counted: a module
that needs one of its importers back is a sign that something sits in the
wrong place. (The packages' layers are import-linter contracts in
pyproject.toml, checked by `make test`'s lint-imports.)"""

from __future__ import annotations

import sys

import grimp

APP_PACKAGES = ("dashboard", "optimizer", "verifiers_app")


def import_cycles(*packages: str) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others
    (Tarjan's strongly connected components of grimp's import graph)."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return cycles


def test_no_module_of_the_apps_imports_itself_through_others():
    assert import_cycles(*APP_PACKAGES) == []


def test_a_cycle_closed_by_an_import_inside_a_function_is_reported(tmp_path, monkeypatch):
    package = tmp_path / "circular"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circular import b\n")
    (package / "b.py").write_text("def later():\n    from circular.c import x\n")
    (package / "c.py").write_text("import circular.a\nx = 1\n")
    (package / "d.py").write_text(
        "from circular import a\n"
    )  # imports into the cycle, not part of it
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("circular") == [["circular.a", "circular.b", "circular.c"]]
