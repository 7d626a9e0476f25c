"""The package's shape: imports point one way (down the layers of ARCHITECTURE), no import
cycle (lazy imports inside functions included; ``if TYPE_CHECKING:`` blocks excluded), torch
and transformers only under ``models/``, no module over 600 lines and no function over 120,
``__all__`` in every public module, and ``import unieval_local`` loads no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "unieval_local"

#: Layers, bottom (0) to top: a module may import its own layer or lower ones, never higher.
#: Top-level modules are named by their file, packages by their folder.
LAYERS: dict[str, int] = {
    # leaves: no imports of the package but each other
    "_version": 0, "errors": 0, "hashing": 0, "progress": 0, "extras": 0, "fields": 0, "config": 0,
    "settings": 0, "schema": 0, "records": 0, "locks": 0, "atomic": 0, "surrogates": 0, "notes": 0,
    "text": 1,        # sentences, prompts (PromptFormat), key points
    "analysis": 1,    # meta-evaluation, bootstrap, significance, cut points, HTML report: results only
    "registry": 2,    # tasks and aspects, evaluators, user aspects
    "pipeline": 3,    # validate, planning, fold, evidence
    "models": 4,      # Runner protocol, batching, checkpoints, cache, t5/
    "engine": 5, "claims": 5, "judges": 5,  # claims: fact/claims (decompose then verify); judges: judges that reason
    "requests": 6,    # Request, Scheduler
    "wire": 7,        # external shapes
    "reports": 8, "batch": 8, "training": 8,   # entry points (training: fine-tuning, ARCHITECTURE)
    "api": 9, "compat": 10, "service": 10, "cli": 11,
    "integrations": 10,  # evaluate module, Inspect scorer, lm-eval hooks over the Scorer (issue 45)
    "__init__": 12,   # the package root re-exports the public surface; nothing imports it
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """(imported module of the package, line) for every import of ``name`` (lazy ones too),
    the module as it resolves (``from .x import y`` where y is a submodule names it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if name != "__init__" else []
    base_pkg = here if is_pkg else here[:-1]
    modules = _modules()
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = base_pkg[: len(base_pkg) - (node.level - 1)] if node.level > 1 else base_pkg
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("unieval_local"):
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                sub = ".".join(target + [alias.name])
                found.append((sub if sub in modules else ".".join(target) or "__init__", node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("unieval_local"):
                    found.append((".".join(alias.name.split(".")[1:]) or "__init__", node.lineno))
    return found


def _layer(module: str) -> int:
    top = module.split(".")[0]
    assert top in LAYERS, f"{module}: not in a layer of tests/test_architecture.py LAYERS; add it there"
    return LAYERS[top]


def test_imports_point_down_the_layers():
    bad = []
    for name, path in _modules().items():
        for target, line in _imports(name, path):
            if target.split(".")[0] == name.split(".")[0] and target != "__init__":
                continue  # within one package or module: the cycle test checks those
            if _layer(target) > _layer(name):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name} (layer {_layer(name)}) imports "
                           f"{target} (layer {_layer(target)})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = {name: {t for t, _ in _imports(name, path) if t != name} for name, path in _modules().items()}
    # a package's __init__ that re-exports its own modules is not a cycle with them
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    seen: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(n: str) -> None:
        seen[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m not in graph:
                continue
            if seen.get(m) == 1:
                cycles.append(" -> ".join(stack[stack.index(m):] + [m]))
            elif m not in seen:
                visit(m)
        stack.pop()
        seen[n] = 2

    for n in sorted(graph):
        if n not in seen:
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_torch_and_transformers_only_under_models():
    bad = []
    for name, path in _modules().items():
        if name.split(".")[0] == "models":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{name}:{node.lineno}: {m}" for m in mods if m.split(".")[0] in ("torch", "transformers")]
    assert not bad, bad


def test_module_and_function_sizes():
    too_long = []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        n = text.count("\n")
        if n > 600:
            too_long.append(f"{name}: {n} lines (at most 600)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > 120:
                    too_long.append(f"{name}.{node.name}: {size} lines (at most 120)")
    assert not too_long, "\n".join(too_long)


def test_every_public_module_declares_all():
    missing = [name for name, path in _modules().items()
               if not any(p.startswith("_") for p in name.split(".")) and name != "__init__"
               and "__all__" not in path.read_text(encoding="utf-8")]
    assert not missing, f"modules without __all__: {missing}"


def test_import_of_the_package_loads_no_torch():
    code = ("import sys, unieval_local; "
            "print(sorted(m for m in ('torch', 'transformers', 'numpy.f2py', 'ray', 'fastapi') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("layer_name", sorted(LAYERS))
def test_each_layer_exists(layer_name):
    """A layer named in LAYERS is a module or package of the tree (the table cannot drift)."""
    assert (PACKAGE / f"{layer_name}.py").exists() or (PACKAGE / layer_name / "__init__.py").exists()


def test_the_doctests_of_the_package_pass():
    """Every ``>>>`` example in the package's docstrings runs and gives what it shows."""
    import doctest
    import importlib

    with_examples = sorted(name for name, path in _modules().items() if ">>>" in path.read_text(encoding="utf-8"))
    assert with_examples, "no module has a doctest: the test would check nothing"
    for name in with_examples:
        module = importlib.import_module("unieval_local" if name == "__init__" else f"unieval_local.{name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctest examples failed"
