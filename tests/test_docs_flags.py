"""Issue 37, item 7: the docs' flag tables are generated from the argparse parsers when the site
is built (``<!-- flags: COMMAND -->`` lines, filled by ``docs/gen_ref.py``), never kept by hand:
every flag of the command is in its table, and no page holds a hand-kept one."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def gen_ref():
    sys.path.insert(0, str(DOCS))
    try:
        import gen_ref
    finally:
        sys.path.remove(str(DOCS))
    return gen_ref


def _pages() -> dict[str, str]:
    return {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md"))
            if not p.relative_to(DOCS).as_posix().startswith("reference/")}


def _command(name: str) -> argparse.ArgumentParser:
    from unieval_local.cli import _build_parser

    sub = next(a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _render(gen_ref, name: str, text: str) -> str:
    """The page as the site shows it: the hook run on its Markdown."""
    return gen_ref.on_page_markdown(text, page=SimpleNamespace(file=SimpleNamespace(src_uri=name)), config={}, files=[])


def test_the_pages_with_flags_have_generated_tables():
    """serve, score and report flags are documented by generated tables on their pages."""
    pages = _pages()
    assert "<!-- flags: serve engine=brief -->" in pages["serving.md"]
    assert "<!-- flags: score -->" in pages["scoring.md"]
    assert "<!-- flags: report engine=brief -->" in pages["reports/index.md"]


def test_every_generated_table_has_every_flag_of_its_command(gen_ref):
    """Each marker becomes tables holding every option string of its command (those hidden from
    ``--help`` aside), each in a code span; the serving page has the two the issue found missing."""
    found = 0
    for name, text in _pages().items():
        for m in gen_ref.FLAGS_MARKER.finditer(text):
            found += 1
            table = gen_ref.flag_tables(m["command"], name, bool(m["brief"]))
            flags = [f for a in _command(m["command"])._actions if a.help != argparse.SUPPRESS
                     for f in a.option_strings]
            missing = [f for f in flags if not re.search(rf"`(?:[^`]*[ ,])?{re.escape(f)}(?:[ ,][^`]*)?`", table)]
            assert missing == [], f"{name}: {m[0]} lacks {missing}"
        rendered = _render(gen_ref, name, text)
        assert "<!-- flags:" not in rendered, name
    assert found >= 3
    serving = _render(gen_ref, "serving.md", _pages()["serving.md"])
    assert "`--rating-config FILE.yaml`" in serving and "`--consistency-aspect TASK/ASPECT`" in serving
    assert "](reference/cli.md#unieval-local-serve)" in serving  # the link from the engine-flags row
    report = _render(gen_ref, "reports/index.md", _pages()["reports/index.md"])
    assert "](../reference/cli.md#unieval-local-report)" in report


def test_a_marker_naming_no_command_fails_the_build(gen_ref):
    with pytest.raises(ValueError, match="no-such"):
        _render(gen_ref, "x.md", "<!-- flags: no-such -->")


def test_no_page_keeps_a_flag_table_by_hand():
    """A Markdown table whose first header cell is 'flag', 'argument' or 'option' is a hand-kept
    flag table: replace it with ``<!-- flags: COMMAND -->``."""
    for name, text in _pages().items():
        for line in text.split("\n"):
            if line.startswith("|"):
                first = line.strip("|").split("|")[0].strip().lower()
                assert first not in {"flag", "flags", "argument", "arguments", "option", "options"}, \
                    f"docs/{name} keeps a flag table by hand: {line[:80]}"
