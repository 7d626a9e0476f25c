"""A base checkpoint loaded for training, read the way scoring reads it.

Training and scoring read the model the same way (ARCHITECTURE, "Training"):

* ``t5`` backend, ``readout="pair"`` (UniEval, MiniCheck): the logits of the evaluator's two
  answer tokens at the first decoder step (decoder input ``[decoder_start_token_id]``). The score
  is ``sigmoid(l_pos - l_neg)`` (UniEval ``scorer.py``; contract "The score of one query"), so
  ``log P = logsigmoid(l_pos - l_neg)`` and ``log (1 - P) = logsigmoid(l_neg - l_pos)``: the
  cross-entropy over the two answer tokens.
* ``seq-classifier`` backend (FactCG, mDeBERTa NLI): the head's logits; the score is
  ``softmax(logits)[label]`` (the evaluator's label index, :func:`~unieval_local.models.classifier.runner.readout_label`),
  ``log P = log_softmax[label]`` and ``log (1 - P) = logsumexp`` of the other labels' log-softmax
  (for a 3-way NLI head, "not supported" is neutral + contradiction).

Loaded through the same classes scoring loads with (:class:`~unieval_local.models.t5.runner.T5Model`,
:class:`~unieval_local.models.classifier.runner.ClassifierModel`), so the same strict loading,
stored-file checks and tokenization apply; never through the shared model cache (training
changes the weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...errors import CheckpointError
from ...registry.evaluators import Evaluator, answer_ids
from ..checkpoints import ResolvedCheckpoint

__all__ = ["TRAINABLE_BACKENDS", "TRAIN_BYTES_PER_PARAMETER", "TrainableModel", "check_training_memory", "load_trainable",
           "parameter_count", "refuse_untrainable"]

#: The backends ``train`` fine-tunes (HHEM and the decoder judges are out of scope).
TRAINABLE_BACKENDS = ("t5", "seq-classifier")


def refuse_untrainable(evaluator: Evaluator) -> None:
    """Raise ValueError naming the evaluator when ``train`` cannot fine-tune it: HHEM (a T5
    encoder with a head whose foundation model sits beside it), the decoder judges (causal-lm), a
    T5 evaluator read over the whole vocabulary (SEAHORSE)."""
    if evaluator.backend == "hhem":
        raise ValueError(f"{evaluator.name} cannot be fine-tuned here: HHEM-2.1-Open keeps its foundation model "
                         "(flan-t5-base) beside its head, which this trainer does not rebuild; train minicheck-flan-"
                         "t5-large (a T5 checker) or factcg-deberta-large (a DeBERTa checker) on your labels instead")
    if evaluator.backend not in TRAINABLE_BACKENDS:
        raise ValueError(f"{evaluator.name} ({evaluator.backend} backend) cannot be fine-tuned here: the trainable "
                         "bases are the T5 Boolean-QA evaluators (unieval-sum, unieval-dialog, unieval-fact, "
                         "minicheck-flan-t5-large) and the DeBERTa classifiers (factcg-deberta-large, mdeberta-nli)")
    if evaluator.backend == "t5" and evaluator.readout != "pair":
        raise ValueError(f"{evaluator.name} is read over the whole vocabulary (readout {evaluator.readout!r}): "
                         "fine-tuning supports the two-answer readout of UniEval and MiniCheck only")


@dataclass
class TrainableModel:
    """A base checkpoint loaded for training.

    Attributes:
        module: the transformers model (``T5ForConditionalGeneration`` or a sequence classifier);
            what the trainer optimises and what is saved.
        encode: ``encode(prompts, max_length) -> ids``: token ids of each prompt as scoring
            tokenizes it (T5: the end cut, EOS kept; a classifier pair: the premise cut).
        counter: the scoring model's token arithmetic (for planning long inputs).
        pad_id: the padding id. start_id: T5's decoder start id (None for classifiers).
        answers: T5's (positive, negative) answer token ids; label: a classifier's label index.
        folder: the base folder. backend: ``t5`` or ``seq-classifier``. tokenizer: the tokenizer.
    """

    module: Any
    encode: Callable[[Sequence[str], int], list[list[int]]]
    counter: Any
    pad_id: int
    folder: Path
    backend: str
    tokenizer: Any
    start_id: int | None = None
    answers: tuple[int, int] | None = None
    label: int | None = None

    def log_pair(self, input_ids, attention_mask, module=None):
        """``(log P, log (1 - P))`` per row of a padded batch, each ``(B,)`` float32, with
        gradients: P is the score scoring would give (module docstring). ``module``: the model to
        run (default :attr:`module`; the trainer passes its wrapper, e.g. DistributedDataParallel,
        whose forward is what averages the gradients over processes)."""
        import torch
        import torch.nn.functional as F

        module = self.module if module is None else module

        if self.backend == "t5":
            start = torch.full((input_ids.shape[0], 1), self.start_id, dtype=torch.long, device=input_ids.device)
            logits = module(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=start,
                                 use_cache=False).logits[:, 0, :].float()
            d = logits[:, self.answers[0]] - logits[:, self.answers[1]]
            return F.logsigmoid(d), F.logsigmoid(-d)
        logits = module(input_ids=input_ids, attention_mask=attention_mask).logits.float()
        log_soft = torch.log_softmax(logits, dim=-1)
        others = torch.cat([log_soft[:, :self.label], log_soft[:, self.label + 1:]], dim=-1)
        return log_soft[:, self.label], torch.logsumexp(others, dim=-1)


def load_trainable(checkpoint: ResolvedCheckpoint, evaluator: Evaluator, *, device: str = "cpu",
                   dtype: str = "float32") -> TrainableModel:
    """Load ``checkpoint`` (a folder of ``evaluator``'s family) for training, on ``device`` in ``dtype``.

    Raises:
        ValueError: the evaluator cannot be fine-tuned (:func:`refuse_untrainable`).
        CheckpointError: the folder does not load as scoring would load it.
    """
    refuse_untrainable(evaluator)
    if evaluator.backend == "t5":
        from ..t5.runner import T5Model

        model = T5Model(checkpoint, device, dtype)
        rows = int(model.model.get_input_embeddings().weight.shape[0])
        answers = answer_ids(model.tokenizer, evaluator, rows)
        return TrainableModel(model.model, model.tokenize, model, model.pad_id, Path(checkpoint.path), "t5",
                              model.tokenizer, start_id=int(model.start_id), answers=answers)
    from ..classifier.runner import model_class_of
    from ..classifier.runner import ClassifierRunner

    model = model_class_of(evaluator)(checkpoint, evaluator, device, dtype)
    counter = ClassifierRunner(model, evaluator=evaluator, fingerprint="")
    if model.model.config.num_labels < 2:
        raise CheckpointError(f"{checkpoint.path}: a head of {model.model.config.num_labels} label(s) cannot be "
                              "trained as a checker (two or more labels needed)")
    return TrainableModel(model.model, model.encode, counter, int(model.pad_id), Path(checkpoint.path),
                          "seq-classifier", model.tokenizer, label=model.label_of(evaluator))


def parameter_count(folder: str | Path) -> int:
    """Parameters stored in ``folder``'s weight files, counted from their headers (safetensors) or
    their size in float32 (a pickled ``.bin``); nothing is loaded."""
    from ..weights import weight_files

    n = 0
    for f in weight_files(Path(folder)):
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), "pt") as fh:
                for name in fh.keys():
                    shape = fh.get_slice(name).get_shape()
                    size = 1
                    for s in shape:
                        size *= int(s)
                    n += size
        else:
            n += f.stat().st_size // 4
    return n


#: Bytes per parameter while training in float32: weights, gradients and the optimizer's state
#: (AdamW: two moments; Adafactor: factored second moments, a few percent of the weights).
TRAIN_BYTES_PER_PARAMETER = {"adamw": 16, "adafactor": 8.4}


def check_training_memory(folder: str | Path, optimizer: str, device: str, free: int | None = None) -> int:
    """Refuse, before loading, a base whose training state does not fit ``device``'s free memory:
    :data:`TRAIN_BYTES_PER_PARAMETER` bytes a parameter, plus 20% for activations at the default
    batch (the estimate is printed either way).

    Returns:
        The estimated bytes.

    Raises:
        CheckpointError: it does not fit; the message gives both sizes and what to try.
    """
    from ..causal_lm.model import free_memory

    n = parameter_count(folder)
    need = int(n * TRAIN_BYTES_PER_PARAMETER[optimizer] * 1.2)
    free = free_memory(device) if free is None else free
    if free is not None and need > free:
        raise CheckpointError(f"{folder}: training a {n / 1e6:.0f}M-parameter model with {optimizer} needs about "
                              f"{need / 2**30:.1f} GiB, but {device} has {free / 2**30:.1f} GiB free: not loaded "
                              "(try --optimizer adafactor, a GPU, or a smaller base)")
    return need
