"""The plain-text table of a label report (:meth:`unieval_local.analysis.labels.LabelReport.table`):
columns as wide as the longest group and aspect names, plurals right."""

from __future__ import annotations

import math
from typing import Any

from .label_values import plural

__all__ = ["format_report", "mean_label"]


def _cell(value: float, interval: tuple[float, float] | None) -> str:
    """``0.1234 [0.0100, 0.2000]``, ``0.1234`` without an interval, ``n/a`` for NaN."""
    ci = f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else ""
    return "n/a" if math.isnan(value) else f"{value:.4f}{ci}"


def mean_label(report: Any, aspect: str) -> str:
    """The mean row's name: ``mean (2 groups)``, or ``mean (1 of 2 groups)`` when it skips some."""
    n = len(report.groups)
    notes = report.mean[aspect].notes
    taken = next((int(x.split()[2]) for x in notes if x.startswith("mean over ")), n)
    return f"mean ({plural(n, 'group')})" if taken == n else f"mean ({taken} of {plural(n, 'group')})"


def format_report(report: Any) -> str:
    """:meth:`~unieval_local.analysis.labels.LabelReport.table`: per aspect one row per group and
    the mean, then the paired comparisons and the notes; columns as wide as the longest name."""
    boot = report.bootstrap > 0
    w = 25 if boot else 17
    lines = [f"threshold {report.threshold}; " + (f"{report.bootstrap} bootstrap resamples of rows within each group, "
                                                  "95% intervals" if boot else "no bootstrap intervals")]
    gw = 1 + max(15, *(len(g) for g in report.groups), *(len(mean_label(report, a)) for a in report.aspects))
    head = (f"{'group':<{gw}}{'n':>6}{'sup':>6}{'uns':>6}{'bal. acc.':>{w}}  {'tuned t':>7}{'tuned bal. acc.':>{w}}"
            f"{'ROC AUC':>{w}}{'F1 uns.':>9}")
    notes = []
    for a in report.aspects:
        rows = [*report.metrics[a].items(), (mean_label(report, a), report.mean[a])]
        lines += ["", f"{a}: tuned by {report.mean[a].tuning}", head]
        for g, m in rows:
            iv = m.intervals.get
            t = "" if math.isnan(m.tuned_threshold) else f"{m.tuned_threshold:.2f}"
            lines.append(f"{g:<{gw}}{m.n:>6}{m.n_supported:>6}{m.n_unsupported:>6}"
                         f"{_cell(m.balanced_accuracy, iv('balanced_accuracy')):>{w}}  {t:>7}"
                         f"{_cell(m.tuned_balanced_accuracy, iv('tuned_balanced_accuracy')):>{w}}"
                         f"{_cell(m.roc_auc, iv('roc_auc')):>{w}}{m.f1_unsupported:>9.4f}")
        notes += [f"{a}, {g}: {x}" for g, m in report.metrics[a].items() for x in m.notes]
        notes += [f"{a}, mean: {x}" for x in report.mean[a].notes]
    if report.comparisons:
        aw = 1 + max(13, *(len(x) for c in report.comparisons for x in (c.a, c.b)))
        cw = 1 + max(15, *(len(c.group or mean_label(report, c.a)) for c in report.comparisons))
        lines += ["", "paired comparisons (A - B; bootstrap 95% intervals, two-sided p; McNemar's exact test at the "
                  "threshold on the rows only A / only B gets right)",
                  f"{'A':<{aw}}{'B':<{aw}}{'group':<{cw}}{'bal. acc. diff':>{w + 2}}{'p':>8}{'ROC AUC diff':>{w + 2}}"
                  f"{'p':>8}{'A only':>8}{'B only':>8}{'McNemar p':>11}"]
        for c in report.comparisons:
            g = mean_label(report, c.a) if c.group is None else c.group  # the groups it covers, as the tables say
            p1, p2 = ("" if math.isnan(p) else f"<{2 / report.bootstrap:.4f}" if p == 0 else f"{p:.4f}"
                      for p in (c.balanced_accuracy_p, c.roc_auc_p))
            lines.append(f"{c.a:<{aw}}{c.b:<{aw}}{g:<{cw}}"
                         f"{_cell(c.balanced_accuracy_diff, c.balanced_accuracy_interval if boot else None):>{w + 2}}"
                         f"{p1:>8}{_cell(c.roc_auc_diff, c.roc_auc_interval if boot else None):>{w + 2}}{p2:>8}"
                         f"{c.a_only_correct:>8}{c.b_only_correct:>8}{c.mcnemar_p:>11.4f}")
    if notes:
        lines += ["", "notes:", *notes]
    return "\n".join(lines)
