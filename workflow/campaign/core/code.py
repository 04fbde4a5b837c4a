"""A stage's code version: the import closure of its entry module inside the package.

Each module counts by its syntax tree with docstrings removed (comments never reach the tree), so
an edit that cannot change what the code does (a comment, a docstring, a blank line, moving code
up or down) changes no version and retrains nothing. The closure is computed from the import
statements (top-level and inside functions), follows a phase package's lazy public names to the
module that defines them, and takes every module of a package that discovers its members at run
time (`discover(...)`: checks, designs, variants; `discover_member(...)`: the task modules), so a
new check, or an edit to any task's module, changes the version of the stage that can run it.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
from pathlib import Path

from campaign.core.fsutil import atomic_write_text
from campaign.core.hashing import hash_bytes, hash_value

PACKAGE = "campaign"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
LAZY_MAP_NAME = "_PUBLIC"  # a phase __init__'s {public name: module} (see campaign.core.lazy)
# Calls that import a member of a package chosen at run time (a registry, a task module): the
# whole package counts in the closure of the module that makes the call.
DISCOVER_CALLS = ("discover", "discover_member")


def module_path(name: str) -> Path | None:
    """The file of a package module (`campaign.data.split` → .../data/split.py), or None."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    parts = name.split(".")[1:]
    base = PACKAGE_DIR.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _is_package(name: str) -> bool:
    path = module_path(name)
    return path is not None and path.name == "__init__.py"


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]


def _analyze(path: Path, source: str) -> tuple[str, list, dict, list]:
    """(hash of the normalized tree, imports, lazy map, discovered packages) of one module."""
    tree = ast.parse(source, filename=str(path))
    imports: list[tuple[str, tuple[str, ...] | None, bool]] = []
    lazy: dict[str, str] = {}
    discovers: list[str] = []  # registry packages whose members this module imports at run time
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        top = id(node) in top_level  # run on import; others only when their function runs
        if isinstance(node, ast.Import):
            imports += [(a.name, None, top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")
                head = head[: len(head) - (node.level - 1)]
                base = ".".join([*head, base] if base else head)
            imports.append((base, tuple(a.name for a in node.names), top))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in DISCOVER_CALLS and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    discovers.append(arg.value)
                elif isinstance(arg, ast.Name) and arg.id == "__name__":
                    discovers.append(_module_name(path))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == LAZY_MAP_NAME for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            lazy = dict(value)
    _strip_docstrings(tree)
    dump = ast.dump(tree, include_attributes=False)
    return hash_bytes(dump.encode("utf-8")), imports, lazy, discovers


# Parsing every module costs about half a second; the Snakefile and every stage job need the
# versions, so each module's analysis is cached by the BLAKE3 of its bytes (an edit is always a
# miss) in the package's __pycache__, next to Python's own bytecode cache.
_CACHE_FORMAT = 2
_CACHE_PATH = Path(__file__).resolve().parents[1] / "__pycache__" / "campaign-code.json"
_cache: dict | None = None
_cache_dirty = False


def _load_cache() -> dict:
    global _cache
    if _cache is None:
        try:
            data = json.loads(_CACHE_PATH.read_text(encoding="utf-8"))
            _cache = data["modules"] if data.get("format") == _CACHE_FORMAT else {}
        except (OSError, ValueError, KeyError, TypeError):
            _cache = {}
    return _cache


def _save_cache() -> None:
    global _cache_dirty
    if not _cache_dirty or _cache is None:
        return
    _cache_dirty = False
    with contextlib.suppress(OSError):  # a read-only install just recomputes next time
        atomic_write_text(
            _CACHE_PATH, json.dumps({"format": _CACHE_FORMAT, "modules": _cache}), mode=0o644
        )


@functools.cache
def _parsed(path: Path, stamp: tuple[int, int, int]) -> tuple[str, tuple, dict, tuple]:
    """(normalized hash, imports, lazy map, discovers) of one module file, from the cache when its
    bytes are unchanged."""
    global _cache_dirty
    data = path.read_bytes()
    digest = hash_bytes(data)
    cache = _load_cache()
    hit = cache.get(digest)
    if hit is None:
        tree_hash, imports, lazy, discovers = _analyze(path, data.decode("utf-8"))
        hit = [tree_hash, [list(i) for i in imports], lazy, discovers]
        cache[digest] = hit
        _cache_dirty = True
    tree_hash, imports, lazy, discovers = hit
    return (
        tree_hash,
        tuple((m, None if n is None else tuple(n), top) for m, n, top in imports),
        dict(lazy),
        tuple(discovers),
    )


def _module_name(path: Path) -> str:
    rel = path.resolve().relative_to(PACKAGE_DIR).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _info(name: str):
    path = module_path(name)
    st = path.stat()
    return _parsed(path, (st.st_mtime_ns, st.st_size, st.st_ino))


def package_modules(package: str = PACKAGE) -> list[str]:
    """Every module file under a package folder (recursively), as dotted names."""
    root = module_path(package).parent
    out = []
    for path in sorted(root.rglob("*.py")):
        out.append(_module_name(path))
    return out


def module_imports(name: str) -> list[tuple[str, tuple[str, ...] | None, bool]]:
    """(imported module, imported names or None for `import x`, at top level) for each import
    statement of a package module, relative imports made absolute."""
    return list(_info(name)[1])


def public_names(package: str) -> dict[str, str]:
    """A phase package's lazy public names: {name: module} (its `_PUBLIC` map)."""
    return dict(_info(package)[2])


def _parents(name: str) -> list[str]:
    """The packages a module's import runs first: campaign.a.b → campaign, campaign.a."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_closure(entry_module: str) -> list[str]:
    """Sorted names of the package modules `entry_module` can run: itself, what it imports
    (transitively, inside the package), the packages above each, and the members of any package
    that discovers its members at run time.

    A package's `__init__` counts with what it imports at its top level only: it holds a phase's
    declarations, and the imports inside its declaration functions (a params check, a spec) do
    not run in a stage. Keep code a stage runs out of `__init__` functions.
    """
    done: dict[str, bool] = {}  # module -> followed all its imports (not only top-level ones)
    todo: list[tuple[str, bool]] = [(entry_module, True)]
    while todo:
        name, full = todo.pop()
        if module_path(name) is None:
            continue
        full = full and not _is_package(name)
        if name in done and (done[name] or not full):
            continue
        done[name] = full
        todo += [(parent, False) for parent in _parents(name)]
        _dump, imports, _lazy, discovers = _info(name)
        for package in discovers:
            if _is_package(package):
                todo += [(m, True) for m in package_modules(package)]
        for module, names, top in imports:
            if module_path(module) is None or not (full or top):
                continue
            todo.append((module, True))
            if not _is_package(module):
                continue
            target_lazy = _info(module)[2]
            if names is None or "*" in names:
                todo += [(_absolute(module, t), True) for t in target_lazy.values()]
                continue
            for n in names:
                sub = f"{module}.{n}"
                if module_path(sub) is not None:
                    todo.append((sub, True))
                elif n in target_lazy:
                    todo.append((_absolute(module, target_lazy[n]), True))
    return sorted(done)


def _absolute(package: str, target: str) -> str:
    return target if target.startswith(PACKAGE + ".") else f"{package}.{target}"


def module_hashes_of(modules: list[str]) -> dict[str, str]:
    """{module: BLAKE3 of its normalized syntax tree} for the given package modules."""
    hashes = {m: _info(m)[0] for m in modules}
    _save_cache()
    return hashes


def module_hashes(*entry_modules: str) -> dict[str, str]:
    """{module: BLAKE3 of its normalized syntax tree} for every module of the closures."""
    modules = sorted(set().union(*(import_closure(m) for m in entry_modules)))
    hashes = {m: _info(m)[0] for m in modules}
    _save_cache()
    return hashes


def code_version(*entry_modules: str) -> str:
    """BLAKE3 over `module_hashes`: the code version of a stage that runs these modules (its
    entry's, and the ones that pin its execution or derive its inputs: Stage.code_modules)."""
    return hash_value(module_hashes(*entry_modules))


def closure_files(entry_module: str) -> list[Path]:
    return [module_path(m) for m in import_closure(entry_module)]
