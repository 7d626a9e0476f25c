"""Use the package from the frameworks NLG researchers already run (issue 45).

* Hugging Face ``evaluate``: ``evaluate.load(evaluate_path(), config_name)`` loads the module
  shipped in ``unieval_local/integrations/unieval_metric/`` (no hub, no download).
* Inspect AI: :func:`unieval_local.integrations.inspect.unieval_scorer`.
* lm-evaluation-harness: :mod:`unieval_local.integrations.lm_eval` (``!function`` hooks).

Each holds ONE :class:`~unieval_local.api.Scorer` per process and setting
(:func:`~unieval_local.integrations.shared.shared_scorer`), so checkpoints load once. The
frameworks are optional (``pip install 'unieval-local[integrations]'``); importing this
package imports none of them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["evaluate_path"]


def evaluate_path() -> str:
    """The folder of the ``evaluate`` module, for ``evaluate.load``.

    ``evaluate.load(path)`` takes a local folder whose script has the folder's name
    (``unieval_metric/unieval_metric.py``); this is that folder, inside the installed package,
    so nothing is fetched from the hub.

    Returns:
        The absolute path of ``unieval_local/integrations/unieval_metric`` as a string.

    Example:
        >>> import evaluate  # doctest: +SKIP
        >>> metric = evaluate.load(evaluate_path(), "unieval-sum", model="ckpts/unieval-sum")  # doctest: +SKIP
    """
    return str(Path(__file__).resolve().parent / "unieval_metric")
