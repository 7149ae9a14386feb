"""The shape of the package: the pipeline is the tree, data flows one way down it.

Read from the source with ``ast`` (every import counts: module level, inside functions and under
``TYPE_CHECKING``), so a shortcut that works at run time but tangles the tree still fails here.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "dmlqa"

#: Stage subpackages in pipeline order; a module may import its own stage and the ones before it.
#: pipeline/ and query/ both sit on index/ and never import each other; api stands on both; app on api.
LAYERS = {
    "models": 0, "errors": 0, "settings": 0, "paths": 0, "media": 0, "version": 0, "fsutil": 0, "textsafe": 0,
    "catalog": 1, "acquire": 2, "extract": 3, "index": 4, "pipeline": 5, "query": 5, "api": 6, "app": 7,
}
STAGES = ("catalog", "acquire", "extract", "index", "pipeline", "query", "app")
#: What a front end may import from outside app/: the API and the types it returns.
FRONT_END_OUTSIDE = {"dmlqa", "dmlqa.api", "dmlqa.models", "dmlqa.errors", "dmlqa.settings"}
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return name or None


def _imports(name: str, path: Path) -> set[str]:
    """Every dmlqa module ``name`` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names]
        for target in targets:
            resolved = _resolve(target) if target.startswith("dmlqa") else None
            if resolved and resolved != name:
                found.add(resolved)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> tuple[int, str]:
    part = module.split(".")[1] if "." in module else "dmlqa"
    return LAYERS.get(part, 8), part


def test_stage_subpackages_exist_and_name_what_they_offer() -> None:
    for stage in STAGES:
        init = SRC / stage / "__init__.py"
        assert init.is_file(), f"missing stage package {stage}/"
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{stage}/__init__.py says nothing of what the stage is"
    for stage in ("catalog", "acquire", "extract", "index", "pipeline", "query"):
        text = (SRC / stage / "__init__.py").read_text(encoding="utf-8")
        assert "__all__" in text, f"{stage}/__init__.py does not name what it offers (__all__)"


def test_no_import_cycles() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
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
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    assert cycles == []


def test_data_flows_one_way_down_the_tree() -> None:
    wrong = []
    for module, targets in GRAPH.items():
        if module == "dmlqa":
            continue
        own, own_part = _layer(module)
        for target in targets:
            layer, part = _layer(target)
            if target == "dmlqa" or layer > own or (layer == own and own > 0 and part != own_part):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_inside_a_stage_siblings_are_imported_by_module_not_by_package() -> None:
    wrong = [f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts
             if t in {f"dmlqa.{s}" for s in STAGES} and m.startswith(t + ".")]
    assert wrong == []


def test_no_module_over_600_lines() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("dmlqa.app.")))
def test_front_ends_are_thin_over_the_api(module: str) -> None:
    imports = GRAPH[module]
    outside = {m for m in imports if not m.startswith("dmlqa.app")}
    assert len(imports) <= 4, f"{module} imports {sorted(imports)}"
    assert outside <= FRONT_END_OUTSIDE, f"{module} reaches past the API: {sorted(outside - FRONT_END_OUTSIDE)}"


def test_root_app_script_is_thin_too() -> None:
    path = SRC.parents[1] / "app.py"
    found = {m for m in re.findall(r"^\s*(?:from|import) (dmlqa[\w.]*)", path.read_text(encoding="utf-8"), re.M)}
    assert len(found) <= 4 and all(m.startswith("dmlqa.app") or m in FRONT_END_OUTSIDE for m in found), found


def test_library_code_never_writes_the_environment() -> None:
    writes = re.compile(r"os\.environ(?:\[[^\]]+\]\s*=[^=]|\.setdefault|\.update|\.pop|\.clear)|os\.putenv")
    wrong = [f"{name}:{i}" for name, path in MODULES.items()
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if writes.search(line)]
    assert wrong == []


def test_home_file_names_are_spelled_once() -> None:
    """Every name inside a home comes from dmlqa.paths; a second spelling is how layouts drift apart."""
    names = ("catalog.jsonl", "lists.toml", "runs.jsonl", "schedule.json", "embeddings.sqlite", ".dmlqa-build.lock",
             "manifest.sqlite", "documents.sqlite", "run-in-progress.json", ".dmlqa-schedule.lock",
             "dmlqa-library.json")
    spelled = defaultdict(list)
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        for file_name in names:
            if re.search(rf"[\"']{re.escape(file_name)}[\"']", text):
                spelled[file_name].append(module)
    assert {k: v for k, v in spelled.items() if v != ["dmlqa.paths"]} == {}


def test_every_library_error_derives_from_the_tree() -> None:
    """Exceptions dmlqa defines are DmlqaErrors, so the CLI's one handler catches them all.

    A ``BaseException`` that is no ``Exception`` (the scheduler's stop signal, like KeyboardInterrupt)
    is control flow, not an error, and is left out.
    """
    import importlib

    from dmlqa.errors import DmlqaError

    loose = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
                 and any(isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception")) for b in n.bases)]
        if not names or module.startswith("dmlqa.app"):
            continue
        loaded = importlib.import_module(module)
        loose += [f"{module}.{n}" for n in names if issubclass(getattr(loaded, n), Exception)
                  and not issubclass(getattr(loaded, n), DmlqaError) and not n.startswith("_")]
    assert loose == []


def test_errors_module_draws_the_tree() -> None:
    from dmlqa import errors

    doc = errors.__doc__ or ""
    classes = [n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.DmlqaError)]
    assert classes and all(name in doc for name in classes), [n for n in classes if n not in doc]
