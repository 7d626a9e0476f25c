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
* ``causal-lm``: decoder LLM judges (Llama, Qwen2, Granite) through their own chat template, one
  forward pass per prompt, a label or rating readout (:mod:`unieval_local.models.causal_lm.runner`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["BACKENDS", "Backend", "backend_factory", "backend_verifier"]


@dataclass(frozen=True)
class Backend:
    """One model backend: where its code is (imported on first use).

    Attributes:
        name: the name an :class:`~unieval_local.registry.evaluators.Evaluator` gives as ``backend``.
        factory: ``module:function`` of its :data:`~unieval_local.models.base.RunnerFactory`
            (keyword settings: device, dtype, batch_tokens, attention_mib, fast_forward, progress).
        verify: ``module:function(report, folder, evaluator) -> report``, its ``unieval-local
            verify`` checks after the shared ones (files, manifest, weights open); None: the T5
            checks of :mod:`unieval_local.models.verify`.
        tokenizer_files: the tokenizer files its folders hold (one of them is needed unless the
            evaluator names ``tokenizer_from``).
    """

    name: str
    factory: str
    verify: str | None = None
    tokenizer_files: tuple[str, ...] = ("spiece.model", "tokenizer.json")


#: The backends, by name.
BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("t5", "unieval_local.models.t5.runner:t5_runner_factory"),
    Backend("seq-classifier", "unieval_local.models.classifier.runner:classifier_runner_factory",
            "unieval_local.models.classifier.runner:verify_classifier", ("spm.model", "tokenizer.json")),
    Backend("hhem", "unieval_local.models.hhem.model:hhem_runner_factory",
            "unieval_local.models.hhem.model:verify_hhem", ()),
    Backend("causal-lm", "unieval_local.models.causal_lm.runner:causal_lm_runner_factory",
            "unieval_local.models.causal_lm.runner:verify_causal_lm", ("tokenizer.json",)),
)}


def _load(path: str) -> Any:
    module, _, function = path.partition(":")
    return getattr(importlib.import_module(module), function)


def _backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"unknown model backend {name!r}; known: {', '.join(BACKENDS)}")
    return BACKENDS[name]


def backend_factory(name: str) -> Any:
    """The runner factory of backend ``name`` (imported now).

    Raises:
        ValueError: an unknown backend (the message lists them).
    """
    return _load(_backend(name).factory)


def backend_verifier(name: str) -> Any:
    """The ``verify`` checks of backend ``name`` (None: the T5 checks).

    Raises:
        ValueError: an unknown backend.
    """
    verify = _backend(name).verify
    return _load(verify) if verify else None
