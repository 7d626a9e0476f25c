"""Meta-evaluation (hand-computed cases, scipy, UniEval's published correlations), paired
comparison, and the HTML report (DOM, and a headless-Chromium screenshot)."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from unieval_local.cli import main
from unieval_local.analysis.meta import Item, correlations, load_items, meta_evaluate
from unieval_local.analysis.significance import paired_bootstrap
from unieval_local.analysis.html_report import build_report, plot_distributions, plot_systems

PREDICT = "unieval-reproduce/predict"


@pytest.mark.smoke
def test_correlations_hand_computed():
    c = correlations([1, 2, 3, 4], [1, 3, 2, 4])
    assert c["pearson"] == pytest.approx(0.8) and c["spearman"] == pytest.approx(0.8)
    assert c["kendall"] == pytest.approx(4 / 6)  # 5 concordant, 1 discordant pair
    assert all(np.isnan(v) for v in correlations([1, 1, 1], [1, 2, 3]).values())


def test_correlations_equal_scipy():
    from scipy import stats

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    y = y + x
    c = correlations(x, y)
    assert c["pearson"] == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert c["spearman"] == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert c["kendall"] == pytest.approx(stats.kendalltau(x, y)[0], abs=1e-12)


def test_summary_level_skips_constant_documents_and_system_level_uses_means():
    rows = [  # doc d1: varied; d2: constant human scores (skipped); d3: constant predictions (skipped)
        ("d1", "A", 0.1, 1), ("d1", "B", 0.5, 3), ("d1", "C", 0.4, 2),
        ("d2", "A", 0.3, 2), ("d2", "B", 0.6, 2), ("d2", "C", 0.2, 2),
        ("d3", "A", 0.5, 1), ("d3", "B", 0.5, 5), ("d3", "C", 0.5, 3),
    ]
    items = [Item(i, {"x": p}, {"x": h}, d, s) for i, (d, s, p, h) in enumerate(rows)]
    r = meta_evaluate(items, ["x"], n_boot=0)
    assert r.table["summary"]["x"]["pearson"][0] == pytest.approx(correlations([0.1, 0.5, 0.4], [1, 3, 2])["pearson"])
    means_p = [np.mean([0.1, 0.3, 0.5]), np.mean([0.5, 0.6, 0.5]), np.mean([0.4, 0.2, 0.5])]
    means_h = [np.mean([1, 2, 1]), np.mean([3, 2, 5]), np.mean([2, 2, 3])]
    assert r.table["system"]["x"]["spearman"][0] == pytest.approx(correlations(means_p, means_h)["spearman"])
    assert r.table["sample"]["x"]["kendall"][0] == pytest.approx(
        correlations([x[2] for x in rows], [x[3] for x in rows])["kendall"])


def test_bootstrap_is_deterministic_with_a_seed(shared_data):
    items = load_items(shared_data / PREDICT / "fact" / "qags_xsum_result.json")
    a = meta_evaluate(items, n_boot=60, seed=3).table["sample"]["consistency"]
    b = meta_evaluate(items, n_boot=60, seed=3).table["sample"]["consistency"]
    c = meta_evaluate(items, n_boot=60, seed=4).table["sample"]["consistency"]
    assert a == b and a != c
    v, lo, hi = a["spearman"]
    assert lo < v < hi


PUBLISHED = {
    ("fact/qags_cnndm_result.json", "consistency"): (0.6817, 0.6623, 0.5316),
    ("fact/qags_xsum_result.json", "consistency"): (0.4614, 0.4879, 0.3992),
    ("dialogue/topical_chat_result.json", "naturalness"): (0.4437, 0.5140, 0.3740),
    ("dialogue/topical_chat_result.json", "coherence"): (0.5951, 0.6129, 0.4659),
    ("dialogue/topical_chat_result.json", "engagingness"): (0.5565, 0.6047, 0.4559),
    ("dialogue/topical_chat_result.json", "groundedness"): (0.5362, 0.5750, 0.4515),
    ("dialogue/topical_chat_result.json", "understandability"): (0.3800, 0.4678, 0.3607),
    ("dialogue/topical_chat_result.json", "overall"): (0.6328, 0.6626, 0.4873),
}


@pytest.mark.parametrize("key", sorted(PUBLISHED))
def test_reproduces_unieval_published_correlations(shared_data, key):
    path, aspect = key
    r = meta_evaluate(load_items(shared_data / PREDICT / path), [aspect], n_boot=0)
    got = [r.table["sample"][aspect][m][0] for m in ("pearson", "spearman", "kendall")]
    assert np.abs(np.array(got) - np.array(PUBLISHED[key])).max() < 1e-3, got


def test_meta_cli_on_our_output_joined_to_human_scores(tmp_path, tiny_ckpt, summeval_records, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in summeval_records))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "fluency", "--aspect", "coherence",
                 "--max-length", "256", "-o", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["meta", str(out), "--human", str(src), "--human-field", "human", "--bootstrap", "50",
                 "--json", str(tmp_path / "m.json")]) == 0
    text = capsys.readouterr().out
    assert "sample level" in text and "summary level" in text and "system level" in text
    table = json.loads((tmp_path / "m.json").read_text())["table"]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    want = correlations([x["scores"]["fluency"] for x in lines], [r["human"]["fluency"] for r in summeval_records])
    assert table["sample"]["fluency"]["kendall"][0] == pytest.approx(want["kendall"])
    assert main(["meta", str(out)]) == 2  # no human scores given


def test_paired_bootstrap_compare():
    rng = np.random.default_rng(1)
    base = rng.uniform(size=200)
    a = [{"key": i, "scores": {"x": float(v)}} for i, v in enumerate(base)]
    better = [{"key": i, "scores": {"x": float(v + 0.05 + rng.normal(0, 0.02))}} for i, v in enumerate(base)]
    c = paired_bootstrap(a, better, n_boot=500, seed=0)
    ma, mb, d, lo, hi, p = c.rows["x"]
    assert d == pytest.approx(mb - ma) and 0.03 < lo < d < hi and p < 0.01
    same = paired_bootstrap(a, a, n_boot=500, seed=0).rows["x"]
    assert same[2] == 0 and same[5] == 1.0
    with pytest.raises(ValueError, match="no scored key in common"):
        paired_bootstrap(a, [{"key": "other", "scores": {"x": 1.0}}])


def _report_run(tmp_path, tiny_ckpt, summeval_records):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in summeval_records[:32]))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "consistency", "--aspect", "coherence",
                 "--long-input", "chunk", "--max-length", "256", "--evidence", "-o", str(out), "--no-progress"]) == 0
    html = tmp_path / "report.html"
    assert main(["report-html", str(out), "--input", str(src), "-o", str(html)]) == 0
    return out, html


def test_html_report_sections_and_no_network(tmp_path, tiny_ckpt, summeval_records):
    out, html = _report_run(tmp_path, tiny_ckpt, summeval_records)
    text = html.read_text()
    for section in ('id="signature"', 'id="overall"', 'id="distributions"', 'id="systems"', 'id="lowest"'):
        assert section in text
    assert "<svg" in text and "best source window" in text and "(repeated prompts counted): 0 of" in text
    assert "unieval-local:0.1.0|task:summarization" in text
    import re

    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text) and "<script" not in text  # nothing fetched
    assert plot_distributions([json.loads(x) for x in out.read_text().splitlines()]) is not None
    assert plot_systems([{"key": 1, "scores": {"x": 0.5}}]) is None
    assert "pass --input" in build_report(out)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian package chromium not installed")
def test_html_report_renders_in_headless_chromium(tmp_path, tiny_ckpt, summeval_records):
    from matplotlib.image import imread

    _, html = _report_run(tmp_path, tiny_ckpt, summeval_records)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-1000:]
    for section in ('id="signature"', 'id="distributions"', 'id="systems"', 'id="lowest"'):
        assert section in dom.stdout
    shot = tmp_path / "shot.png"
    res = subprocess.run([CHROMIUM, *flags, "--window-size=1200,1600", f"--screenshot={shot}", html.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and shot.is_file(), res.stderr[-1000:]
    pixels = imread(shot)
    assert pixels.shape[0] >= 1000 and pixels.std() > 0.05  # not blank


def test_meta_and_compare_edge_options(shared_data, tmp_path, capsys):
    path = shared_data / PREDICT / "fact" / "qags_xsum_result.json"
    assert main(["meta", str(path), "--bootstrap", "0", "--json", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "no bootstrap intervals" in out and "nan" not in out
    table = json.loads((tmp_path / "m.json").read_text())["table"]  # strict JSON, NaN written as null
    assert table["sample"]["consistency"]["pearson"][1] is None
    assert main(["meta", str(path), "--aspect", "bogus"]) == 2
    assert "available: ['consistency']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["meta", str(path), "--bootstrap", "-5"])
    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps({"key": i, "scores": {"x": i / 10}}) + "\n" for i in range(10)))
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps({"key": i, "scores": {"x": i / 10 + 0.1}}) + "\n" for i in range(5)))
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--bootstrap", "0"]) == 0
    text = capsys.readouterr().out
    assert "only 5 keys are in both outputs" in text and "nan" not in text
    assert main(["compare", str(a), str(path)]) == 2
    assert "qags_xsum_result.json:" in capsys.readouterr().err


# ----------------------------------------------------------------------------- vectorised bootstrap
def _reference_intervals(items, aspect, n_boot, seed, confidence=0.95):
    """A plain loop over the same resamples as ``meta_evaluate`` (one ``rng.integers(0, U, U)``
    per resample), calling scipy directly on each resample's items."""
    import math
    from collections import defaultdict

    from scipy import stats

    def corr(p, h, rank_p=None, rank_h=None):  # constant inputs: NaN, as meta.correlations
        rank_p, rank_h = (p, h) if rank_p is None else (rank_p, rank_h)
        ok = len(p) > 1 and np.ptp(p) > 0 and np.ptp(h) > 0
        ok_rank = len(p) > 1 and np.ptp(rank_p) > 0 and np.ptp(rank_h) > 0
        return {"pearson": stats.pearsonr(p, h)[0] if ok else math.nan,
                "spearman": stats.spearmanr(rank_p, rank_h)[0] if ok_rank else math.nan,
                "kendall": stats.kendalltau(rank_p, rank_h)[0] if ok_rank else math.nan}

    units = defaultdict(list)
    for k, it in enumerate(items):
        units[it.doc_id].append(k)
    units = list(units.values())
    pred = np.array([it.pred[aspect] for it in items])
    human = np.array([it.human[aspect] for it in items])
    rng = np.random.default_rng(seed)
    dist = {lv: defaultdict(list) for lv in ("sample", "summary", "system")}
    for _ in range(n_boot):
        pick = rng.integers(0, len(units), len(units))
        idx = np.concatenate([units[u] for u in pick])  # the resample's items, repeats kept
        for m, v in corr(pred[idx], human[idx]).items():
            dist["sample"][m].append(v)
        docs = [corr(pred[units[u]], human[units[u]]) for u in pick  # a document drawn twice counts twice
                if len(units[u]) > 1 and np.ptp(pred[units[u]]) > 0 and np.ptp(human[units[u]]) > 0]
        for m in ("pearson", "spearman", "kendall"):
            dist["summary"][m].append(np.mean([d[m] for d in docs]) if docs else math.nan)
        by_sys = defaultdict(list)
        for i in idx:
            by_sys[items[i].system_id].append(i)
        mp = np.array([pred[v].mean() for v in by_sys.values()])
        mh = np.array([human[v].mean() for v in by_sys.values()])
        snap = np.vectorize(lambda v: float(f"{v:.12g}"))  # means equal but for summation order tie
        for m, v in corr(mp, mh, snap(mp), snap(mh)).items():
            dist["system"][m].append(v)
    alpha = (1 - confidence) / 2
    def interval(vals):
        vals = [v for v in vals if not math.isnan(v)]
        return np.quantile(vals, [alpha, 1 - alpha]) if vals else (math.nan, math.nan)

    return {lv: {m: interval(vals) for m, vals in d.items()} for lv, d in dist.items()}


def _uneven_items(seed, tied=False):
    """Documents of 1 to 6 systems (some systems absent from some documents), one document
    with constant human scores; ``tied``: human scores in thirds (SummEval's), ties everywhere."""
    rng = np.random.default_rng(seed)
    items = []
    for d in range(14):
        systems = rng.choice(6, size=int(rng.integers(1, 7)), replace=False)
        for s in systems:
            h = float(rng.integers(3, 16)) / 3 if tied else float(rng.normal())
            if d == 3:
                h = 2.0
            items.append(Item(len(items), {"x": float(rng.normal()), "y": float(rng.uniform())},
                              {"x": h, "y": float(rng.integers(1, 6))}, f"d{d}", f"S{s}"))
    return items


@pytest.mark.parametrize("tied", [False, True])
def test_vectorised_bootstrap_equals_a_plain_loop(tied):
    items = _uneven_items(11, tied)
    assert len({len([it for it in items if it.doc_id == d]) for d in {it.doc_id for it in items}}) > 2  # uneven
    r = meta_evaluate(items, n_boot=120, seed=5, progress=False)
    assert list(r.table) == ["sample", "summary", "system"] and r.unit == "document"
    for aspect in ("x", "y"):
        ref = _reference_intervals(items, aspect, 120, 5)
        for level in ref:
            for m, (lo, hi) in ref[level].items():
                got = r.table[level][aspect][m]
                assert abs(got[1] - lo) < 1e-9 and abs(got[2] - hi) < 1e-9, (level, aspect, m, got, lo, hi)


def test_vectorised_bootstrap_on_samples_and_point_estimates_unchanged():
    items = _uneven_items(2)
    none = meta_evaluate(items, n_boot=0)
    boot = meta_evaluate(items, n_boot=30, seed=1, progress=False)
    for level, rows in none.table.items():
        for a, row in rows.items():
            for m, (v, lo, hi) in row.items():
                assert boot.table[level][a][m][0] == v and np.isnan(lo) and np.isnan(hi)
    # no doc ids: samples are resampled; the reference with one unit per item
    flat = [Item(it.key, it.pred, it.human, None, None) for it in items]
    r = meta_evaluate(flat, ["x"], n_boot=50, seed=9, progress=False)
    assert list(r.table) == ["sample"] and r.unit == "sample"
    ref = _reference_intervals([Item(it.key, it.pred, it.human, k, None) for k, it in enumerate(flat)], "x", 50, 9)
    for m, (lo, hi) in ref["sample"].items():
        assert r.table["sample"]["x"][m][1:] == pytest.approx((lo, hi), abs=1e-9)
    # summary point estimate: the mean over non-constant documents, by hand
    from unieval_local.analysis.meta import correlations as corr

    docs = {}
    for it in items:
        docs.setdefault(it.doc_id, []).append(it)
    vals = [corr([i.pred["x"] for i in v], [i.human["x"] for i in v])["kendall"] for v in docs.values()
            if len(v) > 1 and len({i.human["x"] for i in v}) > 1]
    assert none.table["summary"]["x"]["kendall"][0] == pytest.approx(np.mean(vals), abs=1e-15)


def test_meta_progress_bar_switch(capsys):
    items = _uneven_items(3)
    meta_evaluate(items, ["x"], n_boot=20, progress=False)
    assert "resample" not in capsys.readouterr().err
    meta_evaluate(items, ["x"], n_boot=20, progress=True)
    err = capsys.readouterr().err
    assert "bootstrap" in err and "/20" in err and "resample" in err


def test_meta_default_human_field_is_the_converters(tmp_path, capsys):
    src = tmp_path / "in.jsonl"  # as scripts/convert_summeval.py writes: human scores under "human"
    human = [1.0, 3.0, 2.0, 4.0]
    src.write_text("".join(json.dumps({"id": f"k{i}", "target": "t", "human": {"fluency": h}}) + "\n"
                           for i, h in enumerate(human)))
    out = tmp_path / "out.jsonl"
    out.write_text("".join(json.dumps({"index": i, "key": f"k{i}", "scores": {"fluency": p}}) + "\n"
                           for i, p in enumerate([0.1, 0.2, 0.3, 0.4])))
    assert main(["meta", str(out), "--human", str(src), "--bootstrap", "0", "--json", str(tmp_path / "m.json")]) == 0
    row = json.loads((tmp_path / "m.json").read_text())["table"]["sample"]["fluency"]
    assert row["pearson"][0] == pytest.approx(0.8) and row["kendall"][0] == pytest.approx(4 / 6)
    capsys.readouterr()
    assert main(["meta", str(out), "--human", str(src), "--human-field", "scores"]) == 2
    err = capsys.readouterr().err
    assert "has no field 'scores'" in err and "['human']" in err and len(err.strip().splitlines()) == 1
    items = load_items(out, src)  # the Python API has the same default
    assert [it.human["fluency"] for it in items] == human


# ----------------------------------------------------------------------------- compare: systems of one output
def _systems_output(tmp_path):
    """S0 baseline on d1..d4; S1 = S0 + 0.1 everywhere (and an error record); S2 = S0 on d1, d2 only."""
    base = {"d1": 0.1, "d2": 0.2, "d3": 0.3, "d4": 0.4}
    lines = []
    for d, v in base.items():
        lines.append({"key": f"{d}/S0", "doc_id": d, "system_id": "S0", "scores": {"x": v, "y": 1 - v}})
        lines.append({"key": f"{d}/S1", "doc_id": d, "system_id": "S1", "scores": {"x": v + 0.1, "y": 1 - v}})
        if d in ("d1", "d2"):
            lines.append({"key": f"{d}/S2", "doc_id": d, "system_id": "S2", "scores": {"x": v, "y": 0.5}})
    lines.append({"key": "d5/S1", "doc_id": "d5", "system_id": "S1", "error": {"type": "X", "message": "m"}})
    path = tmp_path / "systems.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path, lines


def test_compare_systems_of_one_output_hand_computed(tmp_path, capsys):
    from unieval_local.analysis.significance import compare_systems

    path, lines = _systems_output(tmp_path)
    cs = compare_systems(lines, "S0", n_boot=200, seed=0)
    assert cs.paired_on == "doc_id" and [name for name, _ in cs.comparisons] == ["S1", "S2"] and cs.n_tests == 4
    s1, s2 = dict(cs.comparisons)["S1"], dict(cs.comparisons)["S2"]
    ma, mb, d, lo, hi, p = s1.rows["x"]
    assert (ma, mb, d) == pytest.approx((0.25, 0.35, 0.1)) and (lo, hi) == pytest.approx((0.1, 0.1))
    assert p == pytest.approx(1 / 201)  # every resample has B above A
    assert s1.rows["y"][2] == 0 and s1.rows["y"][5] == 1.0  # equal on y: never above
    assert s2.n == 2 and s2.n_a == 4 and s2.rows["x"][:3] == pytest.approx((0.15, 0.15, 0.0))
    assert s2.rows["y"][:3] == pytest.approx((0.85, 0.5, -0.35)) and s2.rows["y"][5] == 1.0
    capsys.readouterr()
    assert main(["compare", str(path), "--baseline", "S0", "--bootstrap", "200"]) == 0
    text = capsys.readouterr().out
    assert "not corrected for multiple comparisons (4 tests" in text
    assert "only 2 doc ids are in both systems" in text
    rows = [ln.split() for ln in text.splitlines() if ln.startswith(("S1 ", "S2 "))]
    assert [r[:3] for r in rows] == [["S1", "x", "4"], ["S1", "y", "4"], ["S2", "x", "2"], ["S2", "y", "2"]]
    assert rows[0][3:6] == ["0.2500", "0.3500", "+0.1000"] and rows[0][-1] == f"{1 / 201:.4f}"


def test_compare_systems_equals_a_plain_paired_bootstrap(tmp_path):
    """Each system's row is Koehn's paired bootstrap over the doc ids it shares with the baseline."""
    from unieval_local.analysis.significance import compare_outputs, compare_systems

    rng = np.random.default_rng(4)
    lines = [{"key": f"{d}/{s}", "doc_id": d, "system_id": s, "scores": {"x": float(rng.uniform() + 0.02 * k)}}
             for d in range(30) for k, s in enumerate(["M0", "M1", "M2"])]
    cs = compare_systems(lines, "M1", n_boot=300, seed=7)
    for name, c in cs.comparisons:
        a = {x["doc_id"]: x["scores"]["x"] for x in lines if x["system_id"] == "M1"}
        b = {x["doc_id"]: x["scores"]["x"] for x in lines if x["system_id"] == name}
        diff = np.array([b[k] - a[k] for k in a])
        picks = np.random.default_rng(7).integers(0, len(diff), (300, len(diff)))
        boot = [diff[row].mean() for row in picks]  # one resample at a time
        lo, hi = np.quantile(boot, [0.025, 0.975])
        p = (1 + sum(v <= 0 for v in boot)) / 301
        assert c.rows["x"] == pytest.approx((np.mean(list(a.values())), np.mean(list(b.values())), diff.mean(),
                                             lo, hi, p), abs=1e-12)
    # several outputs against the first, by key: the same numbers as the two-output test
    outs = {s: [{"key": x["doc_id"], "scores": x["scores"]} for x in lines if x["system_id"] == s]
            for s in ("M0", "M1", "M2")}
    multi = compare_outputs(outs["M1"], [("M0", outs["M0"]), ("M2", outs["M2"])], baseline_name="M1",
                            n_boot=300, seed=7)
    assert [(n, c.rows) for n, c in multi.comparisons] == [(n, c.rows) for n, c in cs.comparisons]
    assert multi.comparisons[1][1].rows == paired_bootstrap(outs["M1"], outs["M2"], n_boot=300, seed=7).rows


def test_compare_cli_forms_and_errors(tmp_path, capsys):
    path, lines = _systems_output(tmp_path)
    files = {}
    for s in ("S0", "S1", "S2"):
        files[s] = tmp_path / f"{s}.jsonl"
        files[s].write_text("".join(json.dumps({"key": x["doc_id"], "scores": x["scores"]}) + "\n"
                                    for x in lines if x.get("system_id") == s and "scores" in x))
    capsys.readouterr()
    assert main(["compare", str(files["S0"]), str(files["S1"]), str(files["S2"]), "--bootstrap", "50"]) == 0
    text = capsys.readouterr().out
    assert f"baseline {files['S0']}" in text and "only 2 keys are in both outputs" in text
    assert sum(ln.startswith(str(files["S1"])) for ln in text.splitlines()) == 2
    assert sum(ln.startswith(str(files["S2"])) for ln in text.splitlines()) == 2

    def error(argv):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("unieval-local: error:")
        return err

    assert "the systems of" in error(["compare", str(path)]) and "S0, S1, S2" in error(["compare", str(path)])
    err = error(["compare", str(path), "--baseline", "S9"])
    assert "unknown baseline 'S9'" in err and err.endswith("S0, S1, S2")
    assert "has no system_id" in error(["compare", str(files["S0"]), "--baseline", "S0"])
    lonely = tmp_path / "lonely.jsonl"
    lonely.write_text(json.dumps({"key": 1, "doc_id": "z", "system_id": "S1", "scores": {"x": 1.0}}) + "\n"
                      + json.dumps({"key": 2, "doc_id": "d1", "system_id": "S0", "scores": {"x": 1.0}}) + "\n")
    err = error(["compare", str(lonely), "--baseline", "S0"])
    assert "systems 'S0' and 'S1' have no scored doc_id in common" in err
    assert "--baseline names a system of ONE output" in error(["compare", str(files["S0"]), str(files["S1"]),
                                                               "--baseline", "S0"])


def test_vectorised_bootstrap_equals_a_plain_loop_on_summeval_ties(summeval_records):
    """SummEval's human scores (means of three 1-5 ratings) and 2-decimal predictions: system
    means tie often, and ties must not depend on the order means are summed in."""
    rng = np.random.default_rng(0)
    items = [Item(r["id"], {a: float(np.round(rng.uniform(), 2)) for a in r["human"]}, r["human"],
                  r["doc_id"], r["system_id"]) for r in summeval_records]
    r = meta_evaluate(items, ["coherence", "fluency"], n_boot=100, seed=0, progress=False)
    for aspect in ("coherence", "fluency"):
        ref = _reference_intervals(items, aspect, 100, 0)
        for level in ref:
            for m, (lo, hi) in ref[level].items():
                assert r.table[level][aspect][m][1:] == pytest.approx((lo, hi), abs=1e-9), (level, aspect, m)
