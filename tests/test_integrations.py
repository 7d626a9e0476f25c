"""The framework hooks of issue 45 (evaluate, Inspect AI, lm-evaluation-harness) on a stand-in:
the same numbers as :class:`Scorer` over the same batches (1e-9), offline, sockets blocked.
Skipped where the ``integrations`` extra is not installed."""

from __future__ import annotations

import math
import socket

import pytest

from unieval_local import Scorer
from unieval_local.integrations import evaluate_path
from unieval_local.integrations.shared import MODEL_ENV, clear_scorers, shared_scorer

DOCS = ["The cat sat on the mat. It was a sunny day and the cat was happy.",
        "Stocks fell sharply on Monday after the central bank raised rates."]
PREDS = ["The cat sat on the mat.", "Stocks fell after a rate rise. Markets were calm."]


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Every socket connect raises; the frameworks' offline switches on; their caches in tmp_path."""
    def refuse(*a, **k):
        raise OSError("network blocked by the test")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    clear_scorers()
    yield tmp_path
    clear_scorers()


def load_metric(monkeypatch, tmp, config="default", **kwargs):
    """``evaluate.load`` of the shipped module with evaluate's offline switch and module cache in tmp
    (evaluate reads both at import, so the environment alone is too late)."""
    evaluate = pytest.importorskip("evaluate")
    monkeypatch.setattr(evaluate.config, "HF_EVALUATE_OFFLINE", True)
    monkeypatch.setattr(evaluate.config, "HF_MODULES_CACHE", tmp / "modules")
    return evaluate.load(evaluate_path(), config, device="cpu", cache_dir=str(tmp / "cache"), **kwargs)


def test_shared_scorer_is_one_per_setting(tiny_ckpt, monkeypatch):
    clear_scorers()
    a = shared_scorer(model=tiny_ckpt, device="cpu")
    assert shared_scorer(model=tiny_ckpt, device="cpu") is a
    assert shared_scorer(model=tiny_ckpt, device="cpu", max_length=64) is not a
    monkeypatch.setenv(MODEL_ENV, str(tiny_ckpt))
    assert shared_scorer(device="cpu").model == a.model
    clear_scorers()


def test_evaluate_module_equals_scorer(tiny_ckpt, no_network, monkeypatch):
    metric = load_metric(monkeypatch, no_network, "default", model=str(tiny_ckpt))
    aspects = ["coherence", "consistency", "fluency"]
    out = metric.compute(predictions=PREDS, sources=DOCS, task="summarization", aspects=aspects)
    # the same batch: the three aspects in one call (one aspect at a time pads other batches: ~1e-7 apart)
    every_aspect = Scorer(model=tiny_ckpt, device="cpu").evaluate(targets=PREDS, sources=DOCS,
                                                                  task="summarization", aspects=aspects)
    for aspect in aspects:
        want = every_aspect.per_aspect[aspect]
        assert out[aspect] == pytest.approx([e.value for e in want.examples], abs=1e-9)
        assert out[aspect + "_mean"] == pytest.approx(want.overall.value, abs=1e-9)
    assert "unieval-sum" in out["signature"] and "summarization" in out["signature"]
    # the task's own set when no aspects are named; a second call reuses the process's scorer
    scorer_before = shared_scorer(model=str(tiny_ckpt), device="cpu")
    every = metric.compute(predictions=PREDS, sources=DOCS, references=[[p] for p in PREDS])
    assert [k for k in every if not k.endswith("_mean") and k != "signature"] == \
        ["coherence", "consistency", "fluency", "relevance"]
    assert shared_scorer(model=str(tiny_ckpt), device="cpu") is scorer_before


def test_evaluate_module_refuses_by_name(tiny_ckpt, no_network, monkeypatch):
    metric = load_metric(monkeypatch, no_network, "unieval-sum", model=str(tiny_ckpt))
    with pytest.raises(ValueError, match="relevance"):  # needs references: refused by name
        metric.compute(predictions=PREDS, sources=DOCS, aspects=["relevance"])
    with pytest.raises(ValueError, match="minicheck-flan-t5-large"):  # another evaluator's aspect
        metric.compute(predictions=PREDS, sources=DOCS, task="fact", aspects=["support"])


def test_inspect_scorer_equals_scorer_one_sample_at_a_time(tiny_ckpt, no_network, monkeypatch):
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from unieval_local.integrations.inspect import unieval_scorer

    monkeypatch.setenv("INSPECT_LOG_DIR", str(no_network / "logs"))
    samples = [Sample(input=d, target=p, id=i) for i, (d, p) in enumerate(zip(DOCS, PREDS))]
    # usage given: else mockllm counts tokens with tiktoken, which downloads its encoding (network)
    outputs = [ModelOutput.from_content("mockllm/model", p) for p in PREDS]
    for out in outputs:
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    model = get_model("mockllm/model", custom_outputs=outputs)
    task = Task(dataset=samples, scorer=unieval_scorer(task="summarization", aspect="fluency",
                                                        model=str(tiny_ckpt), device="cpu"))
    [log] = inspect_eval(task, model=model, display="none", log_dir=str(no_network / "logs"))
    assert log.status == "success", log.error
    got = {s.id: s.scores["unieval_scorer"] for s in log.samples}
    scorer = Scorer(model=tiny_ckpt, device="cpu")
    for i, (doc, pred) in enumerate(zip(DOCS, PREDS)):
        want = scorer.score([{"target": pred, "source": doc}], task="summarization", aspect="fluency")
        assert got[i].value == pytest.approx(want.examples[0].value, abs=1e-9)
        assert got[i].answer == pred
        assert got[i].explanation.startswith(f"summarization/fluency = {want.examples[0].value:.6f} (range [0, 1])")
        assert got[i].metadata["range"] == "[0, 1]"
    metrics = log.results.scores[0].metrics
    assert set(metrics) == {"mean", "stderr"}
    assert metrics["mean"].value == pytest.approx(sum(g.value for g in got.values()) / 2, abs=1e-9)


def test_lm_eval_task_equals_scorer_over_the_batch(tiny_ckpt, no_network, monkeypatch):
    pytest.importorskip("lm_eval")
    import shutil
    from pathlib import Path

    import datasets
    import lm_eval
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    folder = Path(__file__).resolve().parents[1] / "configs" / "lm_eval" / "unieval_summarization"
    work = no_network / "task"
    shutil.copytree(folder, work)
    monkeypatch.chdir(work)  # the example's data_files is relative to the working directory
    monkeypatch.setenv(MODEL_ENV, str(tiny_ckpt))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", no_network / "datasets")
    import json
    docs = [json.loads(line) for line in (work / "unieval_summarization.jsonl").read_text().splitlines()]

    class Echo(LM):
        """Answers each document with its stored prediction."""
        def generate_until(self, requests):
            return [r.doc["prediction"] for r in requests]

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    calls = []
    real_score = Scorer.score

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("aspect"))
        return real_score(self, *args, **kwargs)
    monkeypatch.setattr(Scorer, "score", counted)
    out = lm_eval.simple_evaluate(model=Echo(), tasks=["unieval_summarization"], bootstrap_iters=100,
                                  task_manager=TaskManager(include_path=str(work)), log_samples=False)
    monkeypatch.setattr(Scorer, "score", real_score)
    got = out["results"]["unieval_summarization"]
    scorer = Scorer(model=tiny_ckpt, device=None)
    batch = [{"target": d["prediction"], "source": d["document"]} for d in docs]
    for aspect in ("coherence", "consistency", "fluency"):
        values = [e.value for e in scorer.score(batch, task="summarization", aspect=aspect).examples]
        assert got[f"unieval_{aspect},none"] == pytest.approx(sum(values) / 2, abs=1e-9)
        # lm-eval's own mean_stderr of the same values, in lm-eval's own stderr key (not N/A)
        assert got[f"unieval_{aspect}_stderr,none"] == pytest.approx(
            lm_eval.api.metrics.mean_stderr(values), abs=1e-9)
    # one scorer call per aspect: the stderr aggregation reused the mean's batch
    assert sorted(calls) == ["coherence", "consistency", "fluency"]
    assert 0 <= got["rougeL,none"] <= 1


def test_evaluate_module_never_downloads(no_network, monkeypatch):
    """No model given and none staged: the package's CheckpointNotFoundError, no network touched."""
    from unieval_local.errors import CheckpointNotFoundError

    monkeypatch.delenv(MODEL_ENV, raising=False)
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(no_network / "empty-home"))
    monkeypatch.setenv("HF_HOME", str(no_network / "hf"))
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(no_network / "hf" / "hub"))
    metric = load_metric(monkeypatch, no_network, "unieval-sum")
    with pytest.raises(CheckpointNotFoundError, match="unieval-sum"):
        metric.compute(predictions=PREDS[:1], sources=DOCS[:1], aspects=["fluency"])


def test_lm_eval_hooks_pass_references_and_keep_aspects_apart(tiny_ckpt):
    from unieval_local.integrations.lm_eval import UniEvalHooks

    clear_scorers()
    hooks = UniEvalHooks(task="summarization", aspects=("relevance", "fluency"), source_field="document",
                         references_field="summary", model=str(tiny_ckpt), device="cpu")
    docs = [{"document": d, "summary": r} for d, r in zip(DOCS, ["A cat sat.", ["Stocks fell.", "Rates rose."]])]
    items = [hooks.process_results(doc, [p]) for doc, p in zip(docs, PREDS)]
    assert set(items[0]) == {"unieval_relevance", "unieval_fluency"}
    want = Scorer(model=tiny_ckpt, device="cpu").score(
        targets=PREDS, sources=DOCS, references=[["A cat sat."], ["Stocks fell.", "Rates rose."]],
        task="summarization", aspect="relevance")
    got = hooks.score_items([i["unieval_relevance"] for i in items])
    assert got == pytest.approx([e.value for e in want.examples], abs=1e-9)
    assert hooks.aggregate([i["unieval_relevance"] for i in items]) == pytest.approx(want.overall.value, abs=1e-9)
    with pytest.raises(ValueError, match="several aspects"):
        hooks.aggregate([items[0]["unieval_relevance"], items[0]["unieval_fluency"]])
    clear_scorers()


def test_evaluate_module_add_batch_then_compute_equals_one_batch(tiny_ckpt, no_network, monkeypatch):
    """add / add_batch keep examples in memory; compute scores them (then its own) as ONE batch."""
    metric = load_metric(monkeypatch, no_network, "default", model=str(tiny_ckpt))
    docs, preds = DOCS + [DOCS[0]], PREDS + ["A happy cat. The day was sunny."]
    refs = [["A cat sat."], ["Stocks fell.", "Rates rose."], ["A sunny day."]]
    metric.add_batch(predictions=preds[:1], sources=docs[:1], references=refs[:1])
    metric.add(prediction=preds[1], source=docs[1], reference=refs[1])
    out = metric.compute(predictions=preds[2:], sources=docs[2:], references=refs[2:],
                         aspects=["relevance", "fluency"])
    want = Scorer(model=tiny_ckpt, device="cpu").evaluate(targets=preds, sources=docs, references=refs,
                                                           task="summarization", aspects=["relevance", "fluency"])
    for aspect in ("relevance", "fluency"):
        assert out[aspect] == pytest.approx([e.value for e in want.per_aspect[aspect].examples], abs=1e-9)
    # the kept examples were forgotten: the next compute scores only its own
    assert len(metric.compute(predictions=preds[:1], sources=docs[:1], aspects=["fluency"])["fluency"]) == 1
    # a column for some examples and not others: refused, naming the column and the examples; the examples
    # added before are kept, so the corrected call scores all three, equal to the one batch above
    metric.add_batch(predictions=preds[:2], sources=docs[:2], references=refs[:2])
    with pytest.raises(ValueError, match=r"references were given for examples \[0, 1\] but not for examples \[2\]"):
        metric.compute(predictions=preds[2:], sources=docs[2:], aspects=["fluency"])
    with pytest.raises(ValueError, match="did you mean 'fluency'"):  # refused for an aspect's name: kept too
        metric.compute(predictions=preds[2:], sources=docs[2:], references=refs[2:], aspects=["fluensy"])
    again = metric.compute(predictions=preds[2:], sources=docs[2:], references=refs[2:],
                           aspects=["relevance", "fluency"])
    assert again["relevance"] == pytest.approx(out["relevance"], abs=1e-9)
    with pytest.raises(ValueError, match="needs predictions"):
        metric.compute(aspects=["fluency"])
    with pytest.raises(ValueError, match=r"add_batch\(\): sources has 1 entries, predictions 2"):
        metric.add_batch(predictions=preds[:2], sources=docs[:1])
    with pytest.raises(ValueError, match=r"^compute\(\): sources has 1 entries, predictions 2"):
        metric.compute(predictions=preds[:2], sources=docs[:1])


def test_evaluate_module_refuses_an_unknown_config_name_at_load(tiny_ckpt, no_network, monkeypatch):
    with pytest.raises(ValueError, match=r"config_name 'unieval-summ' is no evaluator \(did you mean 'unieval-sum'\?\)"):
        load_metric(monkeypatch, no_network, "unieval-summ", model=str(tiny_ckpt))


def test_lm_eval_hooks_leave_out_a_document_they_cannot_score_and_say_so(tiny_ckpt):
    """An empty generation would fail the whole aggregation after all generation is done: by default
    it is left out (a warning names it), the mean and stderr are Scorer's over the others; 'error'
    raises; a number scores it as that number."""
    from unieval_local.errors import InvalidExampleError
    from unieval_local.integrations.lm_eval import UniEvalHooks

    clear_scorers()
    docs = [{"document": d} for d in DOCS + DOCS[:1]]
    outputs = [PREDS[0], "", PREDS[1]]
    hooks = UniEvalHooks(aspects=("fluency",), model=str(tiny_ckpt), device="cpu", stderr=True)
    items = [hooks.process_results(doc, [o])["unieval_fluency"] for doc, o in zip(docs, outputs)]
    want = [e.value for e in Scorer(model=tiny_ckpt, device="cpu").score(
        targets=[outputs[0], outputs[2]], sources=[DOCS[0], DOCS[0]], task="summarization", aspect="fluency").examples]
    with pytest.warns(UserWarning, match=r"unieval_fluency: 1 of 3 documents cannot be scored, left out .*document 1: "
                                         r"the generation: the text under evaluation is empty"):
        got = hooks.aggregate(items)
    assert got == pytest.approx(sum(want) / 2, abs=1e-9)
    assert hooks.aggregate_stderr(items) == pytest.approx(abs(want[0] - want[1]) / 2, abs=1e-9)  # n=2: |a-b|/2
    with pytest.raises(InvalidExampleError, match="example 1"):
        UniEvalHooks(aspects=("fluency",), model=str(tiny_ckpt), device="cpu", on_invalid="error").aggregate(items)
    zero = UniEvalHooks(aspects=("fluency",), model=str(tiny_ckpt), device="cpu", on_invalid=0.0)
    with pytest.warns(UserWarning, match="each scored 0.0"):
        assert zero.aggregate(items) == pytest.approx(sum(want) / 3, abs=1e-9)
    # one document left: lm-eval's own "N/A" for its stderr; none left: NaN, said
    with pytest.warns(UserWarning, match="2 of 3 documents cannot be scored"):
        assert hooks.aggregate_stderr([items[0], items[1], dict(items[1], target=" ")]) == "N/A"
    with pytest.warns(UserWarning, match="no document could be scored"):
        assert math.isnan(hooks.aggregate([items[1]]))
    with pytest.raises(ValueError, match="on_invalid must be"):
        UniEvalHooks(aspects=("fluency",), model=str(tiny_ckpt), on_invalid="drop")
    clear_scorers()


def test_inspect_scorer_names_the_sample_it_cannot_score_or_gives_it_the_stated_value(tiny_ckpt, no_network,
                                                                                       monkeypatch):
    """An empty output: by default that sample errors, its message naming the sample's id (not
    'example 0'), the others keep their scores; on_invalid=0.0 scores it 0.0 and says why."""
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from unieval_local.integrations.inspect import unieval_scorer

    monkeypatch.setenv("INSPECT_LOG_DIR", str(no_network / "logs"))
    outputs = [PREDS[0], ""]

    def run(**kwargs):
        replies = [ModelOutput.from_content("mockllm/model", o) for o in outputs]
        for r in replies:
            r.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        task = Task(dataset=[Sample(input=d, id=f"doc-{i}") for i, d in enumerate(DOCS)],
                    scorer=unieval_scorer(task="summarization", aspect="fluency", model=str(tiny_ckpt),
                                          device="cpu", **kwargs))
        [log] = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=replies), display="none",
                             log_dir=str(no_network / "logs"), fail_on_error=False, max_samples=1)
        return {s.id: s for s in log.samples}

    want = Scorer(model=tiny_ckpt, device="cpu").score([{"target": PREDS[0], "source": DOCS[0]}],
                                                       task="summarization", aspect="fluency").examples[0].value
    errored = run()
    assert errored["doc-0"].scores["unieval_scorer"].value == pytest.approx(want, abs=1e-9)
    assert "Inspect sample 'doc-1' (epoch 1) cannot be scored for summarization/fluency: the model's output: " in \
        errored["doc-1"].error.message
    filled = run(on_invalid=0.0)
    empty = filled["doc-1"].scores["unieval_scorer"]
    assert empty.value == 0.0 and empty.metadata["invalid"] is True and "not scored (the model's output: " in empty.explanation
    assert filled["doc-0"].scores["unieval_scorer"].value == pytest.approx(want, abs=1e-9)
    with pytest.raises(ValueError, match="on_invalid must be"):
        unieval_scorer(aspect="fluency", model=str(tiny_ckpt), on_invalid="skip")
