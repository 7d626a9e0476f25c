"""A self-contained HTML report of a ``score`` output, and the same plots for notebooks; and the page
of a label meta-evaluation (``meta --labels --html``: the label table and ROC curves per aspect,
:func:`build_label_html`).

``render_html(output)`` writes one HTML file with no network access needed: plots are
inline SVG (matplotlib), the page is a jinja2 template. Sections: run signature,
counts and truncation, score distribution per aspect, per-system means with 95%
bootstrap intervals (when ``system_id`` exists), and the lowest-scoring examples with
their target sentences coloured by score and, for unsupported claims, the source
window that scored best (needs ``--evidence`` in the run and ``--input`` here).
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..extras import require
from ..records import iter_records, read_score_output


def output_aspects(lines: Sequence[dict]) -> list[str]:
    """Aspects present in an output, in the order its scored lines first name them (a line of a
    run over a set of aspects may lack one it had no fields for)."""
    return list(dict.fromkeys(a for x in lines if "scores" in x for a in x["scores"]))


def plot_distributions(lines: Sequence[dict], aspects: Sequence[str] | None = None):
    """A matplotlib Figure: one histogram of scores per aspect.

    ``lines`` are ``score`` output records (their ``scores`` are the predictions; UniEval's
    reproduce files use ``scores`` for human judgements instead).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    aspects = list(aspects or output_aspects(lines))
    fig, axes = plt.subplots(1, max(1, len(aspects)), figsize=(3.2 * max(1, len(aspects)), 2.6), squeeze=False)
    for ax, a in zip(axes[0], aspects):
        v = [x["scores"][a] for x in lines if "scores" in x and a in x["scores"]]
        hi = max(1.0, max(v) if v else 1.0)
        ax.hist(v, bins=20, range=(0, hi), color="#4c72b0", edgecolor="white")
        ax.set_title(f"{a} (n={len(v)}, mean {np.mean(v):.3f})" if v else a, fontsize=9)
        ax.set_xlabel("score")
    axes[0][0].set_ylabel("examples")
    fig.tight_layout()
    return fig


def system_means(lines: Sequence[dict], aspect: str, *, n_boot: int = 1000, seed: int = 0) -> dict[str, tuple[float, float, float]]:
    """``{system_id: (mean, ci_low, ci_high)}`` with a seeded 95% bootstrap over the system's examples."""
    groups: dict[str, list[float]] = defaultdict(list)
    for x in lines:
        if "scores" in x and "system_id" in x and aspect in x["scores"]:
            groups[str(x["system_id"])].append(x["scores"][aspect])
    rng = np.random.default_rng(seed)
    out = {}
    for s, v in groups.items():
        arr = np.array(v)
        boot = arr[rng.integers(0, len(arr), (n_boot, len(arr)))].mean(axis=1)
        lo, hi = np.quantile(boot, [0.025, 0.975])
        out[s] = (float(arr.mean()), float(lo), float(hi))
    return out


def plot_systems(lines: Sequence[dict], aspects: Sequence[str] | None = None, *, n_boot: int = 1000, seed: int = 0):
    """A matplotlib Figure: per-system mean per aspect with 95% bootstrap intervals, or None without system ids."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    aspects = list(aspects or output_aspects(lines))
    if not any("system_id" in x for x in lines):
        return None
    fig, axes = plt.subplots(1, len(aspects), figsize=(3.4 * len(aspects), 0.3 * 20 + 1), squeeze=False)
    for ax, a in zip(axes[0], aspects):
        means = system_means(lines, a, n_boot=n_boot, seed=seed)
        names = sorted(means, key=lambda s: means[s][0])
        m = [means[s][0] for s in names]
        err = [[means[s][0] - means[s][1] for s in names], [means[s][2] - means[s][0] for s in names]]
        ax.errorbar(m, range(len(names)), xerr=err, fmt="o", color="#dd8452", ecolor="#555", capsize=2)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_title(a, fontsize=9)
        ax.set_xlabel("mean score (95% CI)")
    fig.tight_layout()
    return fig


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _colour(value: float) -> str:
    """Red (0) to green (1) background for a sentence score."""
    v = min(max(value, 0.0), 1.0)
    r, g = int(230 - 110 * v), int(120 + 100 * v)
    return f"rgb({r},{g},130)"


#: the style both reports start from (page, headings, tables)
_BASE_CSS = """body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px;color:#222}
h1{font-size:22px} h2{font-size:17px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}
"""

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>unieval-local report: {{ title }}</title>
<style>
""" + _BASE_CSS + """th{background:#f3f3f3} .sig{font-family:monospace;font-size:12px;background:#f6f6f6;padding:8px;word-break:break-all}
.ex{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:10px 0} .sent{padding:1px 3px;border-radius:3px}
.win{font-size:12px;color:#444;background:#f7f7e8;padding:6px;margin-top:6px;white-space:pre-wrap}
.muted{color:#777;font-size:12px} svg{max-width:100%;height:auto}
</style></head><body>
<h1>unieval-local report: {{ title }}</h1>
<section id="signature"><h2>Run</h2>
<div class="sig">{{ signature or "no sidecar signature found" }}</div>
{% if origin %}<p class="origin"><b>Imported scores:</b> {{ origin.what }} ({{ origin.source }})</p>{% endif %}
<p>{{ n_records }} records: {{ n_scored }} scored, {{ n_failed }} failed.
Queries cut by max_length (repeated prompts counted): {{ truncation }}.</p></section>
<section id="overall"><h2>Overall per aspect</h2>
<table><tr><th>aspect</th><th>n</th><th>mean</th><th>median</th><th>min</th><th>max</th></tr>
{% for row in overall %}<tr><td style="text-align:left">{{ row.aspect }}</td><td>{{ row.n }}</td><td>{{ "%.4f"|format(row.mean) }}</td>
<td>{{ "%.4f"|format(row.median) }}</td><td>{{ "%.4f"|format(row.min) }}</td><td>{{ "%.4f"|format(row.max) }}</td></tr>{% endfor %}
</table>{% if mean_of %}<p class="mean-of">Each record's <code>aspect_mean</code> is the mean of {{ mean_of|join(", ") }}.</p>{% endif %}</section>
<section id="distributions"><h2>Score distributions</h2>{{ dist_svg | safe }}</section>
{% if systems_svg %}<section id="systems"><h2>Per-system means (95% bootstrap intervals)</h2>{{ systems_svg | safe }}</section>{% endif %}
<section id="lowest"><h2>Lowest-scoring examples</h2>
{% for block in lowest %}<h3>{{ block.aspect }}</h3>
{% for ex in block.examples %}<div class="ex"><div><b>{{ ex.key }}</b> &mdash; {{ block.aspect }} {{ "%.4f"|format(ex.value) }}</div>
<div>{% for s in ex.sentences %}<span class="sent" style="background:{{ s.colour }}" title="{{ '%.4f'|format(s.value) }}">{{ s.text }}</span> {% endfor %}</div>
{% for w in ex.windows %}<div class="win"><b>best source window for &ldquo;{{ w.sentence }}&rdquo; ({{ '%.3f'|format(w.value) }}):</b> {{ w.text }}</div>{% endfor %}
</div>{% endfor %}{% endfor %}
{% if not lowest %}<p class="muted">no scored examples</p>{% endif %}
</section>
<p class="muted">Sentence colours: red = low score, green = high (hover for the value). Made by unieval-local.</p>
</body></html>
"""


def build_report(output: str | Path, *, input: str | Path | None = None, title: str | None = None,
                 n_lowest: int = 5, n_boot: int = 1000, seed: int = 0) -> str:
    """The HTML text of the report for ``output`` (see the module docstring).

    Args:
        output: a ``score`` output JSONL (its sidecar ``.meta.json`` gives the signature the run
            printed, its ``signature``, else its run identity's for an older sidecar; and,
            for imported scores such as ``scripts/convert_summeval_unieval.py`` writes, their
            ``origin``, shown under the signature).
        input: the input records, to show target text and source windows by key.
        title: page title (default: the output's file name).
        n_lowest: lowest-scoring examples shown per aspect.
        n_boot, seed: bootstrap of the per-system intervals.

    Raises:
        InputFileError: ``output`` is not a ``score`` output (a ValueError).
    """
    require("html")
    import jinja2

    lines = read_score_output(output, "report-html")
    aspects = output_aspects(lines)
    inputs: dict[str, dict] = {}
    if input is not None:
        inputs = {json.dumps(r.key): r.data for r in iter_records(str(input)) if isinstance(r.data, dict)}
    sidecar = Path(str(output) + ".meta.json")
    signature = origin = None
    if sidecar.is_file():
        from ..schema import Signature

        meta = json.loads(sidecar.read_text())
        # the signature the run printed (written as it ends), one line per evaluator when several
        # scored it; an older sidecar: its run identity's
        several = meta.get("signatures") or {}
        signature = (meta.get("signature") or "\n".join(f"{name}: {line}" for name, line in several.items())
                     or str(Signature(**meta["run"]["signature"])))
        origin = meta.get("origin")
    scored = [x for x in lines if "scores" in x]
    overall = []
    for a in aspects:
        v = np.array([x["scores"][a] for x in scored if a in x["scores"]])
        if len(v):
            overall.append(dict(aspect=a, n=len(v), mean=v.mean(), median=float(np.median(v)), min=v.min(), max=v.max()))
    n_q = n_trunc = 0
    has_evidence = any("evidence" in x for x in scored)
    for x in scored:
        for ev in x.get("evidence", {}).values():
            n_q += len(ev["queries"])
            n_trunc += sum(bool(q.get("truncated")) for q in ev["queries"])
    run_stats = meta.get("stats") if sidecar.is_file() else None
    if run_stats and run_stats.get("n_queries"):
        truncation = (f"{run_stats['n_truncated']} of {run_stats['n_queries']} distinct queries (the run's count; "
                      "a resumed run counts its own queries only)")
    elif has_evidence:
        truncation = (f"{n_trunc} of {n_q} queries, counted per example and aspect (a prompt that several examples "
                      "share counts once for each; the CLI counts distinct queries)")
    else:
        truncation = "not recorded (score with --evidence to see them)"
    lowest = []
    for a in aspects:
        worst = sorted((x for x in scored if a in x["scores"]), key=lambda x: x["scores"][a])[:n_lowest]
        examples = []
        for x in worst:
            rec = inputs.get(json.dumps(x["key"]), {})
            ev = x.get("evidence", {}).get(a)
            sentences, windows = [], []
            if ev and ev.get("sentences"):
                for s in ev["sentences"]:
                    sentences.append(dict(text=s["text"], value=s["value"], colour=_colour(s["value"])))
                    w = s.get("window")
                    src = rec.get(w["field"]) if w else None
                    if w and isinstance(src, str) and s["value"] < 0.5:
                        windows.append(dict(sentence=s["text"], value=s["value"], text=src[w["start"]:w["end"]]))
            else:
                text = rec.get("target") or rec.get("system_output") or "(target text not given: pass --input)"
                sentences.append(dict(text=text, value=x["scores"][a], colour=_colour(x["scores"][a])))
            examples.append(dict(key=x["key"], value=x["scores"][a], sentences=sentences, windows=windows))
        lowest.append(dict(aspect=a, examples=examples))
    dist_svg = _svg(plot_distributions(lines, aspects)) if scored else ""
    sys_fig = plot_systems(lines, aspects, n_boot=n_boot, seed=seed) if scored else None
    env = jinja2.Environment(autoescape=True)
    return env.from_string(TEMPLATE).render(
        title=title or Path(output).name, signature=signature, origin=origin, n_records=len(lines),
        n_scored=len(scored),
        n_failed=len(lines) - len(scored), truncation=truncation, overall=overall, dist_svg=dist_svg,
        systems_svg=_svg(sys_fig) if sys_fig is not None else "", lowest=lowest,
        mean_of=next((list(x["scores"]) for x in scored if "aspect_mean" in x), None),
    )


def render_html(output: str | Path, html_path: str | Path, **kwargs: Any) -> Path:
    """Write :func:`build_report` to ``html_path``; returns the path."""
    path = Path(html_path)
    path.write_text(build_report(output, **kwargs), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- binary labels (meta --labels)
def roc_points(labels: Any, scores: Any) -> tuple[np.ndarray, np.ndarray]:
    """The ROC curve ``(fpr, tpr)`` of ``scores`` for label 1, from (0, 0) to (1, 1), one point
    per distinct score (as sklearn's ``roc_curve`` with ``drop_intermediate=False``)."""
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    ys, ss = y[order], s[order]
    last = np.r_[np.flatnonzero(np.diff(ss)), len(ss) - 1]  # the last row of each distinct score
    tps, fps = np.cumsum(ys)[last], np.cumsum(1 - ys)[last]
    return np.r_[0.0, fps / max(int((y == 0).sum()), 1)], np.r_[0.0, tps / max(int(y.sum()), 1)]


def plot_roc(predictions: dict[str, Any], labels: Any, groups: Any = None):
    """A matplotlib Figure: one panel per aspect, one ROC curve per group (legend: its AUC).

    Args:
        predictions, labels, groups: as :func:`unieval_local.analysis.labels.label_report` takes
            them (``labels`` one array for every aspect, or ``{aspect: array}``).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from .labels import roc_auc

    aspects = list(predictions)
    names = np.asarray(["all"] * len(next(iter(predictions.values()))) if groups is None else groups).astype(str)
    fig, axes = plt.subplots(1, len(aspects), figsize=(3.6 * len(aspects), 3.4), squeeze=False)
    for ax, a in zip(axes[0], aspects):
        y = np.asarray(labels[a] if hasattr(labels, "keys") else labels)
        s = np.asarray(predictions[a], dtype=np.float64)
        for g in dict.fromkeys(names):
            rows = names == g
            if 0 < y[rows].sum() < rows.sum():  # both classes: a curve exists
                fpr, tpr = roc_points(y[rows], s[rows])
                ax.plot(fpr, tpr, lw=1.2, label=f"{g} ({roc_auc(y[rows], s[rows]):.3f})")
        ax.plot([0, 1], [0, 1], ls=":", color="#999", lw=0.8)
        ax.set_title(a, fontsize=9)
        ax.set_xlabel("false positive rate")
        if ax.get_lines()[:-1]:  # some group has both classes
            ax.legend(fontsize=7, loc="lower right", title="group (AUC)", title_fontsize=7)
    axes[0][0].set_ylabel("true positive rate")
    fig.tight_layout()
    return fig


LABEL_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>unieval-local labels: {{ title }}</title>
<style>
""" + _BASE_CSS + """th{background:#f3f3f3} td.l{text-align:left} tr.mean{font-weight:bold} .muted{color:#777;font-size:12px}
svg{max-width:100%;height:auto}
</style></head><body>
<h1>unieval-local labels: {{ title }}</h1>
<p>Fixed threshold {{ report.threshold }} (score &gt; threshold = supported); {{ boot }}.</p>
<section id="label-metrics"><h2>Label metrics</h2>
{% for a in report.aspects %}<h3>{{ a }} (tuned by {{ report.mean[a].tuning }})</h3>
<table><tr><th>group</th><th>n</th><th>supported</th><th>unsupported</th><th>balanced accuracy</th><th>tuned threshold</th>
<th>tuned balanced accuracy</th><th>ROC AUC</th><th>F1 unsupported</th></tr>
{% for g, m, cls in rows[a] %}<tr class="{{ cls }}"><td class="l">{{ g }}</td><td>{{ m.n }}</td><td>{{ m.n_supported }}</td>
<td>{{ m.n_unsupported }}</td><td>{{ cell(m, "balanced_accuracy") }}</td><td>{{ num(m.tuned_threshold, 2) }}</td>
<td>{{ cell(m, "tuned_balanced_accuracy") }}</td><td>{{ cell(m, "roc_auc") }}</td><td>{{ num(m.f1_unsupported, 4) }}</td></tr>
{% endfor %}</table>{% endfor %}</section>
{% if report.comparisons %}<section id="comparisons"><h2>Paired comparisons (A &minus; B)</h2>
<table><tr><th>A</th><th>B</th><th>group</th><th>balanced accuracy diff [95% CI]</th><th>p</th><th>ROC AUC diff [95% CI]</th>
<th>p</th><th>only A right</th><th>only B right</th><th>McNemar p</th></tr>
{% for c in report.comparisons %}<tr><td class="l">{{ c.a }}</td><td class="l">{{ c.b }}</td><td class="l">{{ c.group or mean_label(report, c.a) }}</td>
<td>{{ diff(c.balanced_accuracy_diff, c.balanced_accuracy_interval) }}</td><td>{{ num(c.balanced_accuracy_p, 4) }}</td>
<td>{{ diff(c.roc_auc_diff, c.roc_auc_interval) }}</td><td>{{ num(c.roc_auc_p, 4) }}</td><td>{{ c.a_only_correct }}</td>
<td>{{ c.b_only_correct }}</td><td>{{ num(c.mcnemar_p, 4) }}</td></tr>{% endfor %}</table></section>{% endif %}
<section id="roc"><h2>ROC curves</h2>{{ roc_svg | safe }}</section>
{% if notes %}<section id="notes"><h2>Notes</h2><ul>{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul></section>{% endif %}
{% if signatures %}<section id="signatures"><h2>Signatures</h2>{% for name, sig in signatures.items() %}<p>{{ name }}:</p>
<pre>{{ sig }}</pre>{% endfor %}</section>{% endif %}
<p class="muted">Made by unieval-local {{ made_by }}; docs/meta-evaluation.md (Binary labels) explains each figure.</p>
</body></html>
"""


def build_label_html(report: Any, predictions: dict[str, Any], labels: Any, *, groups: Any = None,
                     title: str = "binary labels", made_by: str = "meta --labels",
                     signatures: dict[str, str] | None = None) -> str:
    """The HTML text of a label meta-evaluation: the table of
    :class:`~unieval_local.analysis.labels.LabelReport` (per aspect and group, and the mean), its
    paired comparisons and notes, and :func:`plot_roc` as inline SVG; ``predictions``, ``labels``
    and ``groups`` are those the report was computed from. ``title``: the page's title (a file's
    name, never its absolute path); ``made_by``: the command named in the footer (``meta --labels``,
    ``benchmark``); ``signatures``: evaluator -> the signature of its scores (``benchmark``: one per
    evaluator), shown under Signatures.

    Raises:
        MissingExtraError: jinja2 or matplotlib missing (the 'html' extra).
    """
    require("html")
    import jinja2

    from .label_table import mean_label

    def num(v: float, digits: int) -> str:
        return "" if v != v else f"{v:.{digits}f}"

    def cell(m: Any, fig: str) -> str:
        iv = m.intervals.get(fig)
        v = getattr(m, fig)
        return "n/a" if v != v else f"{v:.4f}" + (f" [{iv[0]:.4f}, {iv[1]:.4f}]" if iv and iv[0] == iv[0] else "")

    def diff(v: float, iv: tuple[float, float]) -> str:
        return "n/a" if v != v else f"{v:+.4f}" + (f" [{iv[0]:+.4f}, {iv[1]:+.4f}]" if iv[0] == iv[0] else "")

    rows = {a: [(g, m, "") for g, m in report.metrics[a].items()] + [(mean_label(report, a), report.mean[a], "mean")]
            for a in report.aspects}
    notes = [f"{a}, {g}: {x}" for a in report.aspects for g, m in report.metrics[a].items() for x in m.notes]
    notes += [f"{a}, mean: {x}" for a in report.aspects for x in report.mean[a].notes]
    boot = (f"{report.bootstrap} bootstrap resamples of rows within each group, 95% intervals" if report.bootstrap
            else "no bootstrap intervals")
    return jinja2.Environment(autoescape=True).from_string(LABEL_TEMPLATE).render(
        title=title, made_by=made_by, report=report, rows=rows, notes=notes, boot=boot, num=num, cell=cell, diff=diff,
        mean_label=mean_label, signatures=signatures or {},
        roc_svg=_svg(plot_roc({a: predictions[a] for a in report.aspects}, labels, groups)))


def render_label_html(report: Any, predictions: dict[str, Any], labels: Any, html_path: str | Path,
                      **kwargs: Any) -> Path:
    """Write :func:`build_label_html` (``kwargs``: its ``groups``, ``title``, ``made_by``, ``signatures``) to
    ``html_path``; returns the path. Raises OSError when it cannot be written."""
    path = Path(html_path)
    path.write_text(build_label_html(report, predictions, labels, **kwargs), encoding="utf-8")
    return path


__all__ = ["build_label_html", "build_report", "plot_distributions", "plot_roc", "plot_systems", "render_html",
           "render_label_html", "roc_points", "system_means"]
