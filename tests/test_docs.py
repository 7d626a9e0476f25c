"""The documentation: the site builds offline and strict, its generated references are whole, and
every example of README.md and docs/ runs against generated checkpoints.

Conventions of the pages (docs/development.md points writers here):

- a ```` ```bash ```` block runs, line by line, in a working folder of its own page: ``unieval-local``
  lines in this process (``unieval_local.cli.main``: one import of torch for the whole suite),
  ``python scripts/make_test_checkpoint.py DEST ...`` from a per-session cache (the checkpoint is
  built once per argument list and linked where the example expects it, with what the script
  writes beside it: HHEM's foundation ``flan-t5-base/``), anything else by bash
  (``export`` carries over to the next lines);
- a ```` ```python ```` block is exec'd, the page's blocks sharing one namespace;
- a block titled ``Output`` is the stdout of the block above it, compared line by line (numbers to
  :data:`TOLERANCE`, 1e-5, the float32 parity tolerance the docs promise: the last digits differ
  across CPUs, 1.2e-6 measured between AVX-512 and AVX2, so a tighter comparison fails on another CPU; a line ``...`` stands for any lines); a block titled ``Error, exit N`` is its stderr and
  its exit status;
- a block titled with a file name (``quick.jsonl``) is written into the working folder;
- other blocks are shown only.

What cannot run here is in :data:`SKIP` with its reason; its ``unieval-local`` lines are still
parsed by the real argument parser (a flag that no longer exists fails), its Python compiled.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: (page, a substring of the block) -> why the block cannot run in the test suite. Its
#: ``unieval-local`` lines are parsed (dry run); its Python is compiled.
SKIP: dict[tuple[str, str], str] = {
    ("README.md", "pip install"): "installs packages (network, GPU wheels)",
    ("README.md", "unieval-local download"): "downloads from the Hugging Face hub",
    ("README.md", "python3 -m venv"): "creates a virtual environment and installs into it",
    ("README.md", "python -m pytest"): "the test suite itself",
    ("README.md", "convert_summeval.py"): "1,600 SummEval records: minutes of CPU (the quick start runs the same command on 2 records)",
    ("README.md", "unieval-local serve"): "a long-running server (tests/test_service.py starts real ones)",
    ("getting-started.md", "pip install"): "installs packages (network, GPU wheels)",
    ("getting-started.md", "unieval-local download"): "downloads from the Hugging Face hub",
    ("scoring.md", "convert_summeval.py"): "1,600 SummEval records: minutes of CPU",
    ("checkpoints.md", "unieval-local download"): "downloads from the Hugging Face hub",
    ("checkpoints.md", "unieval-local verify ~/unieval-home"): "needs the downloaded official checkpoints",
    ("evaluators.md", "unieval-local download"): "downloads from the Hugging Face hub",
    ("evaluators.md", "qags_support.jsonl"): "needs MiniCheck's official weights (3 GB)",
    ("batch.md", "unieval-local score out/summeval.jsonl --aspect all --shard"): "1,600 SummEval records x 4 shards",
    ("batch.md", "sbatch"): "needs a SLURM cluster",
    ("training.md", "torchrun --standalone"): "several GPUs (tests/test_train_distributed.py runs two CPU processes)",
    ("training.md", "sbatch --gres"): "needs a SLURM cluster",
    ("batch.md", "--engine ray"): "needs a Ray cluster (tests/test_ray.py runs a local one)",
    ("speed.md", "bench-ckpt"): "a benchmark: minutes of CPU at T5-large widths",
    ("claims-and-reasons.md", "--fit claims"): "a 2-minute fit; tests/test_generation.py fits and generates with the same stand-in, "
    "tests/test_claims_aspect.py runs fact/claims with a generator",
    ("speed.md", "bench_generate.py"): "a benchmark: minutes of CPU (generation at three widths and batch sizes)",
    ("long-inputs.md", "convert_qmsum.py"): "35 QMSum meetings: many minutes of CPU",
    ("serving.md", "pip install"): "installs packages",
    ("integrations.md", "pip install"): "installs packages (the integrations extra)",
    ("serving.md", "unieval-local serve"): "a long-running server (tests/test_service.py starts real ones)",
    ("serving.md", "curl"): "needs a running server (tests/test_service.py sends these requests)",
    ("serving.md", "requests.post"): "needs a running server (tests/test_service.py sends this request)",
    ("reports/index.md", "convert_qmsum.py"): "35 QMSum meetings: many minutes of CPU",
    ("reports/index.md", "asyncio.run"): "tests/test_compat.py runs this example as it is (tests/data/seed/)",
    ("calibration.md", "fit_rating_cutpoints.py"): "1,600 SummEval records scored first: minutes of CPU",
    ("meta-evaluation.md", "convert_summeval_unieval.py"): "reads and converts 1,600 records; tests/test_meta_and_report.py checks the table",
    ("meta-evaluation.md", "out/system_a.jsonl"): "needs three scored outputs of your systems",
    ("meta-evaluation.md", "out/summeval_ev.jsonl"): "1,600 SummEval records with evidence: minutes of CPU",
    ("meta-evaluation.md", "topical_chat_result.json"): "bootstrap over Topical-Chat: tens of CPU seconds (tests/test_meta_and_report.py)",
    ("languages.md", "zh_calls.jsonl"): "needs mdeberta-nli's weights and your own call records",
    ("speed.md", "bench_precision.py"): "a benchmark: every evaluator's stand-in in two dtypes, minutes of CPU",
    ("concepts.md", "records.jsonl --aspects-config"): "your own records",
    ("concepts.md", "topical_chat.json --task dialogue"): "the whole Topical-Chat, SF-RES and QAGS-XSum files: minutes of CPU",
    ("development.md", "python3 -m venv"): "creates a virtual environment and installs into it",
    ("development.md", "python -m pytest"): "the test suite itself",
}

#: pages written by docs/gen_ref.py at build time (checked by the build tests, not run)
GENERATED = ("reference/",)


@dataclass
class Block:
    lang: str
    title: str | None
    text: str
    line: int


@dataclass
class Page:
    name: str
    path: Path
    blocks: list[Block] = field(default_factory=list)


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with their language and ``title="..."``."""
    blocks, lines = [], path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\w*)\s*(.*)$", lines[i])
        if m:
            indent, lang, attrs = m.groups()
            title = re.search(r'title="([^"]*)"', attrs)
            body, start = [], i + 1
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            blocks.append(Block(lang, title.group(1) if title else None, "\n".join(body), start))
        i += 1
    return blocks


def pages() -> list[Page]:
    found = [Page("README.md", ROOT / "README.md")]
    for path in sorted(DOCS.rglob("*.md")):
        name = path.relative_to(DOCS).as_posix()
        if not name.startswith(GENERATED):
            found.append(Page(name, path))
    for page in found:
        page.blocks = read_blocks(page.path)
    return found


def _skip_reason(page: str, block: Block) -> str | None:
    for (where, needle), reason in SKIP.items():
        if where == page and needle in block.text:
            return reason
    return None


#: How close a shown number must be to a fresh run's (docs/speed.md, Reproducibility).
TOLERANCE = 1e-5

NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+e[-+]?\d+")


def same_line(want: str, got: str) -> bool:
    """Equal but for numbers with a decimal point or exponent, which agree to :data:`TOLERANCE`; ``...`` inside
    a line stands for any text (a path of the machine, a usage line that grows)."""
    if "..." in want:
        pattern = ".*".join(re.escape(part) for part in want.split("..."))
        return re.fullmatch(pattern, got) is not None
    if NUMBER.sub("#", want) != NUMBER.sub("#", got):
        return False
    return all(math.isclose(float(a), float(b), rel_tol=0, abs_tol=TOLERANCE)
               for a, b in zip(NUMBER.findall(want), NUMBER.findall(got)))


def matches(want: str, got: str) -> bool:
    """``got`` has ``want``'s lines in order; a ``...`` line of ``want`` stands for any lines."""
    want_lines = [w.rstrip() for w in want.strip("\n").split("\n")]
    got_lines = [g.rstrip() for g in got.strip("\n").split("\n")]

    def walk(i: int, j: int) -> bool:
        if i == len(want_lines):
            return j == len(got_lines)
        if want_lines[i] == "...":
            return any(walk(i + 1, k) for k in range(j, len(got_lines) + 1))
        return j < len(got_lines) and same_line(want_lines[i], got_lines[j]) and walk(i + 1, j + 1)

    return walk(0, 0)


def logical_lines(script: str) -> list[str]:
    """Lines with their ``\\`` continuations joined; blank and comment-only lines dropped."""
    out, pending = [], ""
    for line in script.split("\n"):
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line.strip() and not line.strip().startswith("#"):
            out.append(line.strip())
    return out


def words(line: str) -> list[str]:
    """shlex words of a line, its comment dropped (operators kept as words)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "&", "2>", "(", ")"}


def dry_run(line: str) -> None:
    """Parse one ``unieval-local`` line with the real parser; a flag that no longer exists fails."""
    from unieval_local.cli import _build_parser

    argv = words(line)[1:]
    cut = next((i for i, w in enumerate(argv) if w in OPERATORS), len(argv))
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            _build_parser().parse_args(argv[:cut])
        except SystemExit as exc:
            assert exc.code == 0, f"{line!r} does not parse: {err.getvalue()}"


class Runner:
    """Runs one page's blocks in ``work`` (see the module docstring)."""

    def __init__(self, work: Path, ckpt_cache: Path, env: dict[str, str]):
        self.work, self.cache, self.env = work, ckpt_cache, env
        self.namespace: dict = {"__name__": "__docs__"}
        self.stdout = self.stderr = ""
        self.status = 0

    def _expand(self, rest: str) -> list[str]:
        done = subprocess.run(["bash", "-c", f"printf '%s\\0' {rest}"], cwd=self.work, env=self.env,
                              capture_output=True, text=True, check=True)
        return done.stdout.split("\0")[:-1]

    def _cli(self, line: str) -> None:
        from unieval_local.cli import main

        argv = self._expand(line.split(None, 1)[1] if " " in line else "")
        out, err = io.TextIOWrapper(io.BytesIO(), write_through=True), io.TextIOWrapper(io.BytesIO(), write_through=True)
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        os.environ.clear()
        os.environ.update(self.env)
        os.chdir(self.work)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    self.status = main(argv) or 0
                except SystemExit as exc:
                    self.status = exc.code if isinstance(exc.code, int) else 2
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        self.stdout = out.buffer.getvalue().decode()
        self.stderr = err.buffer.getvalue().decode()

    def _checkpoint(self, line: str) -> None:
        from make_test_checkpoint import main as make

        argv = self._expand(line.split(None, 2)[2])
        dest, rest = Path(argv[0]), argv[1:]
        key = re.sub(r"[^A-Za-z0-9.,=-]+", "_", "_".join(rest)) or "default"
        built = self.cache / key / "ckpt"
        if not built.exists():
            with contextlib.redirect_stdout(io.StringIO()):
                assert make([str(built), *rest]) == 0
        target = self.work / dest if not dest.is_absolute() else dest
        # what the script wrote beside the folder (HHEM's foundation flan-t5-base/) is linked beside it too
        beside = [(p.name, p) for p in sorted((self.cache / key).iterdir()) if p.name != "ckpt"]
        for name, source in [(target.name, built), *beside]:
            link = target.parent / name
            if link.is_symlink() or link.exists():
                link.unlink() if link.is_symlink() else shutil.rmtree(link)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source, target_is_directory=True)
        self.stdout, self.stderr, self.status = f"wrote {dest}\n", "", 0

    def _shell(self, line: str) -> None:
        done = subprocess.run(["bash", "-c", f"{line}\nstatus=$?\nenv -0 > .docs_env\nexit $status"],
                              cwd=self.work, env=self.env, capture_output=True, text=True, timeout=300)
        self.stdout, self.stderr, self.status = done.stdout, done.stderr, done.returncode
        saved = self.work / ".docs_env"
        if saved.exists():
            self.env = dict(kv.split("=", 1) for kv in saved.read_text().split("\0") if "=" in kv)
            saved.unlink()

    def bash(self, script: str, expect_status: int = 0) -> None:
        for line in logical_lines(script):
            w = words(line)
            if w[0] == "unieval-local" and not OPERATORS.intersection(w):
                self._cli(line)
            elif w[:2] == ["python", "scripts/make_test_checkpoint.py"] and not OPERATORS.intersection(w):
                self._checkpoint(line)
            else:
                self._shell(line)
            if self.status != expect_status:
                raise AssertionError(f"{line!r} exited {self.status} (expected {expect_status})\n"
                                     f"stdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}")

    def python(self, code: str) -> None:
        out = io.StringIO()
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        os.environ.update(self.env)
        os.chdir(self.work)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, "<docs>", "exec"), self.namespace)
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        self.stdout, self.stderr, self.status = out.getvalue(), "", 0


def _expected_status(block: Block | None) -> int:
    if block is not None and block.title and block.title.startswith("Error"):
        m = re.search(r"exit (\d+)", block.title)
        return int(m.group(1)) if m else 1
    return 0


def run_page(page: Page, work: Path, ckpt_cache: Path, env: dict[str, str]) -> list[str]:
    """Run every block of ``page``; returns the skipped blocks with their reasons."""
    runner = Runner(work, ckpt_cache, env)
    skipped, previous = [], None
    for i, block in enumerate(page.blocks):
        following = page.blocks[i + 1] if i + 1 < len(page.blocks) else None
        where = f"{page.name}:{block.line}"
        if block.title in ("Output",) or (block.title or "").startswith("Error"):
            assert previous is not None, f"{where}: an output block under no example"
            got = runner.stdout if block.title == "Output" else runner.stderr
            assert matches(block.text, got), f"{where}: the page shows\n{block.text}\nbut the example printed\n{got}"
            continue
        if block.title:
            (work / block.title).write_text(block.text + "\n", encoding="utf-8")
            continue
        if block.lang not in ("bash", "python"):
            continue
        reason = _skip_reason(page.name, block)
        if reason:
            skipped.append(f"{where}: {reason}")
            if block.lang == "bash":
                for line in logical_lines(block.text):
                    if line.startswith("unieval-local "):
                        dry_run(line)
            else:
                compile(block.text, where, "exec")
            previous = None
            continue
        try:
            if block.lang == "bash":
                runner.bash(block.text, _expected_status(following))
            else:
                runner.python(block.text)
        except Exception as exc:
            raise AssertionError(f"{where}: the example failed: {exc}") from exc
        previous = block
    return skipped


@pytest.fixture(scope="module")
def ckpt_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs_ckpts")


@pytest.fixture(scope="module")
def quick_jsonl() -> str:
    block = next(b for b in read_blocks(DOCS / "getting-started.md") if b.title == "quick.jsonl")
    return block.text + "\n"


def _workdir(tmp_path: Path, shared_data: Path, quick: str, ckpt_cache: Path) -> tuple[Path, dict[str, str]]:
    """A working folder as the pages expect it: scripts/, configs/, ../shared/data, quick.jsonl,
    a generated unieval-sum at out/tck and in the home folder out/home (UNIEVAL_LOCAL_HOME)."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(shared_data, target_is_directory=True)
    for name in ("scripts", "configs", "tests"):
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    (work / "quick.jsonl").write_text(quick, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNIEVAL_LOCAL")}
    env.update(HF_HUB_OFFLINE="1", UNIEVAL_SHARED_DATA=str(shared_data), UNIEVAL_LOCAL_HOME=str(work / "out/home"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYTHONHASHSEED="0")
    runner = Runner(work, ckpt_cache, env)
    runner.bash("python scripts/make_test_checkpoint.py out/tck --layout v1.1 --evaluator unieval-sum\n"
                "python scripts/make_test_checkpoint.py out/home/unieval-sum --layout v1.1 --evaluator unieval-sum")
    return work, runner.env


PAGES = pages()

#: page -> the optional packages its examples import (the page is skipped where one is missing: the
#: ``integrations`` extra is not in ``test``, so the version legs lack it)
NEEDS: dict[str, tuple[str, ...]] = {"integrations.md": ("evaluate", "inspect_ai", "lm_eval")}


@pytest.mark.parametrize("page", PAGES, ids=[f"docs-{p.name}" if p.name != "README.md" else "readme" for p in PAGES])
def test_docs_examples_run(page, tmp_path, shared_data, quick_jsonl, ckpt_cache):
    """Every example of the page runs and prints what the page shows (module docstring)."""
    for module in NEEDS.get(page.name, ()):
        pytest.importorskip(module, reason=f"{page.name} needs {module}: pip install -e '.[integrations]'")
    work, env = _workdir(tmp_path, shared_data, quick_jsonl, ckpt_cache)
    skipped = run_page(page, work, ckpt_cache, env)
    assert all(": " in s for s in skipped)


def test_docs_skip_list_names_real_blocks():
    """Every entry of SKIP matches a block of its page (a stale entry would hide nothing)."""
    by_name = {p.name: p for p in PAGES}
    for (where, needle) in SKIP:
        assert where in by_name, where
        assert any(needle in b.text for b in by_name[where].blocks), (where, needle)


def test_docs_output_comparison_fails_on_a_stale_number():
    """The comparison the pages rely on: 1e-5 on numbers, exact text, '...' for any lines."""
    assert matches('{"coherence": 0.3687803761481707}', '{"coherence": 0.36878051489671426}')  # AVX2 vs AVX-512
    assert matches('{"coherence": 0.36879}', '{"coherence": 0.36878051489671426}')
    assert not matches('{"coherence": 0.36876}', '{"coherence": 0.36878051489671426}')
    assert not matches('{"fluency": 0.3687805}', '{"coherence": 0.3687805}')
    assert matches("a\n...\nz", "a\nb\nc\nz") and not matches("a\nz", "a\nb\nz")


def test_docs_output_blocks_are_titled_so_they_are_compared():
    """A block fenced as ```Output (a language, not a title) would never be compared: every page
    writes its outputs as ```text title="Output"``` (or an Error title)."""
    loose = [f"{page.name}:{b.line}" for page in PAGES for b in page.blocks
             if b.lang.lower() in ("output", "error", "stdout", "stderr") and b.title is None]
    assert not loose, f"output blocks fenced by language, not titled (never compared): {loose}"


def test_readme_is_at_most_300_lines():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").split("\n")) <= 300


def test_docs_languages_page_splitter_table_is_the_code_s():
    """The Languages page's splitter table is what splitter_table_markdown() makes today."""
    from unieval_local.registry.evaluators import EVALUATORS
    from unieval_local.text.sentences import splitter_table, splitter_table_markdown

    page = (DOCS / "languages.md").read_text(encoding="utf-8")
    start = page.index("| language | splitter |")
    table = page[start:page.index("\n\n", start)]
    want = splitter_table_markdown(splitter_table({n: e.languages for n, e in EVALUATORS.items()}))
    assert table == want, (
        "docs/languages.md's splitter table is stale: replace it with the output of\n"
        "python -c 'from unieval_local.text.sentences import splitter_table as t, splitter_table_markdown as m; "
        "from unieval_local.registry.evaluators import EVALUATORS as E; "
        "print(m(t({n: e.languages for n, e in E.items()})))'")


def test_docs_evaluators_table_is_the_registry_s():
    """Each evaluator of the registry has a row on the Evaluators page with its backend, licence and size."""
    from unieval_local.registry.evaluators import EVALUATORS

    page = (DOCS / "evaluators.md").read_text(encoding="utf-8")
    rows = [line for line in page.split("\n") if line.startswith("| `")]
    for name, ev in EVALUATORS.items():
        short = re.sub(r"q[1-6]$", "q1", name)
        row = next((r for r in rows if r.startswith(f"| `{short}`")), None)
        assert row is not None, f"{name} has no row on docs/evaluators.md"
        cells = [c.strip() for c in row.split(" | ")]
        assert cells[1].startswith(f"`{ev.backend}`"), (name, cells[1])
        assert cells[3] == ev.licence, (name, cells[3], ev.licence)
        if ev.size_gb is not None:
            assert cells[4].startswith(f"{ev.size_gb} GB"), (name, cells[4], ev.size_gb)


def test_readme_evaluators_table_is_the_registry_s():
    """Each evaluator of the registry is in the README's table with its licence and size."""
    from unieval_local.registry.evaluators import EVALUATORS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.split("\n") if line.startswith("| `")]
    for name, ev in EVALUATORS.items():
        short = re.sub(r"q[1-6]$", "q1", re.sub(r"^unieval-(dialog|fact)$", "unieval-sum", name))
        row = next((r for r in rows if r.startswith(f"| `{short}`")), None)
        assert row is not None, f"{name} has no row in README.md's evaluator table"
        cells = [c.strip() for c in row.split(" | ")]
        if ev.hub_id:
            assert cells[2] == ev.licence, (name, cells[2], ev.licence)
        if ev.size_gb is not None:
            assert cells[3].startswith(f"{ev.size_gb} GB"), (name, cells[3], ev.size_gb)


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    """``mkdocs build --strict`` into a temporary folder (offline)."""
    site = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return site


def test_docs_site_builds_strict_and_offline(built_site):
    """The site builds with --strict, and no page loads anything from another host."""
    for html in built_site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        assert not re.search(r'<(?:script|link|img)[^>]+(?:src|href)="(?:https?:)?//', text), html
        assert "fonts.googleapis" not in text, html


def test_docs_cli_page_has_every_flag_of_every_subcommand(built_site):
    """Each subcommand has a section, and each of its option strings is in it."""
    import argparse
    import html as html_lib

    from unieval_local.cli import _build_parser

    page = html_lib.unescape((built_site / "reference" / "cli" / "index.html").read_text(encoding="utf-8"))
    sub = next(a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    names = list(sub.choices)
    for k, (name, parser) in enumerate(sub.choices.items()):
        start = page.index(f'id="unieval-local-{name}"')
        end = page.index(f'id="unieval-local-{names[k + 1]}"') if k + 1 < len(names) else len(page)
        section = page[start:end]
        for action in parser._actions:
            for flag in action.option_strings:
                assert re.search(rf"<code>(?:[^<]*[ ,])?{re.escape(flag)}(?:[ ,][^<]*)?</code>", section), \
                    f"{name} {flag} missing from the CLI page"


def test_docs_http_page_has_every_path(built_site):
    """Each path and method of the service's OpenAPI schema has a section on the HTTP page."""
    sys.path.insert(0, str(DOCS))
    try:
        from gen_ref import openapi_schema
    finally:
        sys.path.remove(str(DOCS))
    page = (built_site / "reference" / "http" / "index.html").read_text(encoding="utf-8")
    for path, methods in openapi_schema()["paths"].items():
        for method in methods:
            assert f"{method.upper()} {path}" in page, (method, path)


def test_docs_evaluators_page_scores_with_every_evaluator():
    """Issue 37, item 7: each evaluator beyond UniEval's own (whose examples are the README's and
    Getting started's) has a scoring command on the Evaluators page that the docs tests run (not in
    SKIP), with its checkpoint named by ``--model NAME=DIR`` (one SEAHORSE question stands for six)."""
    from unieval_local.registry.evaluators import EVALUATORS

    page = next(p for p in PAGES if p.name == "evaluators.md")
    runnable = [b.text for b in page.blocks if b.lang == "bash" and _skip_reason(page.name, b) is None]
    for name in EVALUATORS:
        if name.startswith("unieval-"):
            continue
        pattern = r"seahorse-large-q[1-6]" if name.startswith("seahorse-large-q") else re.escape(name)
        assert any(re.search(rf"^unieval-local score .*--model {pattern}=", line, re.M)
                   for text in runnable for line in logical_lines(text)), f"{name}: no scoring example run"


def test_docs_say_how_to_read_the_built_site():
    """Issue 37, item 7: opened from file:// the built site's search stays at "Initializing search";
    where the docs say to build the site they say to read it through a server."""
    for path in (ROOT / "README.md", DOCS / "development.md", ROOT / "mkdocs.yml"):
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert "python -m http.server -d site" in text, path
        assert "Initializing search" in text, path


def test_docs_flag_tables_are_generated_on_the_site(built_site):
    """Issue 37, item 7: the pages' flag tables are filled at build time (tests/test_docs_flags.py
    checks every flag): the serving page lists the two its hand-kept table had missed."""
    import html as html_lib

    page = html_lib.unescape((built_site / "serving" / "index.html").read_text(encoding="utf-8"))
    for flag in ("--rating-config FILE.yaml", "--consistency-aspect TASK/ASPECT"):
        assert f"<code>{flag}</code>" in page, flag
    for name in ("serving", "scoring", "reports"):
        assert "<!-- flags:" not in (built_site / name / "index.html").read_text(encoding="utf-8"), name
