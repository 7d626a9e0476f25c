"""Issue 31, items 5-6: the ``smoke`` subset, a ``--help``/``--version`` that loads no engine, and
subcommand help in argument groups with examples."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# ----------------------------------------------------------------------------- the smoke subset
#: What the smoke subset must touch: each area by the test files that cover it.
AREAS = {
    "loading": {"test_checkpoints.py"},
    "scoring": {"test_engine.py", "test_plan_and_reduction.py", "test_all_tasks.py"},
    "CLI": {"test_cli.py"},
    "service": {"test_service.py"},
    "reports": {"test_reports.py", "test_compat.py", "test_meta_and_report.py"},
    "batch": {"test_input_reading.py", "test_output_lock.py", "test_batch.py"},
}
#: Markers of tests that are skipped on a machine without an extra, a browser, a GPU or weights.
SKIPPING_MARKERS = {"ray", "browser", "gpu", "real_weights", "skip", "skipif"}


def _mark_names(decorators) -> set[str]:
    """``pytest.mark.NAME`` and ``pytest.mark.NAME(...)`` of a decorator list."""
    names = set()
    for d in decorators:
        node = d.func if isinstance(d, ast.Call) else d
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
            names.add(node.attr)
    return names


def _smoke_tests() -> dict[str, list[ast.FunctionDef]]:
    """Test functions marked ``smoke``, by file name, read from the source (no collection)."""
    found: dict[str, list[ast.FunctionDef]] = {}
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_marks = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
                values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                module_marks |= _mark_names(values)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                if "smoke" in module_marks | _mark_names(node.decorator_list):
                    found.setdefault(path.name, []).append(node)
    return found


def _test_extra_packages() -> set[str]:
    """Distribution names the ``test`` extra installs (with the extras it names), normalised."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras, names, todo = project["optional-dependencies"], set(), ["test"]
    while todo:
        for req in extras[todo.pop()]:
            name = re.split(r"[<>=\[ ;]", req, maxsplit=1)[0].lower().replace("-", "_")
            if name == "unieval_local":
                todo += re.search(r"\[(.*)\]", req).group(1).split(",")
            else:
                names.add(name)
    return names


def _module_level_skips(path: Path) -> list[str]:
    """Module-level ``pytest.importorskip(NAME)`` of a module the ``test`` extra does not install:
    with it missing, every test of the module is skipped at import."""
    installed = _test_extra_packages()
    skips = []
    for node in ast.walk(ast.Module(body=[n for n in ast.parse(path.read_text(encoding="utf-8")).body
                                          if isinstance(n, (ast.Assign, ast.Expr))], type_ignores=[])):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("importorskip"):
            module = ast.literal_eval(node.args[0]).split(".")[0]
            if module not in installed:
                skips.append(ast.unparse(node))
    return skips


@pytest.mark.smoke
def test_the_smoke_marker_is_registered_and_says_how_to_enable_ray_and_chromium():
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    by_name = {m.split(":", 1)[0]: m for m in markers}
    assert "smoke" in by_name
    assert ".[test,ray]" in by_name["ray"]  # the extra to install
    assert "chromium" in by_name["browser"] and "apt-get install" in by_name["browser"]


@pytest.mark.smoke
def test_the_smoke_subset_has_twenty_tests_across_every_area_and_none_that_can_be_skipped():
    found = _smoke_tests()
    assert sum(len(v) for v in found.values()) >= 20
    for area, files in AREAS.items():
        assert files & set(found), f"no smoke test covers {area} ({sorted(files)})"
    for name, tests in found.items():
        skips = _module_level_skips(TESTS / name)
        assert not skips, f"{name} holds smoke tests but skips as a whole at import: {skips}"
        for t in tests:
            marks = _mark_names(t.decorator_list) & SKIPPING_MARKERS
            assert not marks, f"{name}::{t.name} is smoke but marked {sorted(marks)}"
