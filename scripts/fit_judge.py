"""Briefly fit a judge stand-in to write its rating prefix (``make_test_checkpoint.py --fit judge``).

A random-weight decoder never writes a judge's rating prefix, so every judgement of a plain
stand-in fails (``truncated``). This fits a llama-layout stand-in built for ``--evaluator themis``
or ``--evaluator prometheus-7b-v2.0`` with ``scripts/fit_claims.py``'s loop (:func:`fit_rows`:
seeded, full-batch AdamW, loss on the answer tokens only) to answer the judge's own prompt
(:mod:`unieval_local.text.judges`) for a few SummEval examples (:func:`fit_examples`), under each
of the judge's four aspects, with a short rationale (:func:`rationale`), the
format's rating prefix (``Rating: `` for Themis, ``[RESULT] `` for Prometheus 2) and the
example's rating (its expert mean for the aspect, rounded), then the end-of-sequence token.

The rationale and prefix are taught on the prompt as generation sees it (``runner.render_prompt``
of the fitted query); the rating digit on the read as :mod:`unieval_local.models.judging` makes it
(the same query with ``prefix = rationale + forced``), in one row when the read's tokens start with
the prompt's, else in two. The rationale is the same for every example and aspect, so that the
stand-in writes it (and the prefix) on other texts too; the rating it gives them means nothing.
Seeded, deterministic on one machine; well under a CPU minute at the test widths.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from fit_claims import fit_rows

#: default number of fitted SummEval examples, optimiser steps and learning rate
N_EXAMPLES, STEPS, LR = 2, 120, 3e-3
#: the sentences of each fitted article kept
SENTENCES = 2
#: the judges this fits, with their aspects' prefix in the summarization task
JUDGES = {"themis": "themis", "prometheus-7b-v2.0": "prometheus"}
ASPECTS = ("coherence", "consistency", "fluency", "relevance")


def fit_examples(data_dir: Path, n: int = N_EXAMPLES) -> list[dict]:
    """The ``n`` SummEval examples fitted: the ``n`` shortest articles of
    ``data_dir/summeval/summeval_test_100.json`` (ties by text), each cut to its first
    :data:`SENTENCES` sentences (the package's default splitter: short prompts fit fast, and the
    stand-in then also writes its prefix after short sources), with its first machine summary and
    that summary's expert ratings (``{"source", "target", "ratings": {aspect: 1..5}}``, the mean
    of the three experts rounded half up).

    Raises:
        SystemExit: the file is not there.
    """
    path = Path(data_dir) / "summeval" / "summeval_test_100.json"
    if not path.is_file():
        raise SystemExit(f"error: --fit judge needs {path} (set UNIEVAL_SHARED_DATA or --data-dir)")
    rows = sorted((r["row"] for r in json.loads(path.read_text(encoding="utf-8"))["rows"]),
                  key=lambda r: (len(r["text"]), r["text"]))
    from unieval_local.text.sentences import DEFAULT_SPLITTER

    out = []
    for r in rows[:n]:
        ratings = {a: min(5, max(1, math.floor(float(r[a][0]) + 0.5))) for a in ASPECTS}
        out.append({"source": " ".join(DEFAULT_SPLITTER(r["text"])[:SENTENCES]), "target": r["machine_summaries"][0],
                    "ratings": ratings})
    return out


def rationale(evaluator: str) -> str:
    """The generated text the stand-in learns before the rating prefix (what the judge's parse
    returns as its rationale), the same for every aspect and example: Themis's analysis ends with a
    newline (its rating goes "on the next line"); Prometheus's feedback with the space before
    ``[RESULT]``."""
    if evaluator == "themis":
        return "The summary was read against the article and the criterion.\n"
    return "The response was read against the instruction and the rubric. "


def fit_judge(folder: str | Path, *, evaluator: str, data_dir: str | Path, n_examples: int = N_EXAMPLES,
              steps: int = STEPS, lr: float = LR, seed: int = 0) -> list[dict]:
    """Fit the judge stand-in in ``folder`` (``build_causal_lm_checkpoint(..., evaluator=evaluator)``)
    in place (module docstring).

    Returns:
        The fitted examples (:func:`fit_examples`).

    Raises:
        ValueError: ``evaluator`` is not ``themis`` or ``prometheus-7b-v2.0``.
    """
    if evaluator not in JUDGES:
        raise ValueError(f"--fit judge fits {' or '.join(JUDGES)}, not {evaluator!r}")
    from unieval_local.models.causal_lm.runner import _ids
    from unieval_local.registry.tasks import DEFAULT_REGISTRY
    from unieval_local.text.chat import ChatQuery

    examples = fit_examples(Path(data_dir), n_examples)

    def rows(runner, tok):
        out = []
        for a in ASPECTS:
            aspect = DEFAULT_REGISTRY.get_aspect("summarization", f"{JUDGES[evaluator]}_{a}")
            fmt = runner.evaluator.prompt_format
            for ex in examples:
                query, _ = fmt.query(aspect, ex["source"], ex["target"])
                query = ChatQuery.decode(runner.fit_prompt(query.encode()[0], max_length=runner.evaluator.max_length))
                prompt = _ids(runner.model, runner.render_prompt(query.encode()[0]))
                text = rationale(evaluator)
                read = dataclasses.replace(query, readout="rating-mass", prefix=query.prefix + text + query.forced,
                                           cut=None)
                read_ids = _ids(runner.model, runner.render_prompt(read.encode()[0]))
                tail = [tok.convert_tokens_to_ids(str(ex["ratings"][a])), tok.eos_token_id]
                if read_ids[:len(prompt)] == prompt:
                    out.append((prompt, read_ids[len(prompt):] + tail))
                else:  # the rationale's first token merges with the prompt's end: teach the two apart
                    out.append((prompt, _ids(runner.model, text + query.stop)))
                    out.append((read_ids, tail))
        return out

    fit_rows(folder, rows, evaluator=evaluator, tag="judge", steps=steps, lr=lr, seed=seed)
    return examples
