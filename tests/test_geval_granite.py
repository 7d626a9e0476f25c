"""The ``granite-guardian-3.3-8b`` and ``g-eval`` evaluators end to end on generated checkpoints
(tiny widths): through Python (``Scorer``), the CLI's ``score`` and ``tasks``, and over HTTP
(``/v1/score`` on a real server). Values are compared with the runner's own scoring of the
prompts the registry renders (a plain loop) and with rules computed here (max over chunks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

from unieval_local import Scorer  # noqa: E402
from unieval_local.models.causal_lm.model import CausalLMModel  # noqa: E402
from unieval_local.models.causal_lm.runner import CausalLMRunner  # noqa: E402
from unieval_local.models.checkpoints import ResolvedCheckpoint  # noqa: E402
from unieval_local.registry.evaluators import get_evaluator  # noqa: E402
from unieval_local.registry.tasks import get_aspect  # noqa: E402
from unieval_local.schema import UniEvalData  # noqa: E402
from unieval_local.text.chat import GEVAL, GRANITE_GROUNDEDNESS, ChatQuery  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]
DATA = [{"source": "The council approved the new park on Tuesday after a long debate about its cost.",
         "target": "A park was approved."},
        {"source": "Shares of the firm rose five percent after it reported strong sales in Asia.",
         "target": "Shares fell sharply."},
        {"source": "Rain fell for three days and two towns were flooded.", "target": "It rained."}]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory, shared_data) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("llm")
    return {"g-eval": build_causal_lm_checkpoint(root / "g-eval", layout="qwen2", data_dir=shared_data, seed=3),
            "granite-guardian-3.3-8b": build_causal_lm_checkpoint(
                root / "granite-guardian-3.3-8b", layout="granite", data_dir=shared_data, seed=4,
                evaluator="granite-guardian-3.3-8b")}


def direct(folder: Path, evaluator: str, prompts: list[str]) -> np.ndarray:
    model = CausalLMModel(ResolvedCheckpoint(evaluator, folder, "explicit"), get_evaluator(evaluator), "cpu", "float32")
    return np.array([CausalLMRunner(model, evaluator=get_evaluator(evaluator), fingerprint="x").score(
        [p], max_length=8192)[0][0] for p in prompts])


def test_geval_scores_through_python_equal_the_runner_and_keep_their_scale(ckpts):
    scorer = Scorer(model={k: str(v) for k, v in ckpts.items()}, device="cpu")
    with pytest.warns(UserWarning, match=r"geval_coherence \(1-5\), geval_fluency \(1-3\) entered as"):
        result = scorer.evaluate(DATA, task="summarization", aspects=["geval_coherence", "geval_fluency"],
                                 evidence=True)
    for name in ("geval_coherence", "geval_fluency"):
        aspect = get_aspect("summarization", name)
        k = aspect.scale
        prompts = [GEVAL.render(aspect, UniEvalData(**d), d["target"])[0] for d in DATA]
        want = direct(ckpts["g-eval"], "g-eval", prompts)  # the runner's (E - 1) / (K - 1)
        got = np.array([e.scores[name] for e in result.examples])
        np.testing.assert_allclose(got, 1 + (k - 1) * want, atol=1e-6, rtol=0)  # the rating E on its scale
        assert ((got >= 1) & (got <= k)).all() and not ((got >= 0) & (got <= 1)).all()
        for e, value in zip(result.examples, got):
            (q,) = e.evidence[name].queries
            assert sorted(q.distribution) == [str(r) for r in range(1, k + 1)]
            assert abs(sum(q.distribution.values()) - 1) < 1e-9
            expected = sum(int(r) * pr for r, pr in q.distribution.items())  # E = sum k p(k)
            assert abs(expected - value) < 1e-6 and abs(q.value - value) < 1e-9
        np.testing.assert_allclose(result.per_aspect[name].overall.value, got.mean(), atol=1e-12)
    assert get_aspect("summarization", "geval_fluency").scale == 3
    assert ChatQuery.decode(GEVAL.render(get_aspect("summarization", "geval_fluency"), UniEvalData(**DATA[0]),
                                         DATA[0]["target"])[0]).prefix == "Fluency (1-3):"
    # mixed scales: each rating enters aspect_mean as (E - 1) / (K - 1)
    mean = np.mean([[(e.scores["geval_coherence"] - 1) / 4, (e.scores["geval_fluency"] - 1) / 2]
                    for e in result.examples], axis=1)
    np.testing.assert_allclose([e.aspect_mean for e in result.examples], mean, atol=1e-12)
    # one scale: the mean stays on it
    same = scorer.evaluate(DATA, task="summarization", aspects=["geval_coherence", "geval_relevance"])
    np.testing.assert_allclose([e.aspect_mean for e in same.examples],
                               [(e.scores["geval_coherence"] + e.scores["geval_relevance"]) / 2 for e in same.examples],
                               atol=1e-12)


def test_geval_distribution_kept_after_a_score_cache_hit(ckpts, tmp_path):
    """A value from the score cache has no distribution kept: the runner scores it again for
    the evidence, and it is the same distribution."""
    def run():
        scorer = Scorer(model={"g-eval": str(ckpts["g-eval"])}, device="cpu", cache_dir=str(tmp_path / "cache"))
        return scorer.score(DATA[:2], task="summarization", aspect="geval_relevance", evidence=True)

    first, again = run(), run()
    for a, b in zip(first.examples, again.examples):
        assert a.value == b.value
        assert a.evidence.queries[0].distribution == pytest.approx(b.evidence.queries[0].distribution, abs=1e-12)


def test_granite_groundedness_is_the_max_over_chunks(ckpts, shared_data):
    folder = ckpts["granite-guardian-3.3-8b"]
    long_source = " ".join(f"Sentence number {i} says the harbour was busy on day {i}." for i in range(120))
    data = [*DATA[:2], {"source": long_source, "target": "The harbour was busy."}]
    scorer = Scorer(model={"granite-guardian-3.3-8b": str(folder)}, device="cpu", chunk_words=200)
    got = [e.value for e in scorer.score(data, task="fact", aspect="groundedness").examples]
    aspect = get_aspect("fact", "groundedness")
    from unieval_local.text.sentences import PunktEnglishSplitter

    want = []
    for d in data:
        chunks = GRANITE_GROUNDEDNESS.chunks(d["source"], PunktEnglishSplitter(), 200)
        prompts = [GRANITE_GROUNDEDNESS.render(aspect, UniEvalData(**d), d["target"], None, {"source": c})[0]
                   for _, _, c in chunks]
        want.append(direct(folder, "granite-guardian-3.3-8b", prompts).max())
    assert len(GRANITE_GROUNDEDNESS.chunks(long_source, PunktEnglishSplitter(), 200)) >= 5
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_cli_score_and_tasks(ckpts, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DATA))
    run = subprocess.run(CLI + ["score", str(src), "--task", "summarization", "--aspect", "geval_relevance",
                                "--model", f"g-eval={ckpts['g-eval']}", "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    got = [json.loads(x)["scores"]["geval_relevance"] for x in run.stdout.splitlines()]
    scorer = Scorer(model={"g-eval": str(ckpts["g-eval"])}, device="cpu")
    want = [e.value for e in scorer.score(DATA, task="summarization", aspect="geval_relevance").examples]
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)  # float32: batch composition moves ~1e-7
    mixed = subprocess.run(CLI + ["score", str(src), "--task", "summarization", "--aspect", "geval_coherence",
                                  "--aspect", "geval_fluency", "--model", f"g-eval={ckpts['g-eval']}", "--no-progress"],
                           capture_output=True, text=True, timeout=300)
    assert mixed.returncode == 0, mixed.stderr
    assert "geval_coherence (1-5), geval_fluency (1-3) entered as (rating - 1) / (K - 1)" in mixed.stderr
    assert mixed.stderr.count("entered as (rating - 1)") == 1  # once per run, not once per record
    for line in map(json.loads, mixed.stdout.splitlines()):
        s = line["scores"]
        assert line["aspect_mean"] == pytest.approx(((s["geval_coherence"] - 1) / 4 + (s["geval_fluency"] - 1) / 2) / 2)
    tasks = subprocess.run(CLI + ["tasks"], capture_output=True, text=True, timeout=120).stdout
    line = next(x for x in tasks.splitlines() if "geval_fluency" in x)
    assert "[1, 3] (expected rating)" in line and "g-eval" in line
    assert "granite-guardian-3.3-8b" in next(x for x in tasks.splitlines() if x.startswith("fact") and "grounded" in x)


def test_http_v1_score(ckpts, tmp_path):
    from test_service import Server

    from test_service import unieval
    from test_service_wire import header_notes

    server = Server(f"granite-guardian-3.3-8b={ckpts['granite-guardian-3.3-8b']}", tmp_path,
                    "--model", f"g-eval={ckpts['g-eval']}").wait_ready()
    try:
        r = server.post("/v1/score", {"task": "fact", "aspects": ["groundedness"], "data": DATA})
        assert r.status_code == 200, r.text
        got = [e["scores"]["groundedness"] for e in r.json()["examples"]]
        hosted = server.post("/v1/unieval", unieval({"task": "summarization", "evaluation_aspect": "geval_relevance"},
                                                    DATA))
        assert hosted.status_code == 200, hosted.text
        assert any("geval_relevance is an expected rating on 1-5" in n for n in header_notes(hosted))
        rating = hosted.json()["overall"]["value"]
    finally:
        server.stop()
    geval = Scorer(model={"g-eval": str(ckpts["g-eval"])}, device="cpu")
    assert rating == pytest.approx(geval.score(DATA, task="summarization", aspect="geval_relevance").overall.value,
                                   abs=1e-6) and 1 <= rating <= 5
    scorer = Scorer(model={"granite-guardian-3.3-8b": str(ckpts["granite-guardian-3.3-8b"])}, device="cpu")
    want = [e.value for e in scorer.score(DATA, task="fact", aspect="groundedness").examples]
    np.testing.assert_allclose(got, want, atol=1e-9, rtol=0)


def _staged(name: str) -> Path:
    from conftest import REAL_HOME

    folder = Path(REAL_HOME or "/nonexistent") / name
    if not (folder / "config.json").is_file():
        pytest.skip(f"{name} not staged in UNIEVAL_LOCAL_HOME")
    return folder


@pytest.mark.real_weights
def test_real_granite_guardian_tells_grounded_from_ungrounded():
    """Ready for staged weights (`unieval-local download --checkpoint granite-guardian-3.3-8b`);
    parity with IBM's own scoring is not verified here."""
    folder = _staged("granite-guardian-3.3-8b")
    scorer = Scorer(model={"granite-guardian-3.3-8b": str(folder)}, dtype="bfloat16")
    pair = [{"source": "The capital of France is Paris.", "target": "The capital of France is Berlin."},
            {"source": "The capital of France is Paris.", "target": "Paris is the capital of France."}]
    got = [e.value for e in scorer.score(pair, task="fact", aspect="groundedness").examples]
    assert got[0] < 0.5 < got[1]


@pytest.mark.real_weights
def test_real_geval_rates_a_garbled_summary_below_a_fluent_one():
    """Ready for a local instruct model staged as UNIEVAL_LOCAL_HOME/g-eval."""
    folder = _staged("g-eval")
    scorer = Scorer(model={"g-eval": str(folder)}, dtype="bfloat16")
    pair = [{"target": "the the council park approved was Tuesday on debate long"},
            {"target": "The council approved the new park on Tuesday."}]
    got = [e.value for e in scorer.score(pair, task="summarization", aspect="geval_fluency").examples]
    assert got[0] < got[1]
