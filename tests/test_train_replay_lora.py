"""``train --lora`` (peft adapters merged into a plain folder), ``--replay`` (the base's other aspects kept
with its own answers as soft targets) and ``--forgetting`` (the base's other aspects before and after),
on the tiny stand-ins of tests/test_train.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from test_train import MC, assert_scores_as_a_plain_forward, mc_base, verb_data, verb_rows, write_jsonl  # noqa: F401  fixtures

from unieval_local.cli import main


def train_cli(*args: str) -> int:
    return main(["train", *args, "--no-progress"])


def test_the_lora_folder_scores_as_a_plain_forward_of_its_merged_weights(mc_base, verb_data, tmp_path):
    """Only the adapters train (their count by hand: A is r x d_model, B is inner x r, on q and v of each of
    the stand-in's 2 encoder self-attentions and 2 + 2 decoder self/cross attentions); the saved folder holds
    exactly the base's tensor names (no lora_ key), is scored by ``score`` (no peft in the path) as the
    float64 reference forward of its weights (1e-6), and differs from the base."""
    out = tmp_path / "lora"
    assert train_cli(str(verb_data["train"]), "--dev", str(verb_data["dev"]), "--base", f"{MC}={mc_base}", "-o",
                     str(out), "--max-steps", "20", "--eval-steps", "10", "--bootstrap", "0", "--lora",
                     "--lora-rank", "4", "--optimizer", "adamw", "--learning-rate", "5e-3") == 0
    cfg = json.loads((mc_base / "config.json").read_text())
    r, d, inner = 4, cfg["d_model"], cfg["num_heads"] * cfg["d_kv"]
    attentions = cfg["num_layers"] + 2 * cfg.get("num_decoder_layers", cfg["num_layers"])
    lora = json.loads((out / "config.json").read_text())["unieval_local_training"]["lora"]
    assert lora["trainable_parameters"] == attentions * 2 * (r * d + inner * r)
    assert lora["targets"] == ["q", "v"]
    from safetensors import safe_open

    from unieval_local.models.t5.loading import stored_weight_names

    with safe_open(str(out / "model.safetensors"), "pt") as fh:
        saved = set(fh.keys())
    assert saved == set(stored_weight_names(mc_base))
    assert_scores_as_a_plain_forward(out, mc_base, tmp_path)
    report = json.loads((out / "training_report.json").read_text())
    assert report["forgetting"]["note"].startswith("forgetting not measured")


@pytest.fixture(scope="session")
def sum_base(tmp_path_factory, shared_data) -> Path:
    """A UniEval-format (Yes/No) T5 stand-in for unieval-sum: coherence, consistency, fluency, relevance."""
    from conftest import build_test_checkpoint

    return build_test_checkpoint(tmp_path_factory.mktemp("sumbase") / "unieval-sum", data_dir=shared_data,
                                 evaluator="unieval-sum", init_factor=1.5)


def _replay(base: Path, name: str, aspect: str, rows: list[dict], share: float, seed: int = 0):
    from unieval_local.models.checkpoints import resolve_checkpoint
    from unieval_local.models.train.readout import load_trainable
    from unieval_local.models.train.trainer import TrainSettings
    from unieval_local.registry.evaluators import get_evaluator
    from unieval_local.registry.user_aspects import registry_with
    from unieval_local.training.data import LabelledRows
    from unieval_local.training.replay import replay_items
    from unieval_local.training.run import _items

    ev = get_evaluator(name)
    trainable = load_trainable(resolve_checkpoint(name, {name: str(base)}), ev)
    registry = registry_with(None)
    task, _, a = aspect.partition("/")
    labelled = LabelledRows([{"target": r["target"], "source": r["source"]} for r in rows],
                            np.array([r["label"] for r in rows], dtype=np.int8), [f"row {i}" for i in range(len(rows))],
                            ())
    return replay_items(trainable, registry, task, registry.get_aspect(task, a), name, labelled, 100, share, seed,
                        512, TrainSettings(work_dir="unused"), _items, lambda line: None)


def test_replay_items_carry_the_base_s_own_scores_of_its_other_aspects(sum_base, tmp_path):
    """Training coherence, the replay queries are consistency and fluency (relevance needs references the
    records lack); with a share so large that every query is chosen, the soft targets equal what ``score``
    gives with the base, aspect by aspect, record by record (1e-5); at 0.2 they are 20% of the items
    (25 beside 100 training items), the seeded choice repeats, and 0 turns replay off."""
    rows = verb_rows(12, 5)
    items, summary = _replay(sum_base, "unieval-sum", "summarization/coherence", rows, 0.99)
    assert summary["aspects"] == ["consistency", "fluency"] and len(items) == 24
    src = write_jsonl(tmp_path / "rows.jsonl", [{"target": r["target"], "source": r["source"]} for r in rows])
    want = []
    for name in ("consistency", "fluency"):
        out = tmp_path / f"{name}.jsonl"
        assert main(["score", str(src), "--task", "summarization", "--aspect", name, "--model",
                     f"unieval-sum={sum_base}", "-o", str(out), "--no-progress"]) == 0
        want += [json.loads(line)["scores"][name] for line in out.read_text().splitlines()]
    assert np.max(np.abs(np.array([it.label for it in items]) - np.array(want))) < 1e-5
    assert len({round(it.label, 6) for it in items}) > 2  # real soft targets, not 0/1
    rows = verb_rows(60, 6)
    a, s = _replay(sum_base, "unieval-sum", "summarization/coherence", rows, 0.2)
    b, _ = _replay(sum_base, "unieval-sum", "summarization/coherence", rows, 0.2)
    assert s["items"] == len(a) == 25 and [x.ids for x in a] == [x.ids for x in b]
    assert _replay(sum_base, "unieval-sum", "summarization/coherence", rows, 0.0) == ([], {"note": "replay off (--replay 0)"})


def test_replay_is_a_noted_no_op_for_a_single_aspect_base(mc_base):
    """MiniCheck's other fact aspects ask its own question (sentence_support): nothing is replayed, and said."""
    items, summary = _replay(mc_base, MC, "fact/support", verb_rows(10, 3), 0.2)
    assert items == [] and "nothing replayed" in summary["note"]


def _summeval(tmp_path: Path, docs: int) -> Path:
    import subprocess
    import sys

    out = tmp_path / "summeval.jsonl"
    subprocess.run([sys.executable, str(Path(__file__).parents[1] / "scripts" / "convert_summeval.py"), str(out),
                    "--docs", str(docs)], check=True, capture_output=True)
    return out


def test_replay_and_the_forgetting_report_run_end_to_end(sum_base, tmp_path, capsys):
    """Coherence trained on the verb rule with 20% replay; the forgetting report on 1 SummEval document
    (16 rated summaries) names consistency, fluency and relevance, and its figures equal a plain
    computation: scipy's Spearman/Kendall of ``score``'s output of the base and of the trained folder
    against the human means, and their mean absolute difference."""
    from scipy import stats

    data = write_jsonl(tmp_path / "train.jsonl", verb_rows(120, 0))
    rated = _summeval(tmp_path, 1)
    out = tmp_path / "coh"
    assert train_cli(str(data), "--base", f"unieval-sum={sum_base}", "--aspect", "summarization/coherence", "-o",
                     str(out), "--max-steps", "6", "--eval-steps", "3", "--bootstrap", "0", "--optimizer", "adamw",
                     "--learning-rate", "1e-3", "--forgetting", str(rated), "--max-length", "256") == 0
    report = json.loads((out / "training_report.json").read_text())
    n_train = report["training"]["rows"]["train"]
    replay = report["training"]["replay"]
    assert replay["aspects"] == ["consistency", "fluency"] and replay["items"] == round(0.25 * n_train)
    forgetting = report["forgetting"]
    assert sorted(forgetting["aspects"]) == ["consistency", "fluency", "relevance"]
    rows = [json.loads(line) for line in rated.read_text().splitlines()]
    names = ["consistency", "fluency", "relevance"]
    got = {}
    for which, folder in (("before", sum_base), ("after", out)):
        scored = tmp_path / f"{which}.jsonl"
        assert main(["score", str(rated), "--task", "summarization", *[x for n in names for x in ("--aspect", n)],
                     "--model", f"unieval-sum={folder}", "-o", str(scored), "--no-progress", "--max-length",
                     "256"]) == 0
        lines = [json.loads(line)["scores"] for line in scored.read_text().splitlines()]
        got[which] = {n: np.array([ln[n] for ln in lines]) for n in names}
    for name, entry in forgetting["aspects"].items():
        human = np.array([r["human"][name] for r in rows])
        for which in ("before", "after"):
            assert entry[which]["spearman"] == pytest.approx(stats.spearmanr(got[which][name], human)[0], abs=1e-6)
            assert entry[which]["kendall"] == pytest.approx(stats.kendalltau(got[which][name], human)[0], abs=1e-6)
        assert entry["rows"] == 16
        change = float(np.mean(np.abs(got["after"][name] - got["before"][name])))
        assert entry["mean_abs_change"] == pytest.approx(change, abs=1e-6) and change > 0
    assert "forgetting on" in capsys.readouterr().out


def test_forgetting_fields_and_a_missing_human_score_are_named(tmp_path):
    """--forgetting-field parses ASPECT=FIELD pairs (a bare name refused); an unrated aspect is left out;
    a row without the human score is named with its field."""
    from unieval_local.errors import InputFileError
    from unieval_local.training.forgetting import _human, forgetting_fields

    assert forgetting_fields("coherence=coh, fluency=a.b") == {"coherence": "coh", "fluency": "a.b"}
    with pytest.raises(ValueError, match="ASPECT=FIELD"):
        forgetting_fields("coherence")
    recs = [{"human": {"fluency": 3.0}, "coh": 2}, {"human": {}, "coh": 4}]
    got = _human(recs, "f.jsonl", ["coherence", "relevance"], {"coherence": "coh"})
    assert list(got) == ["coherence"]  # relevance is not rated: left out
    with pytest.raises(InputFileError, match=r"f.jsonl: row 1: no field 'human.fluency'"):
        _human(recs, "f.jsonl", ["fluency"], {})
    assert _human(recs, "f.jsonl", ["coherence"], {"coherence": "coh"})["coherence"].tolist() == [2.0, 4.0]


def test_lora_on_deberta_adapts_query_and_value_and_trains_the_head(tmp_path, shared_data):
    """FactCG's DeBERTa: the trainable tensors are the adapters of every layer's query_proj and value_proj
    (2 x layers x 2 tensors, A and B) and the head's copies (pooler, classifier); merging gives back the
    plain class with the base's tensor names and the adapters' effect (B = 0 at the start: the merged
    weights equal the base's)."""
    import torch

    from make_test_checkpoint import build_factcg_checkpoint
    from unieval_local.models.checkpoints import resolve_checkpoint
    from unieval_local.models.train.lora import apply_lora, merge_lora
    from unieval_local.models.train.readout import load_trainable
    from unieval_local.registry.evaluators import get_evaluator

    name = "factcg-deberta-large"
    folder = build_factcg_checkpoint(tmp_path / name, data_dir=shared_data)
    trainable = load_trainable(resolve_checkpoint(name, {name: str(folder)}), get_evaluator(name))
    before = {k: v.clone() for k, v in trainable.module.state_dict().items()}
    cls = type(trainable.module)
    layers = trainable.module.config.num_hidden_layers
    info = apply_lora(trainable, rank=2)
    names = [n for n, p in trainable.module.named_parameters() if p.requires_grad]
    adapters = [n for n in names if "lora_" in n]
    assert len(adapters) == layers * 2 * 2
    assert all(("query_proj" in n or "value_proj" in n) for n in adapters)
    assert all("lora_" in n or "modules_to_save" in n for n in names)
    assert info.trainable == sum(p.numel() for p in trainable.module.parameters() if p.requires_grad)
    merge_lora(trainable)
    assert type(trainable.module) is cls
    after = trainable.module.state_dict()
    assert set(after) == set(before)
    assert all(torch.equal(after[k], before[k]) for k in before)
