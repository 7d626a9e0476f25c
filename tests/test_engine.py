"""The throughput engine is exact: every optimisation against the plain float64 reference,
out-of-memory back-off, and the persistent score cache."""

import random
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from unieval_local import Scorer
from unieval_local.models.cache import ScoreCache
from unieval_local.models.checkpoints import resolve_checkpoint
from unieval_local.registry.evaluators import EVALUATORS
from unieval_local.models.t5.runner import T5Runner, load_t5_model
from unieval_local.models.batching import plan_batches

from conftest import FakeRunner, fake_factory

TOL = 1e-5


@pytest.fixture(scope="module")
def mixed_prompts(summeval_records):
    """40 prompts of mixed lengths: long (some over 1,024 tokens, truncated), short, duplicated."""
    recs = summeval_records
    prompts = [f"question: Is this a coherent summary to the document? </s> summary: {r['target']} </s> document: {r['source']}"
               for r in recs[:12]]
    prompts += [f"question: Is this a fluent paragraph? </s> paragraph: {r['target'][: 20 + 9 * i]}" for i, r in enumerate(recs[12:28])]
    prompts += [f"question: Is this summary relevant to the reference? </s> summary: {r['target']} </s> reference: {r['references'][0]}"
                for r in recs[28:34]]
    prompts += prompts[:3] + prompts[15:18]  # duplicates
    random.Random(0).shuffle(prompts)
    return prompts


def make_runner(ckpt, **knobs):
    """A T5 runner over the process-wide model of ``ckpt`` (knobs: batch_tokens, fast_forward ...)."""
    model = load_t5_model(resolve_checkpoint("unieval-sum", ckpt), "cpu", "float32")
    return T5Runner(model, evaluator=EVALUATORS["unieval-sum"], fingerprint="t", **knobs)


@pytest.fixture(scope="module")
def runner(tiny_ckpt):
    return make_runner(tiny_ckpt)


@pytest.fixture(scope="module")
def want(reference, mixed_prompts):
    return np.array([reference(p) for p in mixed_prompts])


@pytest.mark.smoke
def test_inputs_mix_truncated_and_short(runner, mixed_prompts):
    full = [len(x) for x in runner.t5.tokenizer(mixed_prompts).input_ids]
    assert max(full) > 1024 and min(full) < 40 and len(set(mixed_prompts)) < len(mixed_prompts)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("batch_tokens", [1, 1500, 10**6])
def test_every_engine_setting_equals_reference(tiny_ckpt, mixed_prompts, want, fast, batch_tokens):
    runner = make_runner(tiny_ckpt, batch_tokens=batch_tokens, fast_forward=fast)
    got, _ = runner.score(mixed_prompts, max_length=1024)
    assert np.abs(got - want).max() < TOL
    stats = runner.last_stats
    assert stats["queries"] == 40 and stats["distinct"] == len(set(mixed_prompts))


@pytest.mark.smoke
def test_fast_forward_matches_the_models_own_forward(tiny_ckpt, mixed_prompts):
    fast = make_runner(tiny_ckpt, batch_tokens=4096, fast_forward=True).score(mixed_prompts, max_length=256)[0]
    plain = make_runner(tiny_ckpt, batch_tokens=4096, fast_forward=False).score(mixed_prompts, max_length=256)[0]
    assert np.abs(fast - plain).max() < 1e-5 and fast.std() > 1e-3  # the contract tolerance; measured ~1e-6


def test_unieval_loop_baseline_equals_reference(tiny_ckpt, reference, summeval_records):
    from benchmark import UniEvalLoop  # scripts/benchmark.py, variant (a)

    loop = UniEvalLoop(str(tiny_ckpt), "cpu")
    recs = summeval_records[:6]
    got = loop.evaluate(recs, ["coherence", "fluency"])
    scorer = Scorer(model=tiny_ckpt)
    for aspect in ["coherence", "fluency"]:
        ours = [e.value for e in scorer.score(recs, aspect=aspect).examples]
        assert np.abs(np.array(got[aspect]) - np.array(ours)).max() < TOL
    assert loop.queries == 6 + sum(len(scorer.splitter(r["target"])) for r in recs)


def test_batches_never_pad_a_query_by_more_than_a_quarter():
    rng = random.Random(3)
    lengths = [rng.randint(5, 1024) for _ in range(300)]
    for budget in (1, 500, 4096, 10**6):
        batches = plan_batches(lengths, budget)
        assert sorted(i for b in batches for i in b) == list(range(300))
        for b in batches:
            longest = max(lengths[i] for i in b)
            assert lengths[b[0]] == longest
            assert len(b) == 1 or len(b) * longest <= budget
            assert all(lengths[i] >= 0.75 * longest for i in b)


def test_out_of_memory_halves_the_batch_and_loses_nothing(tiny_ckpt, mixed_prompts, monkeypatch):
    import torch

    runner = make_runner(tiny_ckpt, batch_tokens=10**6)
    monkeypatch.setattr(runner.t5, "oom_budget", None)  # the model is shared by the process: restored after
    base = runner.score(mixed_prompts, max_length=1024)[0]
    real = runner._two_logits
    sizes = []

    def flaky(ids, batch, fast):
        sizes.append(len(batch))
        padded = len(batch) * max(len(ids[i]) for i in batch)
        # after an OOM, every batch respects the lowered token budget
        assert runner.t5.oom_budget is None or len(batch) == 1 or padded <= runner.t5.oom_budget
        if len(batch) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(ids, batch, fast)

    monkeypatch.setattr(runner, "_two_logits", flaky)
    with pytest.warns(RuntimeWarning, match="out of memory .* batch_tokens lowered"):
        got = runner.score(mixed_prompts, max_length=1024)[0]
    assert np.abs(got - base).max() < 1e-5  # other batches after the back-off: float32 noise
    assert runner.t5.oom_budget is not None and max(sizes) > 2

    def always(ids, batch, fast):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(runner, "_two_logits", always)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="single query"):
            runner.score(mixed_prompts[:3], max_length=1024)


def test_other_errors_are_not_swallowed(tiny_ckpt, monkeypatch):
    runner = make_runner(tiny_ckpt, batch_tokens=100)
    monkeypatch.setattr(runner, "_two_logits", lambda *a: (_ for _ in ()).throw(ValueError("boom")))
    with pytest.raises(ValueError, match="boom"):
        runner.score(["question: x </s> paragraph: y"], max_length=64)


def _scorer(ckpt, cache_dir, dtype="float32"):
    inner = FakeRunner(lambda p: np.nan if "NAN" in p else 0.25)
    inner.seen = inner.prompts
    return Scorer(model=ckpt, runner_factory=fake_factory(inner), cache_dir=cache_dir, dtype=dtype), inner


@pytest.mark.smoke
def test_cache_second_run_scores_nothing_new(fake_ckpt, tmp_path):
    data = [{"target": f"Sentence {i}. Another {i % 3}.", "source": "doc"} for i in range(10)]
    s1, inner1 = _scorer(fake_ckpt, tmp_path / "c")
    first = s1.score(data, aspect="consistency")
    assert len(inner1.seen) == len(set(inner1.seen)) == 13  # 10 + 3 distinct sentences
    s2, inner2 = _scorer(fake_ckpt, tmp_path / "c")
    assert s2.score(data, aspect="consistency") .examples == first.examples
    assert inner2.seen == []
    data.append({"target": "Brand new.", "source": "doc"})
    s2.score(data, aspect="consistency")
    assert len(inner2.seen) == 1 and "Brand new." in inner2.seen[0]


def test_cache_misses_on_changed_checkpoint_or_dtype(fake_ckpt, tmp_path):
    data = [{"target": "One. Two.", "source": "doc"}]
    _scorer(fake_ckpt, tmp_path / "c")[0].score(data, aspect="consistency")
    with pytest.warns(RuntimeWarning):
        s, inner = _scorer(fake_ckpt, tmp_path / "c", dtype="bfloat16")
        s.score(data, aspect="consistency")
    assert len(inner.seen) == 2
    moved = tmp_path / "same-content" / "unieval-sum"
    shutil.copytree(fake_ckpt, moved)
    s, inner = _scorer(moved, tmp_path / "c")
    s.score(data, aspect="consistency")
    assert inner.seen == []  # keyed on content, not path
    (moved / "config.json").write_text('{"changed": true}')
    s, inner = _scorer(moved, tmp_path / "c")
    s.score(data, aspect="consistency")
    assert len(inner.seen) == 2


def test_cache_never_stores_non_finite(fake_ckpt, tmp_path):
    s, inner = _scorer(fake_ckpt, tmp_path / "c")
    runner = s.runner("unieval-sum")
    runner.score(["ok", "NAN"], max_length=10)
    assert len(ScoreCache(tmp_path / "c")) == 1


def test_cache_is_safe_under_concurrent_writers(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from unieval_local.models.cache import ScoreCache
        c = ScoreCache({str(tmp_path / 'c')!r})
        tag = sys.argv[1]
        for i in range(0, 400, 20):
            c.put_many({{f"{{tag}}-{{j}}": j / 400 for j in range(i, i + 20)}})
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, tag]) for tag in ("a", "b", "c")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    cache = ScoreCache(tmp_path / "c")
    assert len(cache) == 1200
    assert cache.get_many(["b-399", "a-0"]) == {"b-399": (399 / 400, None), "a-0": (0.0, None)}


def test_unusable_cache_folder_warns_once_and_the_run_goes_on(tmp_path, tiny_ckpt, capsys):
    from unieval_local.models.cache import CacheUnusableWarning
    from unieval_local.cli import main

    (tmp_path / "file").write_text("x")  # a file where the cache folder should be
    with pytest.warns(CacheUnusableWarning, match="is a file, not a folder"):
        s = Scorer(model=tiny_ckpt, cache_dir=tmp_path / "file")
    assert s.engine.cache.disabled and s.cache_stats()["hits"] == 0
    src = tmp_path / "in.jsonl"
    src.write_text('{"target": "A b.", "source": "C d."}\n')
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "consistency", "--cache-dir",
                 str(tmp_path / "file"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert [x for x in err.splitlines() if "warning" in x] == [
        f"unieval-local: warning: score cache {tmp_path / 'file' / 'scores.sqlite'} is unusable "
        f"({str(tmp_path / 'file')!r} is a file, not a folder); scoring without it: pass a folder as --cache-dir "
        "(cache_dir=)"]
    assert "score cache: 0 queries reused, 1 scored; disabled (" in err
    for run in ("1", "2"):
        assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "consistency", "--cache-dir",
                     str(tmp_path / "c"), "--no-progress", "-o", str(tmp_path / f"out{run}.jsonl")]) == 0
    assert "score cache: 1 queries reused, 0 scored" in capsys.readouterr().err
