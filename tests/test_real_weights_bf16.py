"""bfloat16 fidelity with the official UniEval weights (issue 43, item 2): marked ``real_weights``,
skipped where ``$UNIEVAL_LOCAL_HOME`` holds no ``unieval-sum`` (the ``real_home`` fixture).

Two promises of docs/speed.md ("bfloat16, evaluator by evaluator"):

* ``verify --known-answers`` run in bfloat16 stays within :data:`BF16_KNOWN_ANSWERS_TOLERANCE`
  (2e-2) of the published scores (float32 stays within 1e-4, the command's own tolerance);
* SummEval sample-level Spearman correlations with the human ratings (the first
  :data:`DOCS` documents x 16 systems, the four summarization aspects) move by less than
  :data:`BF16_CORRELATION_SHIFT` (0.02) between float32 and bfloat16.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from convert_summeval import convert  # noqa: E402

from unieval_local import Scorer  # noqa: E402

#: Largest |bfloat16 score - published score| ``verify --known-answers`` may show (docs/speed.md).
BF16_KNOWN_ANSWERS_TOLERANCE = 2e-2
#: Largest |Spearman(bf16, human) - Spearman(fp32, human)| on the SummEval slice (docs/speed.md).
BF16_CORRELATION_SHIFT = 0.02
#: SummEval documents (x 16 systems) in the correlation slice.
DOCS = 3
ASPECTS = ("coherence", "consistency", "fluency", "relevance")


@pytest.mark.real_weights
def test_known_answers_in_bfloat16_stay_within_the_looser_tolerance(real_home):
    from unieval_local.cli.verify import known_answers_check

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "bfloat16 on CPU ..." and the score cache's
        check = known_answers_check(real_home / "unieval-sum", evaluator="unieval-sum", dtype="bfloat16")
    assert check.error is None, check.error
    assert check.sets and check.n > 0  # the published sets of unieval-sum were scored
    assert "dtype:bfloat16" in (check.signature or "")  # it really ran in bfloat16
    assert check.max_diff <= BF16_KNOWN_ANSWERS_TOLERANCE, [(s.name, s.max_diff, s.where) for s in check.sets]


@pytest.mark.real_weights
def test_summeval_correlations_move_little_in_bfloat16(real_home, shared_data):
    from scipy.stats import spearmanr

    raw = json.loads((shared_data / "summeval" / "summeval_raw.json").read_text(encoding="utf-8"))
    records = convert(raw, docs=DOCS)
    human = {a: np.array([r["human"][a] for r in records]) for a in ASPECTS}
    data = [{k: r[k] for k in ("source", "target", "references")} for r in records]
    rho = {}
    for dtype in ("float32", "bfloat16"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            scorer = Scorer(model={"unieval-sum": str(real_home / "unieval-sum")}, device="cpu", dtype=dtype)
            result = scorer.evaluate(data, task="summarization", aspects=list(ASPECTS))
        assert f"dtype:{dtype}" in str(result.per_aspect["coherence"].signature)
        rho[dtype] = {a: spearmanr([e.scores[a] for e in result.examples], human[a]).statistic for a in ASPECTS}
    shift = {a: abs(rho["bfloat16"][a] - rho["float32"][a]) for a in ASPECTS}
    assert all(np.isfinite(v) for v in rho["float32"].values())
    assert max(shift.values()) < BF16_CORRELATION_SHIFT, (rho, shift)


def test_known_answers_check_scores_in_the_dtype_asked(tiny_ckpt, summeval_records):
    """Without real weights: the check's ``dtype`` reaches the Scorer. Against answers that ARE the
    float32 scores, float32 differs by 0 and bfloat16 by exactly max |bf16 - fp32| of a direct run."""
    from unieval_local.cli.verify import known_answers_check
    from unieval_local.models.known_answers import KnownAnswerSet

    data = [{k: r[k] for k in ("source", "target", "references")} for r in summeval_records[:3]]
    aspects = ["coherence", "fluency"]

    def scores(dtype):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = Scorer(model={"unieval-sum": str(tiny_ckpt)}, device="cpu", dtype=dtype).evaluate(
                data, task="summarization", aspects=aspects)
        return np.array([[e.scores[a] for a in aspects] for e in result.examples])

    f32, b16 = scores("float32"), scores("bfloat16")
    answers = KnownAnswerSet(name="fp32", evaluator="unieval-sum", task="summarization", aspects=tuple(aspects),
                             examples=tuple(data), expected=tuple(dict(zip(aspects, row)) for row in f32.tolist()),
                             ids=tuple(str(i) for i in range(len(data))), source="this test")
    exact = known_answers_check(tiny_ckpt, [answers], evaluator="unieval-sum")
    assert exact.max_diff == 0.0 and "dtype:float32" in exact.signature
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fast = known_answers_check(tiny_ckpt, [answers], evaluator="unieval-sum", dtype="bfloat16")
    assert "dtype:bfloat16" in fast.signature
    assert fast.max_diff == pytest.approx(float(np.abs(b16 - f32).max()), abs=1e-12) and fast.max_diff > 0
