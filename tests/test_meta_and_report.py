"""Meta-evaluation (hand-computed cases, scipy, UniEval's published correlations), paired
comparison, and the HTML report (DOM, and a headless-Chromium screenshot)."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from unieval_local.cli import main
from unieval_local.meta import Item, correlations, load_items, meta_evaluate, paired_bootstrap
from unieval_local.report import build_report, plot_distributions, plot_systems

PREDICT = "unieval-reproduce/predict"


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
