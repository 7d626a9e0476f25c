"""The training loop: transformers' ``Trainer`` runs it; this module supplies the batches, the loss
on the scoring readout, the dev figures and the callbacks (STYLE 14: the trainer library owns the
loop: resume, checkpoints, early stopping, the progress bar).

One training item is one labelled record: its query prompts (as scoring plans them: one per
sentence for a sentence-level aspect, one per chunk for a chunking checker) and how their scores
fold into the record's score (:func:`fold_record`, the same reductions as
:func:`~unieval_local.pipeline.fold.fold_all`). The loss is the binary cross-entropy of the
record's score against its label (1 = the aspect holds)::

    loss = -[y log s + (1 - y) log(1 - s)]

For a record of one query this is exactly the cross-entropy over the two answer tokens (T5) or the
head's labels collapsed to "label" vs "the others" (classifiers), computed from log-probabilities
(:meth:`~unieval_local.models.train.readout.TrainableModel.log_pair`); a record of several queries
folds their probabilities first (mean over sentences, max over chunks), so what is trained is the
score scoring reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .readout import TrainableModel

__all__ = ["FitResult", "TrainItem", "TrainSettings", "fit", "fold_record", "item_scores", "last_checkpoint",
           "record_scores", "set_dropout"]

_EPS = 1e-7


@dataclass(frozen=True)
class TrainItem:
    """One labelled record as the trainer sees it.

    Attributes:
        ids: token ids of each of its queries (as scoring tokenizes them).
        grid: ``grid[r][u]`` = the indices into ``ids`` of reference ``r``'s windows of unit ``u``
            (:class:`~unieval_local.pipeline.planning.Block`, made local to the record).
        label: 1 (the aspect holds / the claim is supported) or 0; a replay item's soft target in
            [0, 1] (the base's own score: BCE with a soft label).
        reductions: ``(unit, window)`` reductions of this item's aspect when it differs from the
            trained one (a replay item); None: the settings' own.
    """

    ids: tuple[tuple[int, ...], ...]
    grid: tuple[tuple[tuple[int, ...], ...], ...]
    label: float
    reductions: tuple[str, str] | None = None


@dataclass(frozen=True)
class TrainSettings:
    """How to train (:mod:`unieval_local.training.config` documents each; the CLI's flags).

    ``max_steps`` None: ``epochs`` over the data. ``optimizer``: ``adafactor`` (T5's own, constant
    rate, Shazeer and Stern 2018) or ``adamw``; ``schedule``: transformers' ``lr_scheduler_type``
    (``constant``, ``linear`` ...), over ``max_steps`` when given. ``best_metric``: the dev figure
    that picks the kept checkpoint (``balanced_accuracy``, ``roc_auc`` or ``loss``).
    """

    work_dir: str
    seed: int = 0
    epochs: float = 3.0
    max_steps: int | None = None
    batch_size: int = 16
    learning_rate: float = 1e-4
    optimizer: str = "adafactor"
    schedule: str = "constant"
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    eval_steps: int = 50
    save_steps: int = 50
    save_total_limit: int = 2
    early_stopping: int | None = None
    best_metric: str = "loss"
    unit_reduction: str = "mean"
    window_reduction: str = "max"
    reference_reduction: str = "mean"
    device: str = "cpu"
    bf16: bool = False
    progress: bool = True
    resume: bool = False
    dropout: float | None = None
    shuffle: bool = True
    extra_callbacks: tuple = field(default_factory=tuple)


@dataclass
class FitResult:
    """What :func:`fit` did: steps run, the best dev figure and its step, the log history."""

    steps: int
    best_step: int | None
    best_metric: float | None
    history: list[dict[str, Any]]


def _reduce(values, how: str):
    import torch

    if how == "mean":
        return values.mean()
    if how == "sum":
        return values.sum()
    if how == "max":
        return values.max()
    if how == "min":
        return values.min()
    raise ValueError(f"unknown reduction {how!r}")


def fold_record(p, grid: Sequence[Sequence[Sequence[int]]], *, unit_reduction: str = "mean",
                window_reduction: str = "max", reference_reduction: str = "mean"):
    """A record's score from its queries' probabilities ``p`` (a 1-D tensor), differentiably: windows
    (``window_reduction``), then references (``reference_reduction``), then units
    (``unit_reduction``), as :func:`~unieval_local.pipeline.fold.fold_all` reduces them."""
    import torch

    units = []
    for u in range(len(grid[0])):
        by_ref = torch.stack([_reduce(p[list(row[u])], window_reduction) for row in grid])
        units.append(_reduce(by_ref, reference_reduction))
    return _reduce(torch.stack(units), unit_reduction)


def record_scores(log_p, log_q, owner_starts: Sequence[int], grids: Sequence, settings: TrainSettings,
                  reductions: Sequence | None = None):
    """``(score, log s, log (1 - s))`` per record, each ``(R,)``: a record of one query keeps its
    exact log-probabilities; several are folded (:func:`fold_record`, with the record's own
    ``reductions[i]`` where given, else the settings') and clamped to ``[1e-7, 1 - 1e-7]`` before the log."""
    import torch

    scores, lps, lqs = [], [], []
    ends = list(owner_starts[1:]) + [log_p.shape[0]]
    reductions = reductions or [None] * len(grids)
    for start, end, grid, own in zip(owner_starts, ends, grids, reductions):
        if end - start == 1:
            lp, lq = log_p[start], log_q[start]
            s = lp.exp()
        else:
            unit, window = own or (settings.unit_reduction, settings.window_reduction)
            s = fold_record(log_p[start:end].exp(), grid, unit_reduction=unit, window_reduction=window,
                            reference_reduction=settings.reference_reduction)
            c = s.clamp(_EPS, 1 - _EPS)
            lp, lq = c.log(), (1 - c).log()
        scores.append(s)
        lps.append(lp)
        lqs.append(lq)
    return torch.stack(scores), torch.stack(lps), torch.stack(lqs)


class _Collator:
    """Items -> one padded batch of every query of the batch's records (right padding), the
    first query of each record, their grids and the labels."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, items: Sequence[TrainItem]) -> dict[str, Any]:
        import torch

        rows = [q for it in items for q in it.ids]
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for k, r in enumerate(rows):
            input_ids[k, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask[k, :len(r)] = 1
        starts, at = [], 0
        for it in items:
            starts.append(at)
            at += len(it.ids)
        return {"input_ids": input_ids, "attention_mask": mask, "owner_starts": starts,
                "grids": [it.grid for it in items], "reductions": [it.reductions for it in items],
                "labels": torch.tensor([float(it.label) for it in items], dtype=torch.float32)}


def _trainer_class():
    """A ``transformers.Trainer`` whose loss and prediction read the scoring readout."""
    from transformers import Trainer

    class ReadoutTrainer(Trainer):
        trainable: TrainableModel
        settings: TrainSettings

        def _forward(self, model, inputs):
            # through the model the Trainer hands over (DDP's wrapper under torchrun: its forward syncs the gradients)
            log_p, log_q = self.trainable.log_pair(inputs["input_ids"], inputs["attention_mask"], module=model)
            return record_scores(log_p, log_q, inputs["owner_starts"], inputs["grids"], self.settings,
                                 inputs.get("reductions"))

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            scores, lp, lq = self._forward(model, inputs)
            y = inputs["labels"].to(lp.device)
            loss = -(y * lp + (1 - y) * lq).mean()
            return (loss, {"scores": scores}) if return_outputs else loss

        def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
            import torch

            inputs = self._prepare_inputs(inputs)
            with torch.no_grad():
                scores, lp, lq = self._forward(model, inputs)
                y = inputs["labels"].to(lp.device)
                loss = -(y * lp + (1 - y) * lq).mean()
            return loss.detach(), scores.detach().float(), y

    return ReadoutTrainer


def last_checkpoint(work_dir: str) -> str | None:
    """The newest ``checkpoint-N`` folder in ``work_dir`` (what ``resume`` continues from), or None."""
    import os

    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(work_dir) if os.path.isdir(work_dir) else None


def item_scores(trainable: TrainableModel, items: Sequence[TrainItem], settings: TrainSettings,
                batch_size: int = 16) -> list[float]:
    """Each item's record score under ``trainable``'s current weights, without gradients (eval
    mode; the fold and readout of training, so of scoring): the soft targets of replay items."""
    import torch

    collate = _Collator(trainable.pad_id)
    was = trainable.module.training
    trainable.module.eval()
    device = next(trainable.module.parameters()).device
    out: list[float] = []
    try:
        with torch.no_grad():
            for k in range(0, len(items), batch_size):
                b = collate(items[k:k + batch_size])
                lp, lq = trainable.log_pair(b["input_ids"].to(device), b["attention_mask"].to(device))
                s, _, _ = record_scores(lp, lq, b["owner_starts"], b["grids"], settings, b["reductions"])
                out += [float(x) for x in s]
    finally:
        trainable.module.train(was)
    return out


def set_dropout(module, rate: float) -> int:
    """Set every dropout of ``module`` to ``rate``: the ``nn.Dropout`` layers and the attention
    probabilities' dropout that T5 (``T5Attention.dropout``) and others keep as a float attribute
    and apply functionally (``--dropout 0`` must leave no random mask in training mode; the saved
    config keeps the base's rates). Returns how many were set."""
    import torch

    done = 0
    for sub in module.modules():
        if isinstance(sub, torch.nn.Dropout):
            sub.p = rate
            done += 1
        for name in ("dropout", "attention_dropout", "dropout_rate"):
            if isinstance(getattr(sub, name, None), float):
                setattr(sub, name, rate)
                done += 1
    return done


def dev_figures(labels, scores) -> dict[str, float]:
    """Balanced accuracy at the 0.5 threshold (``score > 0.5``, the board's rule) and ROC AUC of dev
    scores (:mod:`unieval_local.analysis.labels`); NaN where a figure is undefined."""
    import numpy as np

    from ...analysis.labels import balanced_accuracy, roc_auc

    y = np.asarray(labels).astype(int).reshape(-1)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    return {"balanced_accuracy": float(balanced_accuracy(y, s > 0.5)), "roc_auc": float(roc_auc(y, s))}


def _arguments(settings: TrainSettings, has_dev: bool):
    import dataclasses

    from transformers import TrainingArguments

    kwargs: dict[str, Any] = dict(
        output_dir=settings.work_dir, seed=settings.seed, data_seed=settings.seed,
        per_device_train_batch_size=settings.batch_size, per_device_eval_batch_size=settings.batch_size,
        num_train_epochs=settings.epochs, max_steps=settings.max_steps if settings.max_steps else -1,
        learning_rate=settings.learning_rate, lr_scheduler_type=settings.schedule, weight_decay=settings.weight_decay,
        optim="adafactor" if settings.optimizer == "adafactor" else "adamw_torch",
        save_strategy="steps", save_steps=settings.save_steps, save_total_limit=settings.save_total_limit,
        logging_steps=max(1, min(settings.eval_steps, 10)), report_to=[], disable_tqdm=not settings.progress,
        remove_unused_columns=False, label_names=["labels"], dataloader_num_workers=0,
        use_cpu=settings.device == "cpu", bf16=settings.bf16,
    )
    known = {f.name for f in dataclasses.fields(TrainingArguments)}
    # transformers 5 reads a float warmup_steps in [0, 1) as a ratio (warmup_ratio is gone)
    kwargs["warmup_ratio" if "warmup_ratio" in known else "warmup_steps"] = settings.warmup_ratio
    if has_dev:
        metric = settings.best_metric
        kwargs.update(eval_strategy="steps", eval_steps=settings.eval_steps, load_best_model_at_end=True,
                      metric_for_best_model="loss" if metric == "loss" else metric,
                      greater_is_better=metric != "loss")
    return TrainingArguments(**kwargs)


def fit(trainable: TrainableModel, train: Sequence[TrainItem], dev: Sequence[TrainItem], settings: TrainSettings,
        *, on_log: Callable[[dict[str, Any]], None] | None = None) -> FitResult:
    """Fine-tune ``trainable.module`` in place on ``train``, evaluating on ``dev`` every
    ``eval_steps`` and keeping the best dev checkpoint (loaded back at the end).

    Checkpoints (weights, optimizer, scheduler, RNG states, the data order's position) are written to
    ``settings.work_dir/checkpoint-N`` every ``save_steps``; ``settings.resume`` continues from the
    newest one (transformers' ``resume_from_checkpoint``): a killed run resumed ends with the weights
    of an uninterrupted run of the same seed (on CPU).

    Raises:
        ValueError: no training items, or an unknown optimizer / metric.
    """
    from pathlib import Path

    import torch
    from transformers import EarlyStoppingCallback, TrainerCallback

    if not train:
        raise ValueError("no training records")
    if settings.optimizer not in ("adafactor", "adamw"):
        raise ValueError(f"optimizer must be adafactor or adamw, got {settings.optimizer!r}")
    if settings.best_metric not in ("balanced_accuracy", "roc_auc", "loss"):
        raise ValueError(f"best_metric must be balanced_accuracy, roc_auc or loss, got {settings.best_metric!r}")
    module = trainable.module
    if settings.dropout is not None:
        set_dropout(module, settings.dropout)
    module.train()

    def metrics(pred) -> dict[str, float]:
        return dev_figures(pred.label_ids, pred.predictions)

    class _Log(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if on_log is not None and logs:
                on_log({"step": state.global_step, **logs})

    callbacks: list = [_Log(), *settings.extra_callbacks]
    if settings.early_stopping and dev:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=settings.early_stopping))
    cls = _trainer_class()
    trainer = cls(model=module, args=_arguments(settings, bool(dev)), train_dataset=list(train),
                  eval_dataset=list(dev) if dev else None, data_collator=_Collator(trainable.pad_id),
                  compute_metrics=metrics if dev else None, callbacks=callbacks)
    trainer.trainable, trainer.settings = trainable, settings
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # logs reach on_log (stderr), never stdout
    if not settings.shuffle:  # one fixed order (the multi-process equality test)
        trainer._get_train_sampler = lambda *a, **k: torch.utils.data.SequentialSampler(train)
    last = last_checkpoint(settings.work_dir) if settings.resume else None
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    if not settings.progress:
        hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # "missing keys ... embed_tokens" when the best checkpoint is loaded back: tied
    try:
        out = trainer.train(resume_from_checkpoint=last)
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
    state = trainer.state
    best = state.best_metric
    best_step = None
    if state.best_model_checkpoint:
        best_step = int(Path(state.best_model_checkpoint).name.rpartition("-")[2])
    module.eval()
    return FitResult(steps=int(out.global_step), best_step=best_step,
                     best_metric=None if best is None or (isinstance(best, float) and math.isnan(best)) else float(best),
                     history=list(state.log_history))
