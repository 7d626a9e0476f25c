"""No silent wrong number, turn 3 (part): a checkpoint folder's recorded identity is checked
against the evaluator it is used for; a prompt format declares what it can express and a
user aspect asking for more is refused; a config that says the LM head is tied while the
stored head differs is refused; verify checks finiteness and names a missing shard; chunk
planning is linear in the text; the opt-in punctuation rule; messages that misled."""

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from unieval_local import Scorer
from unieval_local.registry.user_aspects import AspectsConfigError, load_aspects_config
from unieval_local.models.checkpoints import EVALUATOR_KEY, MANIFEST_NAME, check_identity, read_identity
from unieval_local.models.verify import verify_checkpoint
from unieval_local.cli import EXIT_CHECKPOINT, EXIT_USAGE, main
from unieval_local.errors import CheckpointError, UnknownTaskError
from unieval_local.registry.evaluators import EVALUATORS
from unieval_local.pipeline.planning import make_windows
from unieval_local.text.prompts import aspect_problems
from unieval_local.models.t5.loading import load_model
from unieval_local.text.sentences import DEFAULT_SPLITTER, MergePunctuation
from unieval_local.registry.tasks import DEFAULT_REGISTRY, TASKS

from conftest import FakeRunner, fake_factory


def copy_with(src: Path, dst: Path, *, manifest_hub: str | None = None, config_keys: dict | None = None) -> Path:
    """A copy of ``src`` with ``config_keys`` in its config.json and, with ``manifest_hub``, a manifest
    as ``download`` writes it (that hub id and each file's SHA-256)."""
    from unieval_local.models.manifest import manifest_entries, write_manifest

    shutil.copytree(src, dst)
    if config_keys:
        cfg = json.loads((dst / "config.json").read_text())
        cfg.update(config_keys)
        (dst / "config.json").write_text(json.dumps(cfg))
    if manifest_hub:
        write_manifest(dst, manifest_entries(dst), checkpoint=dst.name, hub_id=manifest_hub, revision="a" * 40)
    return dst


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ----------------------------------------------------------------------------- 1. evaluator identity
def test_identity_is_read_from_manifest_cache_folder_and_config(tmp_path, fake_ckpt):
    staged = copy_with(fake_ckpt, tmp_path / "a" / "unieval-sum", manifest_hub="MingZhong/unieval-sum")
    assert read_identity(staged).hub_id == "MingZhong/unieval-sum" and read_identity(staged).source == "manifest"
    snap = tmp_path / "hub" / "models--lytang--MiniCheck-Flan-T5-Large" / "snapshots" / ("b" * 40)
    shutil.copytree(fake_ckpt, snap)
    assert read_identity(snap).hub_id == "lytang/MiniCheck-Flan-T5-Large" and read_identity(snap).source == "hf-cache"
    tagged = copy_with(fake_ckpt, tmp_path / "c", config_keys={EVALUATOR_KEY: "unieval-fact"})
    assert (read_identity(tagged).evaluator, read_identity(tagged).source) == ("unieval-fact", "config")
    assert read_identity(fake_ckpt).source == "none"

    assert check_identity(staged, EVALUATORS["unieval-sum"])[0] == "verified"
    # a copied folder under an HF cache path: no blob links, so nothing compared, only its path names it
    assert check_identity(snap, EVALUATORS["minicheck-flan-t5-large"])[0] == "named"
    assert check_identity(fake_ckpt, EVALUATORS["unieval-sum"])[0] == "unverified"
    fine_tune = copy_with(fake_ckpt, tmp_path / "d", manifest_hub="someone/unieval-sum-finetuned")
    assert check_identity(fine_tune, EVALUATORS["unieval-sum"])[0] == "unverified"  # not a built-in's: unchecked
    with pytest.raises(CheckpointError, match=r"is 'MingZhong/unieval-sum' \(its download manifest\), not "
                                              r"minicheck-flan-t5-large"):
        check_identity(staged, EVALUATORS["minicheck-flan-t5-large"])
    with pytest.raises(CheckpointError, match="not unieval-sum"):
        check_identity(snap, EVALUATORS["unieval-sum"])
    with pytest.raises(CheckpointError, match="'unieval-fact' .* not unieval-dialog"):
        check_identity(tagged, EVALUATORS["unieval-dialog"])
    other_type = copy_with(fake_ckpt, tmp_path / "e", config_keys={"model_type": "deberta-v2"})
    with pytest.raises(CheckpointError, match="holds a 'deberta-v2' model"):
        check_identity(other_type, EVALUATORS["unieval-sum"])


def test_a_unieval_folder_is_refused_for_minicheck_and_the_reverse(tmp_path, fake_ckpt, capsys):
    staged = copy_with(fake_ckpt, tmp_path / "unieval-sum", manifest_hub="MingZhong/unieval-sum")
    runner = FakeRunner(default=0.7)
    scorer = Scorer(model=staged, runner_factory=fake_factory(runner))
    rec = [{"target": "A claim.", "source": "A document."}]
    assert scorer.score(rec, task="summarization", aspect="coherence").overall.value == 0.7
    assert scorer.signature("summarization", "coherence").identity == "verified"
    with pytest.raises(CheckpointError, match="not minicheck-flan-t5-large"):
        scorer.score(rec, task="fact", aspect="support")
    assert runner.calls == [[runner.calls[0][0]]]  # the refused aspect ran no query

    mc = copy_with(fake_ckpt, tmp_path / "mc", manifest_hub="lytang/MiniCheck-Flan-T5-Large")
    with pytest.raises(CheckpointError, match="not unieval-sum"):
        Scorer(model=mc, runner_factory=fake_factory(FakeRunner())).score(rec, aspect="consistency")
    # the CLI: exit 3 before any record, for score and for a report's consistency checker
    src = write(tmp_path / "in.jsonl", rec)
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--task", "fact", "--aspect", "support", "--model", str(staged),
                 "--no-progress", "-o", str(out)]) == EXIT_CHECKPOINT
    assert "is 'MingZhong/unieval-sum' (its download manifest), not minicheck-flan-t5-large" in capsys.readouterr().err
    assert not out.exists() or out.read_text() == ""
    assert main(["report", "--format", "summ", str(src), "--consistency-aspect", "fact/support", "--model",
                 str(staged), "--no-progress"]) == EXIT_CHECKPOINT
    assert "not minicheck-flan-t5-large" in capsys.readouterr().err


def test_an_unverified_folder_warns_once_and_signs_unverified(fake_ckpt):
    scorer = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner()))
    rec = [{"target": "A claim. Another.", "source": "A document."}]
    with pytest.warns(UserWarning, match=r"is used as unieval-sum unchecked: nothing in it names the model") as got:
        scorer.evaluate(rec, aspects=["coherence", "consistency"])
        scorer.evaluate(rec, aspects=["fluency"])
    assert sum("unchecked" in str(w.message) for w in got) == 1
    sig = scorer.signature("summarization", "coherence")
    assert sig.identity == "unverified" and "|identity:unverified|" in str(sig)


def test_verify_says_why_an_identity_does_not_match(tmp_path, tiny_ckpt, capsys):
    staged = copy_with(tiny_ckpt, tmp_path / "sum", manifest_hub="MingZhong/unieval-sum")
    (staged / MANIFEST_NAME).write_text(json.dumps({"hub_id": "MingZhong/unieval-sum", "files": {}}))
    assert main(["verify", str(staged), "--evaluator", "minicheck-flan-t5-large"]) == 1
    out = capsys.readouterr().out
    assert "FAIL checkpoint folder" in out and "not minicheck-flan-t5-large" in out
    assert main(["verify", str(staged)]) == 0  # the folder names unieval-sum: checked as such
    assert "identity: 'MingZhong/unieval-sum' (its download manifest) is unieval-sum" in capsys.readouterr().out
    report = verify_checkpoint(tiny_ckpt)[0]
    assert report.ok and any(m.startswith("WARN") and "unchecked" in m for m in report.messages)


# ----------------------------------------------------------------------------- 2. what a prompt format can express
def aspects_yaml(tmp_path, body: str) -> Path:
    path = tmp_path / "aspects.yaml"
    path.write_text("aspects:\n" + body)
    return path


def test_a_minicheck_aspect_with_a_question_or_other_fields_is_refused(tmp_path):
    cases = {
        "question": ("  - task: summarization\n    name: q1\n    evaluator: minicheck-flan-t5-large\n"
                     "    question: Is this summary concise?\n", "aspects[0].question: the minicheck prompt format"),
        "fields": ("  - task: summarization\n    name: q2\n    evaluator: minicheck-flan-t5-large\n"
                   "    fields: [{field: target}, {field: instruction}]\n",
                   "shows exactly the fields source, target; got target, instruction"),
        "labels": ("  - task: summarization\n    name: q3\n    evaluator: minicheck-flan-t5-large\n"
                   "    fields: [{label: claim, field: target}, {label: document, field: source}]\n",
                   "shows no labels"),
        "chunking": ("  - {task: summarization, name: q4, evaluator: minicheck-flan-t5-large, window_reduction: mean}\n",
                     "aspects[0].window_reduction: the minicheck prompt format"),
        "no question": ("  - task: summarization\n    name: q5\n    fields: [{label: summary, field: target}]\n",
                        "aspects[0].question: the boolean-qa prompt format"),
    }
    for case, (body, message) in cases.items():
        with pytest.raises(AspectsConfigError) as info:
            load_aspects_config(aspects_yaml(tmp_path, body), DEFAULT_REGISTRY)
        assert message in str(info.value), (case, str(info.value))
        assert "aspect 'q" in str(info.value)


def test_a_minicheck_aspect_the_format_can_express_scores_as_the_builtin(tmp_path, fake_ckpt):
    path = aspects_yaml(tmp_path, "  - {task: fact, name: my_support, evaluator: minicheck-flan-t5-large,\n"
                                  "     granularity: sentence}\n")
    (aspect,) = load_aspects_config(path, DEFAULT_REGISTRY)
    assert [f.field for f in aspect.fields] == ["source", "target"] and aspect.window_reduction == "max"
    runner = FakeRunner(lambda p: (len(p) % 89) / 89)
    scorer = Scorer(model=fake_ckpt, runner_factory=fake_factory(runner), aspects_config=path)
    rec = [{"target": "The vault was in Oslo. It was empty.", "source": "The vault in Oslo was empty. " * 5}]
    mine = scorer.score(rec, task="fact", aspect="my_support").overall.value
    assert mine == scorer.score(rec, task="fact", aspect="sentence_support").overall.value


def test_every_builtin_aspect_is_expressible_in_its_evaluators_format():
    for task in TASKS.values():
        for a in task.aspects.values():
            fmt = EVALUATORS[a.checkpoint].prompt_format
            own = not fmt.capabilities.chunk_settings
            problems = aspect_problems(fmt, question=None if not fmt.capabilities.question else a.question,
                                       labels={f.field: f.label or None for f in a.fields}, granularity=a.granularity,
                                       chunk_field=None if own else a.chunk_field,
                                       window_reduction=None if own else a.window_reduction)
            assert problems == [], (task.name, a.name, problems)


# ----------------------------------------------------------------------------- 4. a config that lies about the head
@pytest.mark.parametrize("flag", ["true", "omitted"])
def test_a_tied_config_with_its_own_stored_head_is_refused(flag, tmp_path, v11_ckpts, capsys):
    folder = tmp_path / "unieval-sum"
    shutil.copytree(v11_ckpts["safetensors"], folder)
    cfg = json.loads((folder / "config.json").read_text())
    if flag == "true":
        cfg["tie_word_embeddings"] = True
    else:
        del cfg["tie_word_embeddings"]
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="lm_head.weight that differs from shared.weight") as info:
        load_model(folder)
    assert ('says "tie_word_embeddings": true' if flag == "true" else 'omits "tie_word_embeddings"') in str(info.value)
    src = write(tmp_path / "in.jsonl", [{"target": "A summary.", "source": "A document."}])
    assert main(["score", str(src), "--model", str(folder), "--no-progress", "-o", str(tmp_path / "o.jsonl")]) \
        == EXIT_CHECKPOINT
    assert "differs from shared.weight" in capsys.readouterr().err
    report = verify_checkpoint(folder)[0]
    assert not report.ok and any("differs from shared.weight" in m for m in report.messages)


def test_a_tied_checkpoint_storing_an_equal_head_loads(tmp_path, tiny_ckpt):
    folder = tmp_path / "unieval-sum"
    shutil.copytree(tiny_ckpt, folder)
    state = load_file(folder / "model.safetensors")
    state["lm_head.weight"] = state["shared.weight"].clone()  # 4.x saved every key, the head equal
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    load_model(folder)


def test_verify_finds_non_finite_tensors_and_missing_shards(tmp_path, tiny_ckpt):
    folder = tmp_path / "nan" / "unieval-sum"
    shutil.copytree(tiny_ckpt, folder)
    state = load_file(folder / "model.safetensors")
    state["encoder.final_layer_norm.weight"][3] = float("nan")
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    report = verify_checkpoint(folder)[0]
    assert not report.ok
    assert any("1 stored tensor(s) hold NaN or infinite values: encoder.final_layer_norm.weight" in m
               for m in report.messages)

    sharded = tmp_path / "sharded" / "unieval-sum"
    shutil.copytree(tiny_ckpt, sharded)
    state = load_file(sharded / "model.safetensors")
    (sharded / "model.safetensors").unlink()
    names = sorted(state)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for fname, keys in shards.items():
        save_file({k: state[k] for k in keys}, str(sharded / fname), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: f for f, ks in shards.items() for k in ks}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    assert verify_checkpoint(sharded)[0].ok
    (sharded / "model-00002-of-00002.safetensors").unlink()
    report = verify_checkpoint(sharded)[0]
    assert not report.ok
    fail = [m for m in report.messages if m.startswith("FAIL")]
    assert any("1 of 2 weight shards listed in model.safetensors.index.json are missing "
               "(model-00002-of-00002.safetensors)" in m for m in fail), fail
    assert not any("truncated" in m for m in fail)


# ----------------------------------------------------------------------------- also: linear window planning
class CountingCounter(FakeRunner):
    """Whitespace-word tokens; counts the words it tokenizes (the work planning does)."""

    def __init__(self):
        super().__init__()
        self.words = 0

    def count_plain(self, texts):
        self.words += sum(len(t.split()) for t in texts)
        return super().count_plain(texts)

    def cut_points(self, text, n_tokens):  # one pass over the text, as the T5 runner's
        self.words += len(text.split())
        words, points, pos = text.split(), [], 0
        for k, w in enumerate(words, 1):
            pos = text.index(w, pos) + len(w)
            if k % n_tokens == 0 and k < len(words):
                points.append(pos)
        return points + [len(text)]


@pytest.mark.parametrize("n_words", [6_000, 24_000])
def test_windows_of_text_without_sentences_take_linear_work(n_words):
    text = " ".join(f"w{i}" for i in range(n_words))  # an ASR transcript: no sentence punctuation
    counter = CountingCounter()
    windows = make_windows(text, [(0, len(text))], counter, budget=500, overlap=1)
    assert windows[0][0] == 0 and windows[-1][1] == len(text)
    assert len(windows) == n_words // 500 + (n_words % 500 > 0)
    assert counter.words <= 4 * n_words  # not n_words ** 2 / budget


def test_t5_cut_points_equal_repeated_cuts_on_one_tokenization(tiny_ckpt, summeval_records):
    from unieval_local.models.checkpoints import resolve_checkpoint
    from unieval_local.models.t5.runner import load_t5_model

    t5 = load_t5_model(resolve_checkpoint("unieval-sum", tiny_ckpt), "cpu", "float32")
    text = " ".join(r["source"] for r in summeval_records[:3]).replace(".", "")
    points = t5.cut_points(text, 100)
    assert points[-1] == len(text) and points == sorted(set(points))
    parts = [text[a:b] for a, b in zip([0, *points[:-1]], points)]
    assert "".join(parts) == text
    # re-tokenized alone, a part may gain a piece or two at its edges ("▁" tokens share offsets)
    counts = t5.count_plain(parts[:-1])
    assert all(98 <= n <= 102 for n in counts), counts


# ----------------------------------------------------------------------------- also: punctuation-only pieces
def test_punctuation_pieces_keep_parity_by_default_and_merge_on_request(fake_ckpt):
    text = "Is it good? ? Yes it is!! !! 1. The first point. 2. The second."
    assert DEFAULT_SPLITTER(text) == ["Is it good?", "?", "Yes it is!!", "!", "!", "1.", "The first point.", "2.",
                                      "The second."]
    merged = MergePunctuation()
    assert merged(text) == ["Is it good? ?", "Yes it is!! !!", "1. The first point.", "2. The second."]
    assert merged("?!") == ["?!"] and merged("") == [] and merged("Done. 3.") == ["Done. 3."]
    value = lambda p: 0.2 if "paragraph: ?" in p or "paragraph: !" in p or "paragraph: 1." in p else 0.8  # noqa
    rec = [{"target": "It rained. ?"}]
    plain = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(value)))
    assert plain.score(rec, aspect="fluency").overall.value == pytest.approx((0.8 + 0.2) / 2)  # UniEval's mean
    opt_in = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(value)), merge_punctuation=True)
    assert opt_in.score(rec, aspect="fluency").overall.value == pytest.approx(0.8)
    assert opt_in.signature("summarization", "fluency").splitter.endswith("+merge-punctuation")


# ----------------------------------------------------------------------------- also: messages that misled
def test_aspect_typos_get_a_did_you_mean_and_other_tasks_are_named():
    with pytest.raises(UnknownTaskError, match=r"unknown aspect 'coherance' .*did you mean 'coherence'"):
        DEFAULT_REGISTRY.get_aspect("summarization", "coherance")
    with pytest.raises(UnknownTaskError, match=r"'naturalness' .*an aspect of task dialogue, data2text"):
        DEFAULT_REGISTRY.get_aspect("summarization", "naturalness")


def test_fit_mode_does_not_call_minicheck_chunks_shortened(fake_ckpt):
    runner = FakeRunner(default=0.6)
    scorer = Scorer(model={"minicheck-flan-t5-large": fake_ckpt}, runner_factory=fake_factory(runner),
                    long_input="fit")
    rec = [{"target": "The vault was empty.", "source": "The vault in Oslo was empty. " * 200}]
    import warnings

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        scorer.score(rec, task="fact", aspect="support")
    assert not any("shortened" in str(w.message) for w in got)


def test_minicheck_truncation_advice_does_not_recommend_long_input(fake_ckpt):
    scorer = Scorer(model={"minicheck-flan-t5-large": fake_ckpt}, runner_factory=fake_factory(FakeRunner()),
                    max_length=40)
    rec = [{"target": "word " * 60, "source": "The vault in Oslo was empty."}]
    # issue 40: a claim too long for the window is no longer cut (a warning) but refused, field target
    from unieval_local.errors import InvalidExampleError

    with pytest.raises(InvalidExampleError, match=r"example 0, aspect 'support', field 'target': the target is too "
                                                  r"long to score: .*over the window of minicheck-flan-t5-large "
                                                  r"\(max_length 40 tokens\).*\(fact/sentence_support\)") as got:
        scorer.score(rec, task="fact", aspect="support")
    assert "long_input" not in str(got.value)


def test_enabled_metrics_as_one_string(fake_ckpt):
    from unieval_local.reports.rating import RatingConfig

    assert RatingConfig(enabled_metrics="coherence").enabled_metrics == ["coherence"]
    assert RatingConfig(enabled_metrics="coherence, fluency").enabled_metrics == ["coherence", "fluency"]
    from unieval_local.compat import SummarizationEvaluator

    assert SummarizationEvaluator(enabled_metrics="coherence").enabled_metrics == ["coherence"]


def test_custom_run_bodies_without_work_are_refused(tmp_path, fake_ckpt, capsys):
    for body, message in [({"evaluations": []}, "no evaluation ('evaluations' is empty)"),
                          ({"evaluations": [{"metrics": [{"metric": "summ"}], "data": []}]},
                           "holds no data row (every evaluations[i].data is empty)"),
                          ({"threshold": 80, "data": [{"input": "a", "output": "b"}]},
                           "not a list of records nor a custom-run request body")]:
        path = tmp_path / "body.json"
        path.write_text(json.dumps(body))
        assert main(["report", "--format", "summ", str(path), "--model", str(fake_ckpt), "--no-progress"]) \
            == EXIT_USAGE
        assert message in capsys.readouterr().err


def test_a_zero_n_key_points_row_is_an_error_row_naming_the_field(fake_ckpt):
    from unieval_local.engine import Engine
    from unieval_local.reports import make_report

    engine = Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner()))
    out = make_report([{"target": "A summary.", "source": "A document with facts. More facts here.",
                        "n_key_points": 0}], "summ", engine=engine, warn=False)
    assert out.reports[0].error.field == "n_key_points"
    assert "greater than or equal to 1" in out.reports[0].error.message


def test_a_home_folder_given_as_model_suggests_its_checkpoint(tmp_path, fake_ckpt):
    home = tmp_path / "home"
    shutil.copytree(fake_ckpt, home / "unieval-sum")
    scorer = Scorer(model=home, runner_factory=fake_factory(FakeRunner()))
    from unieval_local import CheckpointNotFoundError

    with pytest.raises(CheckpointNotFoundError, match=r"it is a home folder holding unieval-sum: pass '.*home/"
                                                      r"unieval-sum'"):
        scorer.score([{"target": "A.", "source": "B."}])
