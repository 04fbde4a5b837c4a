"""One place per phase: the package's import graph has no cycle, `core` imports no phase, and a
phase (or a tool) uses another phase only through the public names of its `__init__`."""

from __future__ import annotations

import ast
from collections import defaultdict

from campaign.core.code import (
    PACKAGE,
    module_imports,
    module_path,
    package_modules,
    public_names,
)
from campaign.core.registry import NOT_PHASES, phases

MODULES = package_modules()
MAX_LINES = 700


def group(module: str) -> str:
    """campaign.train.loop -> train; campaign.cli -> cli; campaign -> (top)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(top)"


def is_package(module: str) -> bool:
    return module_path(module).name == "__init__.py"


def top_level_names(package: str) -> set[str]:
    """Names a package's `__init__` defines or imports at its top level."""
    tree = ast.parse(module_path(package).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def edges() -> dict[str, set[str]]:
    """module -> package modules it imports (any import statement, function-level included);
    a name imported from a phase package resolves to the module its `_PUBLIC` map names."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module in MODULES:
        for target, names, _top in module_imports(module):
            if module_path(target) is None:
                continue
            if not is_package(target) or names is None:
                graph[module].add(target)
                continue
            # `from package import x`: an edge to submodule x, to the module that defines a
            # lazy public name x, or to the package's __init__ for a name it defines itself.
            lazy = public_names(target)
            for name in names:
                if module_path(f"{target}.{name}") is not None:
                    graph[module].add(f"{target}.{name}")
                elif name in lazy:
                    graph[module].add(f"{target}.{lazy[name]}")
                else:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member, or a self-loop (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_tree_has_core_one_folder_per_phase_and_the_tools():
    groups = {group(m) for m in MODULES}
    declared = [p.name for p in phases()]
    assert {"core", "tools", "cli", *declared} <= groups
    # The DAG's order: data, preflight, plan, train, ..., report, then tracking (an effect on
    # the finished results).
    assert declared[0] == "data" and declared[-2:] == ["report", "track"]
    for phase in phases():
        assert is_package(f"{PACKAGE}.{phase.name}"), phase.name
        for stage in phase.stages:
            assert stage.module.startswith(f"{PACKAGE}.{phase.name}."), stage.name


def test_no_import_cycle_between_modules_or_between_phases():
    graph = edges()
    assert cycles(graph) == []
    by_group: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        by_group[group(module)] |= {group(t) for t in targets if group(t) != group(module)}
    assert cycles(by_group) == []


def test_core_imports_no_phase_and_no_tool():
    for module in MODULES:
        if group(module) != "core":
            continue
        for target, _names, _top in module_imports(module):
            if target.startswith(PACKAGE + "."):
                assert group(target) == "core", f"{module} imports {target}"


def test_phases_and_tools_use_other_phases_only_through_their_public_names():
    phase_names = {p.name for p in phases()} | {
        group(m) for m in MODULES if is_package(m) and group(m) not in NOT_PHASES
    }
    public = {
        name: set(public_names(f"{PACKAGE}.{name}")) | top_level_names(f"{PACKAGE}.{name}")
        for name in phase_names
        if module_path(f"{PACKAGE}.{name}") is not None
    }
    problems = []
    for module in MODULES:
        here = group(module)
        for target, names, _top in module_imports(module):
            there = group(target) if target.startswith(PACKAGE + ".") else None
            if there is None or there == here or there not in public:
                continue
            if target != f"{PACKAGE}.{there}":
                problems.append(f"{module} imports {target} (private to {there})")
            elif names is None:
                problems.append(f"{module} imports the whole package {target}")
            else:
                private = sorted(set(names) - public[there])
                if private:
                    problems.append(f"{module} imports {target}: {', '.join(private)} (private)")
    assert problems == []


def test_the_layout_test_catches_a_private_import_and_a_cycle():
    # The checks above must be able to fail: a cycle and a private import, built by hand.
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    lazy = public_names(f"{PACKAGE}.train")
    assert "Trainer" in lazy and "param_groups" not in lazy


def test_no_module_mixes_concerns_past_a_readable_size():
    # The generated demo corpus vocabulary is data, not logic; every other module stays small.
    long = {
        m: n
        for m in MODULES
        if (n := len(module_path(m).read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
