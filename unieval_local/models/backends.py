"""The model backends, by name (an :class:`~unieval_local.registry.evaluators.Evaluator` names
its own): each is a :data:`~unieval_local.models.base.RunnerFactory` with the engine's settings,
imported only when a checkpoint of that backend is first loaded (torch stays out of
``import unieval_local``).

* ``t5``: seq2seq checkpoints (UniEval, MiniCheck-Flan-T5): the two answer tokens' logits at
  the first decoder step (:mod:`unieval_local.models.t5.runner`).
* ``seq-classifier``: encoders with a classification head over text pairs (DeBERTa NLI):
  P(label) by softmax over the head's labels (:mod:`unieval_local.models.classifier.runner`).
* ``hhem``: HHEM-2.1-Open natively (a T5 encoder, a 2-label head read at the first position;
  :mod:`unieval_local.models.hhem.model`), batched by the same classifier runner.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["BACKENDS", "backend_factory"]

#: backend name -> "module:function" of its runner factory
BACKENDS: dict[str, str] = {
    "t5": "unieval_local.models.t5.runner:t5_runner_factory",
    "seq-classifier": "unieval_local.models.classifier.runner:classifier_runner_factory",
    "hhem": "unieval_local.models.hhem.model:hhem_runner_factory",
}


def backend_factory(name: str) -> Any:
    """The runner factory of backend ``name`` (imported now).

    Raises:
        ValueError: an unknown backend (the message lists them).
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown model backend {name!r}; known: {', '.join(BACKENDS)}")
    module, _, function = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), function)
