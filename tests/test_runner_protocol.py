"""Every runner implementation satisfies the engine's Runner protocol (names, types, shapes),
and the engine layer's boundaries hold: only the package root and the CLI import the API,
runners are never probed for capabilities."""

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from unieval_local.models.cache import CachedRunner, ScoreCache
from unieval_local.models.checkpoints import resolve_checkpoint
from unieval_local.config import RunConfig
from unieval_local.engine import Runner
from unieval_local.registry.evaluators import EVALUATORS
from unieval_local.models.t5.runner import T5Runner, load_t5_model

from conftest import ROOT, FakeRunner

PROMPTS = ["question: Is this a fluent paragraph? </s> paragraph: A short one.",
           "question: Is this a fluent paragraph? </s> paragraph: A short one.",  # a duplicate
           "question: Is this a coherent summary to the document? </s> summary: Words. </s> document: " + "x " * 80]


@pytest.fixture(params=["t5", "cached-t5", "fake", "cached-fake"])
def runner(request, tiny_ckpt, tmp_path):
    if request.param.endswith("fake"):
        inner = FakeRunner(lambda p: (len(p) % 10) / 10)
    else:
        inner = T5Runner(load_t5_model(resolve_checkpoint("unieval-sum", tiny_ckpt), "cpu", "float32"),
                         evaluator=EVALUATORS["unieval-sum"], fingerprint="f" * 64)
    if request.param.startswith("cached"):
        return CachedRunner(inner, ScoreCache(tmp_path / "cache"), RunConfig(), EVALUATORS["unieval-sum"])
    return inner


def test_every_runner_satisfies_the_protocol(runner):
    assert isinstance(runner, Runner)  # explicitly: each class subclasses the Protocol
    assert Runner in type(runner).__mro__
    assert isinstance(runner.name, str) and runner.name and isinstance(runner.fingerprint, str)
    params = inspect.signature(runner.score).parameters
    assert params["max_length"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["on_batch"].kind is inspect.Parameter.KEYWORD_ONLY and params["on_batch"].default is None
    seen = []
    p_yes, n_tokens = runner.score(PROMPTS, max_length=32, on_batch=lambda done, total: seen.append((done, total)))
    assert p_yes.dtype == np.float64 and p_yes.shape == (3,) and ((0 <= p_yes) & (p_yes <= 1)).all()
    assert n_tokens.dtype == np.int64 and n_tokens.shape == (3,) and n_tokens[2] > 32  # untruncated count
    assert p_yes[0] == p_yes[1] and n_tokens[0] == n_tokens[1]
    counts, plain = runner.count(PROMPTS[:1]), runner.count_plain(PROMPTS[:1])
    assert isinstance(counts, list) and counts[0] == plain[0] + 1 == n_tokens[0]  # the final EOS
    cut = runner.cut("alpha beta gamma delta", 2)
    assert isinstance(cut, int) and 0 < cut < len("alpha beta gamma delta")
    if not isinstance(runner, CachedRunner) or runner.misses:
        assert seen and seen[-1][0] == seen[-1][1] == 2  # two distinct prompts


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_only_the_package_root_and_the_cli_import_the_api():
    package = ROOT / "unieval_local"
    importers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                       if {".api", "..api", "unieval_local.api"} & _imports(p))
    # the CLI is a package (cli/): its commands may build a Scorer (verify --known-answers does); the
    # framework hooks (integrations/, issue 45) hold the public Scorer, one per process, as a user would
    assert {p for p in importers if not p.startswith(("cli/", "integrations/"))} == {"__init__.py"}
    assert [p for p in importers if p.startswith("integrations/")] == ["integrations/shared.py"]


def test_no_capability_probing_of_runners():
    package = ROOT / "unieval_local"
    offenders = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        module_level = {id(n) for n in tree.body}  # a module's __getattr__ (PEP 562: the lazy package root) proxies no runner
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
                    and node.args and isinstance(node.args[0], ast.Name) and "runner" in node.args[0].id.lower()):
                offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__" and id(node) not in module_level:
                offenders.append(f"{path.name}:{node.lineno} __getattr__")
    assert offenders == []


def test_the_forward_that_ran_is_signed_and_keys_the_cache(tiny_ckpt, tmp_path):
    """A fast forward that falls back to the model's own (a checkpoint whose layout the fast path
    does not know) signs as ff:off and keys the cache as plain; scores stay the same."""
    import json

    from unieval_local import Scorer

    example = [{"target": "The park opens in May.", "source": "The council approved the park. It opens in May."}]
    scorer = Scorer(model=str(tiny_ckpt), device="cpu")
    fast = scorer.score(example, aspect="coherence")
    runner = scorer.runner("unieval-sum")
    assert runner.forward == "fast" and "ff:off" not in str(scorer.signature("summarization", "coherence"))
    model = runner.t5
    try:
        model.fast_ok = False  # as for a checkpoint without the T5 block layout
        fallback = Scorer(model=str(tiny_ckpt), device="cpu", cache_dir=tmp_path / "cache")
        plain = fallback.score(example, aspect="coherence")
        cached = fallback.runner("unieval-sum")
        assert cached.forward == "plain" and json.loads(cached._context)["fast_forward"] is False
        assert "|ff:off" in str(fallback.signature("summarization", "coherence"))
        assert plain.examples[0].value == pytest.approx(fast.examples[0].value, abs=1e-6)
    finally:
        model.fast_ok = True


def test_a_runner_that_cannot_generate_says_so(tiny_ckpt):
    """Generation is a declared capability: a T5 runner asked for a chat prompt or a generation
    raises CheckpointError naming it (the claims and reasons code relies on this, never on hasattr)."""
    from unieval_local import Scorer
    from unieval_local.errors import CheckpointError

    runner = Scorer(model=str(tiny_ckpt), device="cpu").runner("unieval-sum")
    for call in (lambda: runner.chat_prompt([{"role": "user", "content": "x"}]),
                 lambda: runner.generate(["x"], max_new_tokens=4)):
        with pytest.raises(CheckpointError, match=r"runner cannot generate text \(only a causal-lm instruct model"):
            call()
