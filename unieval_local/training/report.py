"""The before/after report of a training run: the label figures of ``meta --labels`` for the base
and for the trained folder on the same rows, with their paired comparison
(:func:`~unieval_local.analysis.labels.label_report`: balanced accuracy at 0.5 and at a threshold
tuned by k-fold on rows it never scores, ROC AUC, bootstrap intervals, paired bootstrap and
McNemar's exact test), written to ``OUTPUT/training_report.json`` (and ``.html`` with the html
extra) and printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.labels import json_ready, label_report

__all__ = ["REPORT_NAME", "before_after"]

#: The report's file name in the trained folder.
REPORT_NAME = "training_report.json"


def before_after(before: np.ndarray, after: np.ndarray, labels: np.ndarray, *, config, evaluator: str, aspect: str,
                 fitted, training: dict[str, Any], rows_over: int, evaluated_on: str,
                 out: Path, forgetting: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The report (a JSON-ready dict) and its printed table; both files written into ``out``.

    ``before``/``after``: ``(n,)`` scores of the base and the trained folder on the evaluation rows
    (NaN where a row failed to score: left out of both, counted). ``labels``: ``(n,)`` 0/1.
    ``forgetting``: the entry of :func:`~unieval_local.training.forgetting.measure_forgetting`
    (None: "forgetting not measured").
    """
    from .forgetting import NOT_MEASURED, forgetting_table

    forgetting = forgetting or NOT_MEASURED
    ok = np.isfinite(before) & np.isfinite(after)
    preds = {"base": before[ok], "trained": after[ok]}
    y = np.asarray(labels)[ok]
    report = label_report(preds, y, bootstrap=config.bootstrap, seed=config.seed, compare=[("trained", "base")])
    history = [h for h in fitted.history if "eval_loss" in h]
    data = {"evaluator": evaluator, "aspect": aspect, "output": str(out), "evaluated_on": evaluated_on,
            "rows": {"evaluated": int(ok.sum()), "not_scored": int((~ok).sum())},
            "training": training, "queries_over_max_length": rows_over,
            "dev_history": [{k: h[k] for k in h if k in ("step", "eval_loss", "eval_balanced_accuracy",
                                                          "eval_roc_auc")} for h in history],
            "figures": report.to_json(), "forgetting": forgetting}
    data = json_ready(data)
    header = (f"{aspect} ({evaluator}) on the {int(ok.sum())} {evaluated_on} rows: base = before training, "
              f"trained = {out} (best dev step {fitted.best_step}, of {fitted.steps})")
    table = header + "\n" + report.table() + "\n" + forgetting_table(forgetting)
    (out / REPORT_NAME).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    try:
        from ..analysis.html_report import render_label_html
        from ..extras import require

        require("html")
        render_label_html(report, preds, y, out / "training_report.html", title=f"{out.name}: before and after")
    except ImportError:
        pass
    except Exception as exc:  # noqa: BLE001  the page is a by-product: its failure loses nothing else
        data["html_error"] = f"{type(exc).__name__}: {exc}"
    return data, table
