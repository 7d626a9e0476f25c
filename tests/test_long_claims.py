"""Over-long claims never lose a file (issue 40, "longinput"): a target (or one of its sentences)
too long for an evaluator's window is an error row of that record, naming the field ``target``, the
window and what to do, and every other record is scored as it would be alone, through the real
``score`` command on each backend: T5 (MiniCheck), the DeBERTa pair classifier (mdeberta-nli,
whose tokenizer raised "Sequence to truncate too short" for the whole batch), the one-text
classifier (FactCG), HHEM, and the causal LM (Granite Guardian, G-Eval). Also: the truncation
note's advice per evaluator, and the field a too-long claim's cut is named in."""

from __future__ import annotations

import json
import math

import pytest

from make_test_checkpoint import (build_causal_lm_checkpoint, build_factcg_checkpoint, build_hhem_checkpoint,
                                  build_nli_checkpoint, build_test_checkpoint)

from unieval_local.cli import main

SOURCE = "The council met on Monday in the town hall. It approved the budget for the new park."
SHORT = "The council approved the budget."
#: one sentence (no full stop inside) of several hundred tokens in every stand-in's tokenizer
LONG = " ".join(f"the council approved item number {i} of the budget plan and" for i in range(40)) + " more."
MAX_LENGTH = 160  # G-Eval's form alone is longer: 512 there

#: aspect -> (task, evaluator, how to build its stand-in checkpoint into a folder)
BACKENDS = {
    "support": ("fact", "minicheck-flan-t5-large",
                lambda d, data: build_test_checkpoint(d, data_dir=data, layout="v1.1", answers=("1", "0"))),
    "nli_support": ("fact", "mdeberta-nli", lambda d, data: build_nli_checkpoint(d, data_dir=data)),
    "factcg": ("fact", "factcg-deberta-large", lambda d, data: build_factcg_checkpoint(d, data_dir=data)),
    "hhem": ("fact", "hhem-2.1-open", lambda d, data: build_hhem_checkpoint(d, data_dir=data)),
    "groundedness": ("fact", "granite-guardian-3.3-8b",
                     lambda d, data: build_causal_lm_checkpoint(d, layout="granite", data_dir=data, seed=4,
                                                                evaluator="granite-guardian-3.3-8b")),
    "geval_coherence": ("summarization", "g-eval",
                        lambda d, data: build_causal_lm_checkpoint(d, layout="qwen2", data_dir=data, seed=3)),
}


def window(aspect):
    return 512 if aspect.startswith("geval_") else MAX_LENGTH


def score_file(tmp_path, name, records, task, aspect, evaluator, folder):
    """``unieval-local score`` of ``records`` into a fresh output: (exit status, output lines)."""
    src, out = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    status = main(["score", str(src), "--task", task, "--aspect", aspect, "--model", f"{evaluator}={folder}",
                   "--max-length", str(window(aspect)), "--device", "cpu", "--no-progress", "-o", str(out)])
    return status, [json.loads(x) for x in out.read_text().splitlines()]


@pytest.mark.parametrize("aspect", list(BACKENDS))
def test_an_over_long_target_is_an_error_row_and_the_other_record_is_scored_as_alone(
        tmp_path, shared_data, aspect, capsys):
    task, evaluator, build = BACKENDS[aspect]
    folder = build(tmp_path / evaluator, shared_data)
    short = {"target": SHORT, "source": SOURCE}
    status, lines = score_file(tmp_path, "two", [{"target": LONG, "source": SOURCE}, short], task, aspect,
                               evaluator, folder)
    assert status == 1  # docs/exit-status.md: some records failed, each has an error record
    assert [x["index"] for x in lines] == [0, 1]
    error = lines[0]["error"]
    assert error["type"] == "InvalidExample"
    assert error["message"].startswith(f"aspect '{aspect}', field 'target': ")
    assert f"over the window of {evaluator} (max_length {window(aspect)} tokens)" in error["message"] and "is never cut" in error["message"]
    alone_status, alone = score_file(tmp_path, "one", [short], task, aspect, evaluator, folder)
    assert alone_status == 0
    assert lines[1]["scores"] == alone[0]["scores"]
    assert math.isfinite(lines[1]["scores"][aspect])  # scored (G-Eval's on its 1-5 scale)
    assert "Traceback" not in capsys.readouterr().err


def test_the_truncation_note_advises_each_self_chunking_evaluator_in_its_own_terms():
    from unieval_local.pipeline.jobs import RunStats, truncation_message

    def note(evaluator):
        stats = RunStats(n_queries=3, n_truncated=1, truncated_by={evaluator: 1}, truncated_fields={"source": 1})
        return truncation_message(stats, {evaluator: 512}, "truncate", cli=True)

    assert note("minicheck-flan-t5-large").endswith(
        "minicheck-flan-t5-large reads the document in chunks of --chunk-words N words whatever --long-input says, "
        "each cut to fit the window, so the claim alone nearly fills it: check long claims sentence by sentence "
        "(fact/sentence_support); --evidence shows which")
    for evaluator in ("factcg-deberta-large", "granite-guardian-3.3-8b"):
        text = note(evaluator)
        assert "sentence_support" not in text
        assert (f"so the claim alone nearly fills it: split long claims into shorter ones (a user-defined aspect on "
                f"{evaluator} with granularity: sentence checks each sentence)") in text
    assert "split the target's long sentences (fact/nli_support checks each sentence)" in note("mdeberta-nli")


class WordCounter:
    """Tokens = whitespace words, plus one end token."""

    def count(self, texts):
        return [len(t.split()) + 1 for t in texts]

    def cut(self, text, n):
        words = text.split()
        return len(" ".join(words[:n]))


def test_a_cut_is_named_in_the_target_when_the_claim_alone_is_over_the_window():
    from unieval_local.pipeline.evidence import truncated_field

    document, claim = "one two three four", "a b c d e f g h"
    prompt = document + "|" + claim
    spans = [("source", 0, len(document)), ("target", len(document) + 1, len(prompt))]
    # Granite's, mdeberta-nli's and HHEM's backends cut the source: so the cut fell in it...
    assert truncated_field(prompt, spans, WordCounter(), 10, cut_field="source") == "source"
    # ...unless the rest alone (8 words + 1 = 9 tokens here) is over the window: the target could not be kept
    assert truncated_field(prompt, spans, WordCounter(), 9, cut_field="source") == "source"
    assert truncated_field(prompt, spans, WordCounter(), 8, cut_field="source") == "target"
