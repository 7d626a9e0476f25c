"""Issue 40 (signatures, default set): a run over several evaluators signs each one with its own
settings (score's stderr and sidecar, ``benchmark --json``, ``EvaluationResult.signatures``), and
the default aspect set and ``--aspect all`` are one and the same: a record lacking an aspect's
fields is scored for the others with a note, while an aspect named stays an error row."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_factcg_checkpoint, build_test_checkpoint  # noqa: E402

from unieval_local import Scorer  # noqa: E402
from unieval_local.cli import EXIT_OK, EXIT_ROWS_FAILED, main  # noqa: E402
from unieval_local.errors import InvalidExampleError  # noqa: E402

MC, FCG = "minicheck-flan-t5-large", "factcg-deberta-large"


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def checkers(tmp_path_factory, shared_data) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sig-ckpts")
    return {MC: build_test_checkpoint(root / MC, data_dir=shared_data, layout="v1.1", answers=("1", "0"),
                                      evaluator=MC),
            FCG: build_factcg_checkpoint(root / FCG, data_dir=shared_data)}


def models(checkers) -> list[str]:
    return [x for name, folder in checkers.items() for x in ("--model", f"{name}={folder}")]


CLAIMS = [{"id": "a", "target": "The bridge opened on Monday.",
           "source": "The new bridge in Arden opened on Monday. It cost ten million pounds."},
          {"id": "b", "target": "The museum cost nothing.",
           "source": "The museum in Bexley opened on Friday. The council paid twelve million pounds for it."}]


# ----------------------------------------------------------------------------- signatures
def test_score_over_two_evaluators_prints_and_keeps_one_signature_each_with_its_own_chunk_words(
        tmp_path, checkers, capsys):
    src, out = write(tmp_path / "in.jsonl", CLAIMS), tmp_path / "o.jsonl"
    assert main(["score", str(src), "--task", "fact", "--aspect", "support", "--aspect", "factcg",
                 "--no-progress", "--device", "cpu", "-o", str(out), *models(checkers)]) == EXIT_OK
    err = capsys.readouterr().err
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    sigs = meta["signatures"]
    assert sorted(sigs) == [FCG, MC] and meta["signature"] is None  # the sidecar's keys are sorted
    # each evaluator's own settings: MiniCheck reads chunks of 500 words, FactCG of 550
    assert "|aspect:support|" in sigs[MC] and "|chunk:500w|" in sigs[MC] and "|maxlen:2048|" in sigs[MC]
    assert "|aspect:factcg|" in sigs[FCG] and "|chunk:550w|" in sigs[FCG]
    assert "|chunk:500w|" not in sigs[FCG]
    # printed on stderr, one line per evaluator, and no single line pretending to cover both
    assert (f"\nsignatures (one per evaluator, over the aspects it scored):\n  {MC}: {sigs[MC]}\n"
            f"  {FCG}: {sigs[FCG]}") in err
    assert "\nsignature: " not in err
    # equal to the Python API's signatures of the same two aspects (same engine settings)
    scorer = Scorer(model={n: str(f) for n, f in checkers.items()}, device="cpu", progress=False)
    result = scorer.evaluate([{k: v for k, v in c.items() if k != "id"} for c in CLAIMS], task="fact",
                             aspects=["support", "factcg"])
    assert {n: str(s) for n, s in result.signatures.items()} == sigs
    assert result.signature is None
    assert result.signatures[FCG] == result.per_aspect["factcg"].signature


def test_one_evaluator_keeps_its_one_signature_line(tmp_path, checkers, capsys):
    src, out = write(tmp_path / "in.jsonl", CLAIMS), tmp_path / "o.jsonl"
    assert main(["score", str(src), "--task", "fact", "--aspect", "support", "--aspect", "sentence_support",
                 "--no-progress", "--device", "cpu", "-o", str(out), *models(checkers)]) == EXIT_OK
    err = capsys.readouterr().err
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    assert list(meta["signatures"]) == [MC] and meta["signature"] == meta["signatures"][MC]
    assert "|aspect:support+sentence_support|" in meta["signature"]
    assert f"\nsignature: {meta['signature']}" in err and "signatures (one per evaluator" not in err
    scorer = Scorer(model={MC: str(checkers[MC])}, device="cpu", progress=False)
    result = scorer.evaluate(CLAIMS[:1], task="fact", aspects=["support", "sentence_support"])
    assert result.signature == result.per_aspect["support"].signature.model_copy(
        update={"aspect": "support+sentence_support"})
    assert list(result.signatures) == [MC]


def test_benchmark_json_holds_one_signature_per_evaluator(tmp_path, checkers, capsys):
    rows = [{"claim": c["target"], "doc": c["source"], "label": i % 2} for i, c in enumerate(CLAIMS * 3)]
    data, out, js = write(tmp_path / "test.jsonl", rows), tmp_path / "out", tmp_path / "f.json"
    page = tmp_path / "page.html"
    status = main(["benchmark", "labelled", str(data), "-o", str(out), "--json", str(js), "--aspect", "fact/support",
                   "--aspect", "fact/factcg", "--bootstrap", "0", "--folds", "2", "--no-progress", "--device", "cpu",
                   "--html", str(page), *models(checkers)])
    err = capsys.readouterr().err
    assert status == 0, err
    got = json.loads(js.read_text())["signatures"]
    meta = json.loads((out / "test.scores.jsonl.meta.json").read_text())
    assert got == meta["signatures"] and sorted(got) == [FCG, MC]
    assert "|chunk:500w|" in got[MC] and "|chunk:550w|" in got[FCG]
    # printed for citing (the fresh-user trial found none on the terminal), and on the HTML page
    for name in (FCG, MC):
        assert f"unieval-local: signature ({name}): {got[name]}\n" in err
        assert f"<pre>{got[name]}</pre>" in page.read_text().replace("&#43;", "+")


# ----------------------------------------------------------------------------- the default set
SUMS = [{"id": "a", "target": "The cat sat. It purred.", "source": "A cat sat on a mat.",
         "references": ["A cat sat on the mat."]},
        {"id": "b", "target": "A dog ran.", "source": "The dog ran home."}]


def test_default_and_all_write_the_same_bytes_and_note_the_aspect_a_record_lacks(tmp_path, tiny_ckpt, capsys):
    src = write(tmp_path / "in.jsonl", SUMS)
    outs = {}
    for name, flags in (("default", []), ("all", ["--aspect", "all"])):
        outs[name] = tmp_path / f"{name}.jsonl"
        assert main(["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "-o", str(outs[name]),
                     *flags]) == EXIT_OK
    assert outs["default"].read_bytes() == outs["all"].read_bytes()
    a, b = read(outs["default"])
    assert list(a["scores"]) == ["coherence", "consistency", "fluency", "relevance"] and "notes" not in a
    assert a["aspect_mean"] == pytest.approx(float(np.mean(list(a["scores"].values()))), abs=1e-12)
    assert list(b["scores"]) == ["coherence", "consistency", "fluency"]
    assert b["notes"] == ["relevance skipped: no references"]
    assert "aspect_mean" not in b  # it would average other aspects than aspect_mean_of's
    assert "skipped aspect" not in capsys.readouterr().err
    # the scores b keeps are the ones a run naming those aspects gives it
    named = tmp_path / "named.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "-o", str(named),
                 "--aspect", "coherence", "--aspect", "consistency", "--aspect", "fluency"]) == EXIT_OK
    assert read(named)[1]["scores"] == pytest.approx(b["scores"], abs=1e-6)


def test_relevance_named_is_an_error_row_for_the_record_without_references(tmp_path, tiny_ckpt):
    src, out = write(tmp_path / "in.jsonl", SUMS), tmp_path / "o.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "-o", str(out),
                 "--aspect", "coherence", "--aspect", "relevance"]) == EXIT_ROWS_FAILED
    a, b = read(out)
    assert list(a["scores"]) == ["coherence", "relevance"]
    assert b["error"]["type"] == "InvalidExample"
    assert b["error"]["message"] == ("aspect 'relevance', field 'references': summarization/relevance needs "
                                     "'references', a non-empty list of non-empty reference texts; it is missing")


def test_python_default_and_all_refuse_alike(tiny_ckpt):
    scorer = Scorer(model=str(tiny_ckpt), device="cpu", progress=False)
    data = [{k: v for k, v in r.items() if k != "id"} for r in SUMS]
    messages = []
    for aspects in (None, "all"):
        with pytest.raises(InvalidExampleError) as info:
            scorer.evaluate(data, task="summarization", aspects=aspects)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "needs 'references'" in messages[0]
