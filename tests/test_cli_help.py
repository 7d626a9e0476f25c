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


# ----------------------------------------------------------------------------- a fast --help / --version
ENGINE_MODULES = ("torch", "transformers", "fastapi", "numpy", "pydantic")


@pytest.mark.smoke
@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_top_level_help_and_version_import_no_engine(argv):
    """Checked in a fresh interpreter (this one has them all loaded): ``sys.modules`` after the
    console script's entry point ran ``--help`` / ``--version`` (and the usage error of no command)."""
    import subprocess
    import sys

    code = ("import sys\nfrom unieval_local.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
            f"    pass\nprint(sorted(m for m in {ENGINE_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
    if argv == ["--version"]:
        from unieval_local import __version__
        assert out.stdout.startswith(f"unieval-local {__version__}\n")
    if argv == ["--help"]:
        from unieval_local.cli import COMMANDS
        assert all(f"    {name} " in out.stdout or f"    {name}\n" in out.stdout for name in COMMANDS)


@pytest.mark.smoke
def test_the_package_root_is_lazy_and_still_exports_every_public_name():
    import subprocess
    import sys

    code = ("import sys, unieval_local as u\nbefore = sorted(m for m in %r if m in sys.modules)\n"
            "names = {n: getattr(u, n).__module__ for n in u.__all__ if n != '__version__' and hasattr(getattr(u, n), '__module__')}\n"
            "print(before, 'pydantic' in sys.modules, u.api.__name__)" % (ENGINE_MODULES,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["[]", "True", "unieval_local.api"], out.stdout + out.stderr
    import unieval_local
    from unieval_local.api import Scorer, score
    from unieval_local.errors import UniEvalError
    from unieval_local.schema import UniEvalResult
    assert (unieval_local.Scorer, unieval_local.score, unieval_local.UniEvalError,
            unieval_local.UniEvalResult) == (Scorer, score, UniEvalError, UniEvalResult)
    assert set(unieval_local.__all__) <= set(dir(unieval_local))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        unieval_local.no_such_name


def test_each_commands_one_line_help_is_its_parsers_own():
    """The lazy top-level list (COMMANDS) says what each command's full parser says."""
    import argparse

    from unieval_local.cli import COMMANDS, _build_parser

    sub = next(a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert {a.dest: a.help for a in sub._choices_actions} == {name: line for name, (_, line) in COMMANDS.items()}
    assert list(sub.choices) == list(COMMANDS)


# ----------------------------------------------------------------------------- every command's --help
def _commands() -> dict[str, "argparse.ArgumentParser"]:
    import argparse

    from unieval_local.cli import _build_parser

    sub = next(a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _examples(parser) -> list[str]:
    """The example command lines of a command's epilog (``examples:`` then one per indented line)."""
    lines = (parser.epilog or "").splitlines()
    assert lines and lines[0] == "examples:", f"{parser.prog}: the epilog does not start with examples"
    return [line.strip() for line in lines[1:] if line.startswith("  ")]


def test_every_argument_of_every_command_has_a_help_string():
    import argparse

    missing = [f"{name} {a.option_strings[0] if a.option_strings else a.dest}"
               for name, p in _commands().items() for a in p._actions
               if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS
               and not (a.help or "").strip()]
    assert missing == []


def test_every_command_groups_its_arguments_and_ends_with_two_examples_and_its_docs_pages():
    import argparse
    import re

    for name, p in _commands().items():
        ungrouped = [a.dest for g in p._action_groups if g.title in ("positional arguments", "options")
                     for a in g._group_actions if not isinstance(a, argparse._HelpAction)]
        assert ungrouped == [], f"{name}: arguments outside a group: {ungrouped}"
        assert len([g for g in p._action_groups if g._group_actions]) >= 2, name  # options (-h) and >= 1 group
        found = _examples(p)
        assert len(found) == 2 and all(e.startswith(f"unieval-local {name} ") or e == f"unieval-local {name}"
                                       for e in found), (name, found)
        help_text = p.format_help()
        assert all(f"\n  {e}\n" in help_text for e in found), f"{name}: an example was re-wrapped"
        pages = re.findall(r"docs/[\w/.-]+\.md", p.epilog.split("\nmore: ", 1)[1])
        assert pages and all((ROOT / page).is_file() for page in pages), (name, pages)


def test_every_example_parses_with_the_commands_own_flags():
    import shlex

    from unieval_local.cli import _build_parser

    parser = _build_parser()
    for name, p in _commands().items():
        for example in _examples(p):
            args = parser.parse_args(shlex.split(example)[1:])  # SystemExit 2 on an unknown or malformed flag
            assert args.command == name


def test_report_format_meta_and_report_html_document_their_arguments():
    """The arguments the issue found undocumented, by what their help now says."""
    cmds = _commands()
    fmt = next(a for a in cmds["report"]._actions if a.dest == "report_format")
    assert all(f in fmt.help for f in fmt.choices) and "docs/reports/" in fmt.help
    meta = {a.dest: a.help for a in cmds["meta"]._actions}
    assert "score output" in meta["predictions"] and "seed" in meta["seed"]
    html = {a.dest: a.help for a in cmds["report-html"]._actions}
    assert "score output" in html["output_jsonl"] and "title" in html["title"]


# ----------------------------------------------------------------------------- a short score --help (issue 37, item 7)
def _help_output(argv: list[str]) -> str:
    import contextlib
    import io

    from unieval_local.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return out.getvalue()


def test_score_help_is_short_and_points_to_help_all(monkeypatch):
    """``score --help``: the common flags in at most 60 lines (an 80-column terminal), then where
    the others are; ``-h`` is the same."""
    monkeypatch.setenv("COLUMNS", "80")
    text = _help_output(["score", "--help"])
    assert len(text.splitlines()) <= 60, len(text.splitlines())
    assert _help_output(["score", "-h"]) == text
    for flag in ("--aspect", "--task", "--model", "--output", "--targets", "--resume", "--shard", "--help-all"):
        assert flag in text, flag
    assert "docs/reference/cli.md" in text
    assert "examples:\n  unieval-local score " in text


def test_score_help_all_lists_every_flag(monkeypatch):
    """``score --help-all`` is argparse's whole help: every option string of the command."""
    monkeypatch.setenv("COLUMNS", "80")
    text = _help_output(["score", "--help-all"])
    score = _commands()["score"]
    assert text == score.format_help()
    missing = [flag for a in score._actions for flag in a.option_strings if flag not in text]
    assert missing == []
    assert len(text.splitlines()) > 60
