"""Evidence (per-sentence scores, truncation flags) and long inputs (truncate / fit / chunk)."""

import json
import warnings

import numpy as np
import pytest

from unieval_local import InvalidExampleError, Scorer
from unieval_local.cli import main
from unieval_local.pipeline.planning import build_plan, make_windows
from unieval_local.text.sentences import DEFAULT_SPLITTER
from unieval_local.registry.tasks import get_aspect

from conftest import FakeRunner, fake_factory

MARKER = "The treasurer secretly moved the vault to Oslo."


def long_source(n_words=5000):
    filler = "The committee discussed the budget for the next year in some detail."
    sentences = [filler] * (n_words // len(filler.split()))
    return " ".join(sentences + [MARKER])


def word_scorer(fake_ckpt, mode, **kw):
    """A fake runner over whitespace 'tokens' (EOS counts as one): says Yes (0.99) only when the
    marker sentence survives truncation to ``max_length`` in the prompt, else 0.01."""
    runner = FakeRunner(lambda kept: 0.99 if MARKER in kept else 0.01)
    return Scorer(model=fake_ckpt, runner_factory=fake_factory(runner), long_input=mode, **kw), runner


def test_marker_at_the_end_is_found_in_chunk_mode_and_missed_in_truncate_mode(fake_ckpt):
    source = long_source()
    rec = {"target": "The vault went to Oslo.", "source": source}
    s, _ = word_scorer(fake_ckpt, "truncate", max_length=1024)
    with pytest.warns(UserWarning, match=r"1 of 1 distinct queries were longer than max_length \(unieval-sum 1024 tokens\) and lost their "
                      r"end; the cut fell in: source \(1\); long_input='chunk' reads long fields whole"):
        r = s.score([rec], aspect="consistency", evidence=True)
    assert r.examples[0].value == pytest.approx(0.01)
    q = r.examples[0].evidence.queries[0]
    assert q.truncated and q.tokens_dropped == q.n_tokens - 1024 and q.truncated_field == "source"

    s, runner = word_scorer(fake_ckpt, "chunk", max_length=1024)
    r = s.score([rec], aspect="consistency", evidence=True)
    assert r.examples[0].value == pytest.approx(0.99)
    ev = r.examples[0].evidence
    assert not ev.truncated and len(ev.queries) > 5
    win = ev.sentences[0].window
    assert win.field == "source" and MARKER in source[win.start:win.end]
    assert all(len(p.split()) + 1 <= 1024 for p in runner.prompts)
    # coherence is a mean over windows, not a max
    r = s.score([rec], aspect="coherence")
    assert 0.01 < r.examples[0].value < 0.2


def test_fit_never_cuts_the_target(fake_ckpt):
    rec = {"target": "The vault went to Oslo. " + MARKER, "source": long_source()}
    s, runner = word_scorer(fake_ckpt, "fit", max_length=300)
    r = s.score([rec], aspect="consistency", evidence=True)
    for q, p in zip(r.examples[0].evidence.queries, runner.prompts):
        assert not q.truncated and q.window.field == "source" and q.window.start == 0
        assert len(p.split()) + 1 <= 300
    assert r.examples[0].evidence.sentences[1].value == pytest.approx(0.99)  # the claim itself is whole
    too_long = {"target": " ".join(["word"] * 400) + ".", "source": "short source."}
    with pytest.raises(InvalidExampleError, match="target is too long to score"):
        s.score([too_long], aspect="coherence")


def test_prompts_that_fit_are_unchanged_in_every_mode(tiny_ckpt, summeval_records):
    recs = summeval_records[:6:2]  # short sources
    base = Scorer(model=tiny_ckpt, max_length=4096)
    want = [e.value for e in base.score(recs, aspect="consistency").examples]
    for mode in ("fit", "chunk"):
        s = Scorer(model=tiny_ckpt, max_length=4096, long_input=mode)
        assert [e.value for e in s.score(recs, aspect="consistency").examples] == pytest.approx(want, abs=1e-7)


def test_truncation_flags_just_below_and_above_max_length(tiny_ckpt):
    s = Scorer(model=tiny_ckpt, max_length=64)
    runner = s.runner("unieval-sum")  # a T5Runner: counts tokens as the model does
    words = "the council met on monday and agreed on the new budget for schools and roads".split()
    src = ""
    while True:  # grow the source until the coherence prompt is exactly 64 tokens
        cand = (src + " " + words[len(src.split()) % len(words)]).strip()
        prompt = f"question: Is this a coherent summary to the document? </s> summary: Budget agreed. </s> document: {cand}"
        if runner.count([prompt])[0] > 64:
            break
        src = cand
    at = {"target": "Budget agreed.", "source": src}
    over = {"target": "Budget agreed.", "source": cand}  # one word more: just over
    n_at = runner.count([f"question: Is this a coherent summary to the document? </s> summary: Budget agreed. </s> document: {src}"])[0]
    assert 60 <= n_at <= 64
    with warnings.catch_warnings(record=True):
        r = s.score([at, over], aspect="coherence", evidence=True)
    q_at, q_over = (e.evidence.queries[0] for e in r.examples)
    assert (q_at.truncated, q_at.tokens_dropped, q_at.n_tokens) == (False, 0, n_at)
    assert q_over.truncated and q_over.tokens_dropped == q_over.n_tokens - 64 >= 1
    assert q_over.truncated_field == "source"


def test_evidence_sentences_join_back_and_reproduce_the_score(tiny_ckpt, summeval_records, shared_data):
    s = Scorer(model=tiny_ckpt)
    recs = summeval_records[:5]
    r = s.score(recs, aspect="fluency", evidence=True)
    for rec, ex in zip(recs, r.examples):
        sents = ex.evidence.sentences
        assert [rec["target"][x.start:x.end] for x in sents] == [x.text for x in sents] == DEFAULT_SPLITTER(rec["target"])
        assert np.mean([x.value for x in sents]) == pytest.approx(ex.value, abs=1e-12)
        assert [q.value for q in ex.evidence.queries] == [x.value for x in sents]
    assert r.examples[0].model_dump(exclude_none=True)["evidence"]["sentences"][0]["start"] == 0
    dialog = json.loads((shared_data / "unieval-reproduce/data/dialogue/topical_chat.json").read_text())[:3]
    r = s.score(dialog, task="dialogue", aspect="engagingness", evidence=True)
    for ex in r.examples:  # a SUM over sentences
        assert sum(x.value for x in ex.evidence.sentences) == pytest.approx(ex.value, abs=1e-12)
    plain = s.score(recs, aspect="fluency")
    assert plain.examples[0].evidence is None and "evidence" not in plain.examples[0].model_dump(exclude_none=True)


def test_dialogue_history_is_windowed_by_whole_turns(fake_ckpt):
    turns = [f"turn {i} " + " ".join(["talk"] * 30) for i in range(60)]
    rec = {"target": "Sure.", "source": " \n ".join(turns) + " \n\n", "context": "a fact\n"}
    s, runner = word_scorer(fake_ckpt, "chunk", max_length=200, window_overlap=2)
    r = s.score([rec], task="dialogue", aspect="coherence", evidence=True)
    windows = [q.window for q in r.examples[0].evidence.queries]
    assert len(windows) > 5
    src = rec["source"]
    for w in windows:
        text = src[w.start:w.end]
        assert text.startswith("turn ") and text.endswith("talk")  # whole turns only
    assert windows[1].start < windows[0].end  # overlap


def test_make_windows_cover_everything_with_overlap():
    class Counter:
        def count_plain(self, texts):
            return [len(t.split()) for t in texts]

        def cut(self, text, n):
            return len(" ".join(text.split()[:n]))

    text = " ".join(f"s{i} " + "w " * (i % 7) + "." for i in range(40))
    spans = DEFAULT_SPLITTER.spans(text)
    wins = make_windows(text, spans, Counter(), budget=20, overlap=1)
    assert wins[0][0] == 0 and wins[-1][1] == spans[-1][1]
    assert all(len(text[a:b].split()) <= 20 for a, b in wins)
    for (a0, b0), (a1, b1) in zip(wins, wins[1:]):
        assert a0 < a1 < b0 <= b1  # consecutive windows overlap by whole sentences and move on


def test_chunk_mode_on_real_meetings_through_the_cli(tmp_path, tiny_ckpt, shared_data):
    import sys

    sys.path.insert(0, str(shared_data.parents[1] / "main" / "scripts"))
    from convert_qmsum import convert

    # one meeting (10,529 words): windows over the whole transcript for both aspects
    rows = [json.loads(x) for x in (shared_data / "qmsum" / "test.jsonl").read_text().splitlines()[:1]]
    src = tmp_path / "q.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in convert(rows)))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "consistency", "--aspect", "coherence",
                 "--long-input", "chunk", "--evidence", "-o", str(out), "--no-progress"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 1
    for line, rec in zip(lines, convert(rows)):
        qs = line["evidence"]["consistency"]["queries"]
        assert not any(q["truncated"] for q in qs) and max(q["n_tokens"] for q in qs) <= 1024
        ends = max(q["window"]["end"] for q in qs)
        assert ends == len(rec["source"].rstrip()) or ends >= len(rec["source"]) - 5  # the whole transcript is read


def test_bad_long_input_settings():
    with pytest.raises(ValueError, match="long_input must be one of"):
        Scorer(long_input="squeeze")
    with pytest.raises(ValueError, match="window_overlap"):
        Scorer(window_overlap=-1)
    with pytest.raises(ValueError, match="needs a token counter"):
        build_plan([], [get_aspect("summarization", "coherence")], DEFAULT_SPLITTER, long_input="fit")
