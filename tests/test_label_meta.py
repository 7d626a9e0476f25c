"""Issue 36, part 1: meta-evaluation on binary labels (unieval_local/analysis/labels.py, ``meta --labels``).

Every metric equals scikit-learn's; tuned thresholds never see the rows they are scored on (the
leakage traps); intervals are seeded; McNemar's p is scipy's binomial test on hand-counted pairs."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics  # the test extra installs it (through 'reports'); the package never imports it

from unieval_local.analysis.labels import (GRID, balanced_accuracy, f1_unsupported, label_report, roc_auc,
                                           tune_threshold)
from unieval_local.cli import main


def _data(n: int, seed: int, ties: bool = False):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]  # both classes
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1)
    return y, (np.round(s, 1) if ties else s)


# ----------------------------------------------------------------------------- metrics equal sklearn's
@pytest.mark.parametrize("n", [2, 5, 17, 100, 1000])
@pytest.mark.parametrize("ties", [False, True])
def test_every_metric_equals_sklearn(n, ties):
    for seed in range(5):
        y, s = _data(n, seed, ties)
        for t in (0.3, 0.5, 0.7):
            p = (s > t).astype(int)
            assert abs(balanced_accuracy(y, p) - metrics.balanced_accuracy_score(y, p)) <= 1e-12
            want = metrics.f1_score(y, p, pos_label=0, zero_division=0)
            assert abs(f1_unsupported(y, p) - want) <= 1e-12
        assert abs(roc_auc(y, s) - metrics.roc_auc_score(y, s)) <= 1e-12
        assert abs(roc_auc(y.astype(bool), s) - metrics.roc_auc_score(y, s)) <= 1e-12


def test_ties_edge_cases_and_undefined_figures():
    y = np.array([0, 0, 1, 1, 0, 1])
    s = np.array([0.5, 0.5, 0.5, 0.5, 0.2, 0.9])  # a block of ties across both classes
    assert roc_auc(y, s) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)
    assert roc_auc(y, np.full(6, 0.3)) == 0.5 == metrics.roc_auc_score(y, np.full(6, 0.3))
    ones = np.ones(4, dtype=int)
    assert f1_unsupported(ones, ones) == 0.0 == metrics.f1_score(ones, ones, pos_label=0, zero_division=0)
    assert math.isnan(balanced_accuracy(ones, ones)) and math.isnan(roc_auc(ones, [0.1, 0.2, 0.3, 0.4]))
    assert balanced_accuracy([True, False], ["true", "FALSE"]) == 1.0
    with pytest.raises(ValueError, match="row 1 is 2"):
        balanced_accuracy([0, 2], [0, 1])
    with pytest.raises(ValueError, match="row 1 is nan"):
        roc_auc([0, 1], [0.2, math.nan])


def test_roc_points_of_the_html_page_equal_sklearns_curve():
    from unieval_local.analysis.html_report import roc_points

    for ties in (False, True):
        y, s = _data(60, 9, ties)
        fpr, tpr, _ = metrics.roc_curve(y, s, drop_intermediate=False)
        got = roc_points(y, s)
        assert np.allclose(got[0], fpr, atol=1e-12) and np.allclose(got[1], tpr, atol=1e-12)


# ----------------------------------------------------------------------------- tune_threshold
def _brute_force(y, s, grid=GRID):
    best = max(metrics.balanced_accuracy_score(y, (s > t).astype(int)) for t in grid)
    ties = [t for t in grid if abs(metrics.balanced_accuracy_score(y, (s > t).astype(int)) - best) < 1e-12]
    return min(ties, key=lambda t: (round(abs(t - 0.5), 9), t))


@pytest.mark.parametrize("n", [4, 30, 300])
def test_tune_threshold_equals_a_brute_force_search(n):
    for seed in range(8):
        y, s = _data(n, seed, ties=seed % 2 == 1)
        assert tune_threshold(y, s) == _brute_force(y, s)
    y, s = _data(50, 3)
    grid = [0.2, 0.4, 0.6]
    assert tune_threshold(y, s, grid) == _brute_force(y, s, grid)


def test_tune_threshold_ties_go_to_the_threshold_nearest_half_then_the_smaller():
    assert tune_threshold([0, 0, 1, 1], [0.1, 0.1, 0.9, 0.9]) == 0.5  # 0.10..0.89 all perfect
    assert tune_threshold([0, 1], [0.7, 0.95]) == 0.7  # 0.70..0.94 perfect: the nearest to 0.5
    # 0.49 and 0.51 both give 0.75, 0.50 gives 0.5: equally near, the smaller wins
    assert tune_threshold([1, 0, 0, 1], [0.495, 0.505, 0.485, 0.515]) == 0.49
    with pytest.raises(ValueError, match="one class"):
        tune_threshold([1, 1], [0.2, 0.3])


# ----------------------------------------------------------------------------- leakage traps
def test_dev_threshold_is_applied_to_test_rows_never_tuned_on_them():
    rng = np.random.default_rng(0)
    dev_y = np.r_[np.zeros(20), np.ones(20)].astype(int)
    dev_s = np.r_[rng.uniform(0.0, 0.2, 20), rng.uniform(0.25, 0.35, 20)]  # dev: best t about 0.2
    y = np.r_[np.zeros(30), np.ones(30)].astype(int)
    s = np.r_[rng.uniform(0.5, 0.7, 30), rng.uniform(0.8, 1.0, 30)]  # test: best t about 0.75
    t_dev = tune_threshold(dev_y, dev_s)
    assert t_dev <= 0.25 and tune_threshold(y, s) > 0.6
    m = label_report({"x": s}, y, dev=({"x": dev_s}, dev_y, None), bootstrap=0).metrics["x"]["all"]
    assert m.tuning == "dev" and m.tuned_threshold == t_dev
    assert m.tuned_balanced_accuracy == balanced_accuracy(y, s > t_dev) == 0.5  # the leaky one would be 1.0
    assert balanced_accuracy(y, s > tune_threshold(y, s)) == 1.0


def test_cross_validation_predicts_each_fold_with_a_threshold_tuned_without_it():
    """Leave-one-out (folds = rows) fixes the folds whatever the shuffle: each row is predicted
    with the threshold tuned on all the others."""
    # a trap: tuned on all rows, t = 0.70 separates perfectly (1.0); the unsupported row at 0.7
    # held out, the others tune t = 0.50 and it is called supported: 0.75
    y, s = np.array([0, 0, 1, 1, 1]), np.array([0.1, 0.7, 0.9, 0.9, 0.9])
    assert balanced_accuracy(y, s > tune_threshold(y, s)) == 1.0
    m = label_report({"x": s}, y, bootstrap=0).metrics["x"]["all"]  # 5 folds of 5 rows: leave-one-out
    assert m.tuned_balanced_accuracy == 0.75 and m.tuned_threshold == 0.7  # median of 0.5, 0.7, 0.7, 0.7, 0.7
    # on noise, the same check against leave-one-out computed here
    rng = np.random.default_rng(7)
    y = np.r_[np.zeros(15), np.ones(15)].astype(int)
    rng.shuffle(y)
    s = rng.random(30)  # no signal at all
    held = np.array([s[i] > tune_threshold(np.delete(y, i), np.delete(s, i)) for i in range(30)])
    loo = balanced_accuracy(y, held)
    assert balanced_accuracy(y, s > tune_threshold(y, s)) > loo
    m = label_report({"x": s}, y, folds=30, bootstrap=0).metrics["x"]["all"]
    assert m.tuning == "30-fold cross-validation"
    assert m.tuned_balanced_accuracy == loo
    assert m.tuned_threshold == float(np.median([tune_threshold(np.delete(y, i), np.delete(s, i)) for i in range(30)]))


def test_five_fold_tuning_on_noise_stays_near_chance_while_leaky_tuning_does_not():
    tuned, leaky = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 2, 20)
        s = rng.random(20)
        tuned.append(label_report({"x": s}, y, bootstrap=0, seed=seed).metrics["x"]["all"].tuned_balanced_accuracy)
        leaky.append(balanced_accuracy(y, s > tune_threshold(y, s)))
    assert np.mean(leaky) > 0.58 and np.mean(tuned) < 0.52


def test_a_group_without_dev_rows_falls_back_to_k_fold_and_says_so():
    y, s = _data(60, 1)
    g = np.array(["a", "b"] * 30)
    dev = ({"x": s[g == "a"]}, y[g == "a"], np.array(["a"] * 30))
    rep = label_report({"x": s}, y, groups=g, dev=dev, bootstrap=0)
    assert rep.metrics["x"]["a"].tuning == "dev"
    b = rep.metrics["x"]["b"]
    assert b.tuning == "5-fold cross-validation" and any("no dev rows" in n for n in b.notes)
    assert rep.mean["x"].tuning.startswith("mixed")
    with pytest.raises(ValueError, match="dev rows have none"):
        label_report({"x": s}, y, groups=g, dev=({"x": s}, y, None), bootstrap=0)


# ----------------------------------------------------------------------------- groups, bootstrap, comparisons
def test_groups_mean_is_unweighted_and_skips_one_class_groups_with_a_note():
    y, s = _data(90, 2)
    g = np.array(["a"] * 60 + ["b"] * 20 + ["c"] * 10)
    y[g == "c"] = 1  # one class only
    rep = label_report({"x": s}, y, groups=g, bootstrap=50)
    a, b, c = (rep.metrics["x"][k] for k in "abc")
    assert math.isnan(c.balanced_accuracy) and math.isnan(c.roc_auc) and c.notes
    mean = rep.mean["x"]
    assert mean.balanced_accuracy == pytest.approx((a.balanced_accuracy + b.balanced_accuracy) / 2, abs=1e-15)
    assert mean.roc_auc == pytest.approx((a.roc_auc + b.roc_auc) / 2, abs=1e-15)
    assert mean.n == 90 and "skipped" in mean.notes[0] and "'c'" in mean.notes[0]
    assert all(abs(rep.metrics["x"][k].balanced_accuracy - metrics.balanced_accuracy_score(
        y[g == k], (s[g == k] > 0.5).astype(int))) <= 1e-12 for k in "ab")
    out = json.loads(json.dumps(rep.to_json(), allow_nan=False))
    assert out["groups"]["x"]["c"]["balanced_accuracy"] is None
    assert "a " in rep.table() and "mean (2 of 3 groups)" in rep.table()


def test_bootstrap_intervals_are_seeded_and_contain_the_point_estimate():
    y, s = _data(200, 4)
    g = np.array(["a", "b"] * 100)
    one = label_report({"x": s, "z": 1 - s}, y, groups=g, bootstrap=300, seed=3)
    two = label_report({"x": s, "z": 1 - s}, y, groups=g, bootstrap=300, seed=3)
    other = label_report({"x": s, "z": 1 - s}, y, groups=g, bootstrap=300, seed=4)
    assert one.to_json() == two.to_json() and one.to_json() != other.to_json()
    for m in [*one.metrics["x"].values(), one.mean["x"]]:
        for fig, (lo, hi) in m.intervals.items():
            assert lo <= getattr(m, fig) <= hi, fig


def test_mcnemar_equals_binomtest_on_hand_counted_discordant_pairs():
    y = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    a = np.array([0.9, 0.8, 0.7, 0.1, 0.2, 0.6, 0.3, 0.4])  # right on rows 0-4, 7; wrong on 5, 6
    b = np.array([0.4, 0.3, 0.7, 0.6, 0.7, 0.6, 0.3, 0.4])  # right on rows 2, 7; wrong on 0, 1, 3-6
    # only a right: rows 0, 1, 3, 4 (4); only b right: none (0)
    rep = label_report({"a": a, "b": b}, y, bootstrap=100, compare=[("a", "b"), ("a", "a")])
    ab, aa = rep.comparisons[0], rep.comparisons[1]
    assert (ab.a_only_correct, ab.b_only_correct) == (4, 0)
    assert ab.mcnemar_p == stats.binomtest(4, 4, 0.5).pvalue == 0.125
    assert ab.group == "all" and rep.comparisons[2].group is None  # the mean over groups comes last
    assert ab.balanced_accuracy_diff == balanced_accuracy(y, a > 0.5) - balanced_accuracy(y, b > 0.5)
    assert aa.balanced_accuracy_p == 1.0 and aa.mcnemar_p == 1.0 and aa.roc_auc_interval == (0.0, 0.0)


def test_paired_bootstrap_uses_the_same_rows_for_both_aspects():
    y, s = _data(300, 5)
    noise = np.random.default_rng(0).random(300)
    rep = label_report({"good": s, "noise": noise}, y, bootstrap=400, compare=[("good", "noise")])
    c = rep.comparisons[0]
    assert c.roc_auc_diff > 0 and c.roc_auc_interval[0] > 0 and c.roc_auc_p < 0.01
    assert c.roc_auc_diff == pytest.approx(metrics.roc_auc_score(y, s) - metrics.roc_auc_score(y, noise), abs=1e-12)


def test_errors_name_the_row_and_field():
    with pytest.raises(ValueError, match=r"labels: row 2: 'maybe' is not a label"):
        label_report({"x": [0.1, 0.2, 0.3]}, np.array([0, 1, "maybe"], dtype=object))
    with pytest.raises(ValueError, match=r"scores of 'x': row 1 is nan"):
        label_report({"x": [0.1, math.nan]}, [0, 1])
    with pytest.raises(ValueError, match="unknown aspect"):
        label_report({"x": [0.1, 0.9]}, [0, 1], compare=[("x", "y")])
    with pytest.raises(ValueError, match="dev predictions have no scores"):
        label_report({"x": [0.1, 0.9]}, [0, 1], dev=({"y": [0.1]}, [0], None))


# ----------------------------------------------------------------------------- the CLI
def _files(tmp_path, n=48, seed=0, dev_rows=0, mapping=False):
    rng = np.random.default_rng(seed)
    human, out, dev = [], [], []
    for i in range(n + dev_rows):
        y = int(rng.integers(0, 2))
        label = {"consistency": bool(y)} if mapping else ([y, bool(y), str(bool(y)).lower()][i % 3])
        human.append({"id": f"c{i}", "label": label, "dataset": ["cnndm", "xsum", "wice"][i % 3]})
        rec = {"index": i, "key": f"c{i}", "scores": {"support": float(np.clip(0.3 * y + 0.7 * rng.random(), 0, 1)),
                                                      "coherence": float(rng.random())}}
        (out if i < n else dev).append(rec)
    paths = {}
    for name, rows in (("human", human), ("out", out), ("dev", dev)):
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    y = np.array([parse(h["label"]) for h in human[:n]])
    groups = np.array([h["dataset"] for h in human[:n]])
    scores = {a: np.array([r["scores"][a] for r in out]) for a in ("support", "coherence")}
    return paths, y, groups, scores


def parse(label):
    return int(label["consistency"]) if isinstance(label, dict) else int(label in (1, True, "true"))


@pytest.mark.smoke
def test_cli_labels_end_to_end_figures_equal_sklearn(tmp_path, capsys):
    paths, y, groups, scores = _files(tmp_path)
    js, html = tmp_path / "l.json", tmp_path / "l.html"
    assert main(["meta", str(paths["out"]), "--human", str(paths["human"]), "--human-field", "label", "--labels",
                 "--group-by", "dataset", "--compare", "support", "coherence", "--bootstrap", "100", "--seed", "1",
                 "--json", str(js), "--html", str(html)]) == 0
    printed = capsys.readouterr().out
    assert "support: tuned by 5-fold cross-validation" in printed and "McNemar" in printed
    got = json.loads(js.read_text())
    assert got["group_names"] == ["cnndm", "xsum", "wice"] and got["bootstrap"] == 100
    for a in ("support", "coherence"):
        per_group = []
        for g in ("cnndm", "xsum", "wice"):
            rows = groups == g
            m = got["groups"][a][g]
            want_ba = metrics.balanced_accuracy_score(y[rows], (scores[a][rows] > 0.5).astype(int))
            want_auc = metrics.roc_auc_score(y[rows], scores[a][rows])
            assert abs(m["balanced_accuracy"] - want_ba) <= 1e-12 and abs(m["roc_auc"] - want_auc) <= 1e-12
            assert abs(m["f1_unsupported"] - metrics.f1_score(y[rows], (scores[a][rows] > 0.5).astype(int),
                                                             pos_label=0, zero_division=0)) <= 1e-12
            assert m["n"] == rows.sum() and m["n_supported"] == y[rows].sum()
            per_group.append(want_ba)
        assert abs(got["mean"][a]["balanced_accuracy"] - np.mean(per_group)) <= 1e-12
    assert len(got["comparisons"]) == 4 and got["comparisons"][-1]["group"] is None
    page = html.read_text()
    assert "<svg" in page and "Label metrics" in page and "ROC curves" in page and "http://" not in page.split("<svg")[0]


def test_cli_labels_with_a_dev_split_and_per_aspect_labels(tmp_path, capsys):
    paths, y, groups, scores = _files(tmp_path, n=36, dev_rows=36, mapping=True)
    js = tmp_path / "l.json"
    assert main(["meta", str(paths["out"]), "--human", str(paths["human"]), "--labels", "--group-by", "dataset",
                 "--dev", str(paths["dev"]), "--human-aspect", "support=consistency", "--bootstrap", "0",
                 "--json", str(js)]) == 0  # --human holds both splits; per-aspect labels: support only
    got = json.loads(js.read_text())
    assert got["aspects"] == ["support"]
    human = [json.loads(line) for line in paths["human"].read_text().splitlines()]
    dev = [json.loads(line) for line in paths["dev"].read_text().splitlines()]
    dev_y = np.array([parse(human[36 + i]["label"]) for i in range(36)])
    dev_g = np.array([human[36 + i]["dataset"] for i in range(36)])
    dev_s = np.array([r["scores"]["support"] for r in dev])
    for g in ("cnndm", "xsum", "wice"):
        m = got["groups"]["support"][g]
        t = tune_threshold(dev_y[dev_g == g], dev_s[dev_g == g])
        rows = groups == g
        assert m["tuning"] == "dev" and m["tuned_threshold"] == t
        assert m["tuned_balanced_accuracy"] == pytest.approx(metrics.balanced_accuracy_score(
            y[rows], (scores["support"][rows] > t).astype(int)), abs=1e-12)


def test_cli_label_errors_name_the_record_and_field(tmp_path, capsys):
    paths, *_ = _files(tmp_path, n=6)
    human = [json.loads(line) for line in paths["human"].read_text().splitlines()]
    human[3]["label"] = "maybe"
    paths["human"].write_text("".join(json.dumps(h) + "\n" for h in human))
    assert main(["meta", str(paths["out"]), "--human", str(paths["human"]), "--labels"]) == 2
    err = capsys.readouterr().err
    assert "record 'c3'" in err and "field 'label'" in err and "'maybe' is not a label" in err
    paths, *_ = _files(tmp_path, n=6)
    paths["out"].write_text(paths["out"].read_text().replace('"coherence": ', '"coherence": NaN, "x": ', 1))
    assert main(["meta", str(paths["out"]), "--human", str(paths["human"]), "--labels"]) == 2
    assert "record 'c0'" in (err := capsys.readouterr().err) and "'coherence' is nan" in err
    assert main(["meta", str(paths["out"]), "--human", str(paths["human"]), "--group-by", "dataset"]) == 2
    assert "only with --labels" in capsys.readouterr().err
    paths, *_ = _files(tmp_path, n=6)
    assert main(["meta", str(paths["out"]), "--human", str(paths["human"]), "--labels", "--group-by", "nope"]) == 2
    assert "no field 'nope' (--group-by)" in capsys.readouterr().err


def test_binary_human_scores_without_labels_still_give_correlations(tmp_path, capsys):
    """QAGS-XSum's binary human scores: without --labels, today's correlations."""
    rng = np.random.default_rng(3)
    human = rng.integers(0, 2, 20).astype(float)
    pred = np.clip(0.4 * human + 0.6 * rng.random(20), 0, 1)
    src, out, js = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "m.json"
    src.write_text("".join(json.dumps({"id": f"k{i}", "human": {"consistency": h}}) + "\n" for i, h in enumerate(human)))
    out.write_text("".join(json.dumps({"index": i, "key": f"k{i}", "scores": {"consistency": p}}) + "\n"
                           for i, p in enumerate(pred)))
    assert main(["meta", str(out), "--human", str(src), "--bootstrap", "0", "--json", str(js)]) == 0
    row = json.loads(js.read_text())["table"]["sample"]["consistency"]
    assert row["pearson"][0] == pytest.approx(stats.pearsonr(pred, human)[0], abs=1e-12)
    assert "pearson" in capsys.readouterr().out


# ----------------------------------------------------------------------------- issue 40: no silent wrong number
def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _perfect(tmp_path, n=20, label=lambda y: y, extra_out=(), extra_human=()):
    """n rows, half supported, scored perfectly (0.9 / 0.1): every figure 1.0."""
    human = [{"id": f"k{i}", "label": label(i % 2), "dataset": "pair"} for i in range(n)] + list(extra_human)
    out = [{"index": i, "key": f"k{i}", "scores": {"support": 0.9 if i % 2 else 0.1}} for i in range(n)]
    out += list(extra_out)
    return _write(tmp_path / "out.jsonl", out), _write(tmp_path / "human.jsonl", human)


def test_mean_row_takes_f1_over_the_same_groups_as_the_other_figures():
    y = np.array([0, 1, 0, 1, 1, 1])
    s = np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.4])  # 'pair' perfect; 'solo' all supported, all called unsupported
    rep = label_report({"x": s}, y, groups=np.array(["pair"] * 4 + ["solo"] * 2), bootstrap=0)
    assert rep.metrics["x"]["pair"].f1_unsupported == 1.0 and rep.metrics["x"]["solo"].f1_unsupported == 0.0
    mean = rep.mean["x"]
    assert (mean.balanced_accuracy, mean.roc_auc, mean.f1_unsupported) == (1.0, 1.0, 1.0)  # was F1 0.5
    assert mean.notes == ("mean over 1 of 2 groups; skipped (one class only): ['solo']",)
    assert "mean (1 of 2 groups)" in rep.table() and "mean (2)" not in rep.table()
    one = label_report({"x": s[:4]}, y[:4], bootstrap=0)
    assert "mean (1 group) " in one.table()


def test_left_out_of_mean_groups_are_shown_and_named_but_not_averaged():
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    s = np.array([0.1, 0.9, 0.6, 0.4, 0.1, 0.9, 0.6, 0.4])
    g = np.array(["a", "a", "a", "a", "mine", "mine", "mine", "mine"])
    rep = label_report({"x": s}, y, groups=g, bootstrap=0, left_out_of_mean={"mine": "not on the board", "zz": "?"})
    assert rep.metrics["x"]["mine"].balanced_accuracy == 0.5
    assert rep.mean["x"].balanced_accuracy == rep.metrics["x"]["a"].balanced_accuracy == 0.5
    rep2 = label_report({"x": s[:4]}, y[:4], bootstrap=0)
    assert rep.mean["x"].f1_unsupported == rep2.mean["x"].f1_unsupported
    assert rep.mean["x"].notes == ("mean over 1 of 2 groups; skipped (not on the board): ['mine']",)


def test_a_tuned_balanced_accuracy_below_chance_gets_a_note():
    y = np.array([0, 1] * 20)
    s = np.random.default_rng(106).random(40)  # no signal: the seed where k-fold tuning lands below chance
    rep = label_report({"x": s}, y, bootstrap=200)
    m = rep.metrics["x"]["all"]
    lo, hi = m.intervals["tuned_balanced_accuracy"]
    assert m.tuned_balanced_accuracy == 0.35 and hi < 0.5
    assert m.tuned_balanced_accuracy == metrics.balanced_accuracy_score(y, _held_out(y, s))
    want = (f"the tuned threshold did worse than chance out of fold (tuned bal. acc. 95% interval [{lo:.4f}, "
            f"{hi:.4f}], wholly below 0.5): the checker has no usable signal on these labels")
    assert m.notes == (want,) and want in rep.table()
    assert rep.mean["x"].notes == (want,)
    good = label_report({"x": 0.5 * s + 0.5 * y}, y, bootstrap=200).metrics["x"]["all"]
    assert good.notes == () and good.intervals["tuned_balanced_accuracy"][1] >= 0.5


def _held_out(y, s, k=5, seed=0):
    """k-fold held-out predictions by hand: label_report's stratified folds, FactCG's grid."""
    rng = np.random.default_rng([seed, 0])
    order = np.concatenate([rng.permutation(np.flatnonzero(y == c)) for c in (0, 1)])
    fold = np.empty(len(y), dtype=int)
    fold[order] = np.arange(len(y)) % k
    pred = np.zeros(len(y), dtype=int)
    for f in range(k):
        held = fold == f
        pred[held] = s[held] > tune_threshold(y[~held], s[~held])
    return pred


def test_duplicate_keys_and_ids_are_refused_naming_both_records(tmp_path, capsys):
    dup = {"index": 20, "key": "k1", "scores": {"support": 0.1}}  # k1 again, now scored wrong
    out, human = _perfect(tmp_path, extra_out=[dup])
    assert main(["meta", str(out), "--human", str(human), "--labels", "--bootstrap", "0"]) == 2
    assert capsys.readouterr().err.strip() == (f"unieval-local: error: {out}: key 'k1' is on records 1 and 20 "
                                               "(0-based): each record must be scored once (merge or deduplicate "
                                               "the outputs first)")
    out, human = _perfect(tmp_path, extra_human=[{"id": "k3", "label": 0, "dataset": "pair"}])
    assert main(["meta", str(out), "--human", str(human), "--labels", "--bootstrap", "0"]) == 2
    assert capsys.readouterr().err.strip() == (f"unieval-local: error: {human}: id 'k3' is on records 3 and 20 "
                                               "(0-based): each id must name one record (which label is right?)")
    out, human = _perfect(tmp_path)
    js = tmp_path / "ok.json"
    assert main(["meta", str(out), "--human", str(human), "--labels", "--bootstrap", "0", "--json", str(js)]) == 0
    assert json.loads(js.read_text())["mean"]["support"]["balanced_accuracy"] == 1.0


def test_string_labels_need_positive_label_and_then_map_to_one_and_zero(tmp_path, capsys):
    words = {1: "entailment", 0: "not_entailment"}
    out, human = _perfect(tmp_path, label=words.get)
    assert main(["meta", str(out), "--human", str(human), "--labels", "--bootstrap", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"unieval-local: error: record 'k0' of {human}, field 'label': 'not_entailment' is not a label "
        "(0/1/true/false); the labels hold ['entailment', 'not_entailment'] (2 distinct values): name the value "
        "that means supported with --positive-label VALUE (values equal to it are 1, any other 0)")
    js = tmp_path / "l.json"
    assert main(["meta", str(out), "--human", str(human), "--labels", "--positive-label", "entailment",
                 "--bootstrap", "0", "--json", str(js)]) == 0
    m = json.loads(js.read_text())["groups"]["support"]["all"]
    assert (m["n_supported"], m["n_unsupported"], m["balanced_accuracy"]) == (10, 10, 1.0)
    assert main(["meta", str(out), "--human", str(human), "--labels", "--positive-label", "entailed",
                 "--bootstrap", "0"]) == 2
    assert "--positive-label 'entailed' equals none of the labels" in capsys.readouterr().err
    assert main(["meta", str(out), "--human", str(human), "--positive-label", "entailment"]) == 2
    assert "--positive-label: only with --labels" in capsys.readouterr().err


def test_labels_from_values_reads_bools_numbers_and_text_alike():
    from unieval_local.analysis.labels import labels_from_values

    where = [f"row {i}" for i in range(4)]
    got = labels_from_values([True, 1.0, "1", 0], where, positive_label="true")
    assert got.tolist() == [1, 0, 0, 0]
    assert labels_from_values([True, 1.0, "1", 0], where, positive_label="1").tolist() == [0, 1, 1, 0]
    assert labels_from_values([True, 1.0, "1", 0], where).tolist() == [1, 1, 1, 0]
    with pytest.raises(ValueError, match=r"^row 2: no label \(null\)$"):
        labels_from_values(["yes", "no", None, "no"], where, positive_label="yes")


def test_long_names_are_not_cut_and_the_html_title_is_the_file_name(tmp_path, capsys):
    y, s = _data(40, 1)
    long_a, long_b = "summarization/geval_consistency", "fact/nli_support_long_name"
    g = np.array(["TofuEval-MediaS-extended"] * 20 + ["b"] * 20)
    rep = label_report({long_a: s, long_b: 1 - s}, y, groups=g, bootstrap=0, compare=[(long_a, long_b)])
    rows = rep.table().splitlines()
    assert any(re.match(f"{long_a} +{long_b} +TofuEval-MediaS-extended +-?[0-9]", r) for r in rows)
    assert any(r.startswith("TofuEval-MediaS-extended ") for r in rows)
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    paths, *_ = _files(tmp_path, n=12)
    html = tmp_path / "page.html"
    assert main(["meta", str(paths["out"]), "--human", str(paths["human"]), "--labels", "--bootstrap", "0",
                 "--html", str(html)]) == 0
    page = html.read_text()
    assert "<title>unieval-local labels: out.jsonl</title>" in page and str(tmp_path) not in page
    assert "mean (1 group)" in page and "Made by unieval-local meta --labels" in page


def test_the_comparisons_mean_row_names_the_groups_it_covers():
    """The fresh-user trial of issue 40: the comparisons' mean row read just "mean" where the tables
    above read "mean (2 of 3 groups)", and its McNemar counts left the one-class group out unsaid."""
    from unieval_local.analysis.labels import label_report

    y = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1])
    g = np.array(["a"] * 4 + ["b"] * 4 + ["solo"] * 3)
    a = np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.6, 0.9, 0.1, 0.8, 0.9, 0.7])
    b = np.array([0.4, 0.6, 0.8, 0.2, 0.3, 0.6, 0.9, 0.1, 0.2, 0.3, 0.4])
    report = label_report({"A": a, "B": b}, y, groups=g, bootstrap=0, compare=[("A", "B")])
    mean_rows = [ln for ln in report.table().splitlines() if ln.startswith("A ") and " mean" in ln]
    assert len(mean_rows) == 1 and "mean (2 of 3 groups)" in mean_rows[0], report.table()
    c = next(c for c in report.comparisons if c.group is None)
    per = [c2 for c2 in report.comparisons if c2.group in ("a", "b")]
    assert c.a_only_correct == sum(x.a_only_correct for x in per) and c.b_only_correct == sum(x.b_only_correct for x in per)
