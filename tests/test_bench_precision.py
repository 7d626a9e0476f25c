"""The deviation arithmetic of ``scripts/bench_precision.py`` (issue 43, item 2) on hand-made
arrays: max / mean |bf16 - fp32|, Spearman's rho, 0.5-threshold decision flips, the G-Eval
rating normalisation, and the errors on bad input. Seconds; no model is built."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_precision import deviation, main, to_unit  # noqa: E402


def test_deviation_hand_computed():
    fp32 = [0.10, 0.49, 0.50, 0.90]
    bf16 = [0.12, 0.51, 0.49, 0.90]
    d = deviation(fp32, bf16)
    # |d| = 0.02, 0.02, 0.01, 0 -> max 0.02, mean 0.05 / 4 = 0.0125
    assert d["max_abs"] == pytest.approx(0.02, abs=1e-12)
    assert d["mean_abs"] == pytest.approx(0.0125, abs=1e-12)
    # decisions (>= 0.5): fp32 F F T T, bf16 F T F T -> examples 1 and 2 flip
    assert (d["flips"], d["flip_share"], d["n"]) == (2, 0.5, 4)
    # ranks fp32 1 2 3 4, bf16 1 3 2 4: rho = 1 - 6 * (0 + 1 + 1 + 0) / (4 * 15) = 0.8
    assert d["spearman"] == pytest.approx(0.8, abs=1e-12)


def test_deviation_identical_runs_and_other_threshold():
    d = deviation([0.2, 0.7, 0.4], [0.2, 0.7, 0.4])
    assert (d["max_abs"], d["mean_abs"], d["flips"]) == (0.0, 0.0, 0)
    assert d["spearman"] == pytest.approx(1.0)
    # at threshold 0.3 only the 0.25 -> 0.35 example crosses
    d = deviation([0.25, 0.9], [0.35, 0.8], threshold=0.3)
    assert (d["flips"], d["flip_share"]) == (1, 0.5)
    assert d["spearman"] == pytest.approx(1.0)


def test_deviation_constant_run_has_no_rank_correlation():
    d = deviation([0.5, 0.5, 0.5], [0.4, 0.5, 0.6])
    assert math.isnan(d["spearman"])
    assert d["flips"] == 1 and d["max_abs"] == pytest.approx(0.1)  # 0.5 -> 0.4 flips, 0.5 -> 0.6 does not


@pytest.mark.parametrize("a, b, match", [([0.1, 0.2], [0.1], "one length"), ([0.1], [0.1], "one length"),
                                         ([0.1, float("nan")], [0.1, 0.2], "finite")])
def test_deviation_refuses_bad_input(a, b, match):
    with pytest.raises(ValueError, match=match):
        deviation(a, b)


def test_geval_ratings_map_to_the_unit_interval():
    np.testing.assert_allclose(to_unit([1.0, 3.0, 5.0, 2.0], 5), [0.0, 0.5, 1.0, 0.25], atol=0)
    np.testing.assert_allclose(to_unit([0.3, 0.7], None), [0.3, 0.7], atol=0)
    with pytest.raises(ValueError, match="K >= 2"):
        to_unit([1.0], 1)


def test_unknown_evaluator_is_refused_with_the_list(capsys):
    with pytest.raises(SystemExit):
        main(["--only", "no-such-evaluator"])
    err = capsys.readouterr().err
    assert "--only names no evaluator" in err and "hhem-2.1-open" in err and "g-eval" in err
