"""Optional features and the pip extras that install them.

The core (``score``, ``evaluate``, ``unieval-local score/merge/download/verify/tasks``)
needs only the base install. Meta-evaluation, the HTML report and the report formats
use heavier libraries, installed by extras::

    pip install 'unieval-local[meta]'      # scipy: meta
    pip install 'unieval-local[html]'      # matplotlib, jinja2: report-html
    pip install 'unieval-local[reports]'   # scikit-learn, networkx, scipy: report (key points, redundancy)
    pip install 'unieval-local[serve]'     # fastapi, uvicorn, prometheus-client: serve (the HTTP service)
    pip install 'unieval-local[train]'     # accelerate (transformers' Trainer), rank-bm25: train, pseudo
    pip install 'unieval-local[pandas]'    # pandas: results as DataFrames (to_pandas)
    pip install 'unieval-local[all]'       # everything above (and the ray engine)

:func:`require` turns a missing library into one clear error naming the extra.
"""

from __future__ import annotations

import importlib

from .errors import MissingExtraError

__all__ = ["EXTRAS", "missing_extra", "require"]

#: extra -> (the modules it provides, what needs them)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "meta": (("scipy",), "meta-evaluation (meta)"),
    "html": (("matplotlib", "jinja2"), "the HTML report (report-html)"),
    "reports": (("sklearn", "networkx", "scipy"), "the report formats (report: key points, redundancy, cut-point fits)"),
    "serve": (("fastapi", "uvicorn", "prometheus_client"), "the HTTP service (serve)"),
    "ray_serve": (("ray.serve",), "the HTTP service on Ray Serve (serve --engine ray)"),
    "train": (("accelerate",), "fine-tuning (train)"),
    "pandas": (("pandas",), "results as a DataFrame (to_pandas)"),
    "pseudo": (("rank_bm25",), "pseudo data's BM25 retrieval (pseudo --dimension coherence/relevance)"),
}
#: module -> the distribution pip installs it from
#: a requirement key -> the pip extra that installs it, where they differ
_PIP_EXTRA = {"ray_serve": "ray", "pseudo": "train"}
_DISTRIBUTIONS = {"sklearn": "scikit-learn", "prometheus_client": "prometheus-client", "ray.serve": "ray[serve]", "rank_bm25": "rank-bm25"}


_AVAILABLE: set[str] = set()


def require(extra: str) -> None:
    """Check that the libraries of ``extra`` (a key of :data:`EXTRAS`) are importable.

    Raises:
        MissingExtraError: one is missing; the message names it, the feature and
            ``pip install 'unieval-local[<extra>]'``.
    """
    modules, what = EXTRAS[extra]
    missing = []
    for m in modules:
        if m not in _AVAILABLE:
            try:
                importlib.import_module(m)
                _AVAILABLE.add(m)
            except ImportError:
                missing.append(m)
    if missing:
        raise missing_extra(extra, missing)


def missing_extra(extra: str, missing: list[str] | None = None) -> MissingExtraError:
    """The error for ``extra`` (a key of :data:`EXTRAS`) not installed: it names the feature, the
    ``missing`` modules (default: all of the extra's) as pip names them and the pip command, e.g.
    ``results as a DataFrame (to_pandas) needs pandas, not installed here: install the 'pandas'
    extra: pip install 'unieval-local[pandas]' (from a clone: pip install '.[pandas]')``."""
    modules, what = EXTRAS[extra]
    names = [_DISTRIBUTIONS.get(m, m) for m in (missing or modules)]
    extra = _PIP_EXTRA.get(extra, extra)
    return MissingExtraError(f"{what} needs {' and '.join(names)}, not installed here: install the '{extra}' "
                             f"extra: pip install 'unieval-local[{extra}]' (from a clone: pip install '.[{extra}]')")
