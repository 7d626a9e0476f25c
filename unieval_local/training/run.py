"""``unieval-local train``: fine-tune a checker or a UniEval aspect on your labels, checked before and after.

The steps (docs/training.md):

1. Resolve the base (``NAME=DIR`` or a staged ``NAME``) and the aspect (the base's own by default);
   refuse an existing output (without ``overwrite``) and a base that cannot be trained
   (HHEM, the decoder judges) before any work.
2. Read the labelled rows (:mod:`unieval_local.training.data`); dev rows from ``dev`` or a seeded
   held-out share; refuse fewer than :data:`~unieval_local.training.data.MIN_PER_CLASS` rows of a
   class; warn of train/dev overlap.
3. Estimate the memory training needs before loading; load the base for training; plan every row's
   queries with the scoring planner (:func:`~unieval_local.pipeline.planning.build_plan`: the same
   prompts, one per sentence for a sentence-level aspect, one per chunk for a chunking checker) and
   count those over ``max_length``.
4. Score the evaluation rows (``test``, else dev) with the base through the ordinary scoring path
   (:func:`~unieval_local.batch.run.run_batch`), train (:func:`~unieval_local.models.train.trainer.fit`),
   save the folder (:func:`~unieval_local.models.train.save.save_evaluator_folder`), score the same
   rows with the trained folder, and report the label figures of both with their paired comparison
   (:func:`~unieval_local.analysis.labels.label_report`).

Under ``torchrun --nproc_per_node N`` / ``accelerate launch`` (the ``RANK`` / ``WORLD_SIZE`` /
``LOCAL_RANK`` environment), transformers' ``Trainer`` trains data-parallel: every rank reads the
same rows and draws the same seeded split and order, takes ``batch_size`` records per step (the
global batch is N x ``batch_size``), and only rank 0 scores before and after, writes the folder and
reports; the other ranks train and return (:func:`distributed_rank`).
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.label_values import plural
from .config import TrainConfig
from .data import (LabelledRows, check_classes, data_fingerprint, held_out_split, overlap, read_labelled)

__all__ = ["TrainingResult", "default_aspect", "distributed_rank", "resolve_base", "train"]

#: The aspect a base is trained on when none is named: the one it scores, where it scores one.
_OWN_ASPECT = {"minicheck-flan-t5-large": "fact/support", "factcg-deberta-large": "fact/factcg",
               "mdeberta-nli": "fact/nli_support", "unieval-fact": "fact/consistency"}


@dataclass(frozen=True)
class TrainingResult:
    """What :func:`train` made: the folder, the report (``training_report.json``'s content) and its table;
    ``report`` None and ``table`` empty on a rank > 0 of a multi-process run (rank 0 writes both)."""

    output: Path
    report: dict[str, Any] | None
    table: str


def distributed_rank() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from the environment torchrun / accelerate launch set
    (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); ``(0, 1, 0)`` in a plain process.

    Raises:
        ValueError: a value that is not an integer, or a rank outside ``[0, WORLD_SIZE)``.
    """
    import os

    try:
        rank, world, local = (int(os.environ.get(k, d)) for k, d in (("RANK", "0"), ("WORLD_SIZE", "1"),
                                                                       ("LOCAL_RANK", "0")))
    except ValueError:
        raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers, got {os.environ.get('RANK')!r} / "
                         f"{os.environ.get('WORLD_SIZE')!r} / {os.environ.get('LOCAL_RANK')!r}") from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK {rank} is not one of WORLD_SIZE {world} processes")
    return rank, world, local


def resolve_base(base: str, offline: bool | None = None):
    """``(evaluator, checkpoint)`` of a ``--base`` value: ``NAME=DIR`` (a folder) or ``NAME`` (staged).

    Raises:
        ValueError: an unknown evaluator name (the built-ins listed), or one that cannot be trained.
        CheckpointNotFoundError / CheckpointError: the folder is missing or does not hold the base.
    """
    from ..errors import CheckpointError, CheckpointNotFoundError
    from ..models.checkpoints import check_identity, resolve_checkpoint
    from ..models.train.readout import refuse_untrainable
    from ..registry.evaluators import get_evaluator

    name, _, folder = base.partition("=")
    evaluator = get_evaluator(name.strip())
    refuse_untrainable(evaluator)
    try:
        checkpoint = resolve_checkpoint(evaluator.name, {evaluator.name: folder} if folder else None, offline=offline)
        check_identity(checkpoint.path, evaluator)
    except (CheckpointNotFoundError, CheckpointError) as exc:  # the scoring commands' --model is train's --base
        if len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (re.sub(r"--model[ =]([^\s),;=]+)(?!=)", lambda m: f"--base {evaluator.name}={m.group(1)}",
                               exc.args[0]),)
        raise
    return evaluator, checkpoint


def default_aspect(evaluator_name: str) -> str:
    """The base's own aspect (``fact/support`` for MiniCheck ...).

    Raises:
        ValueError: the base scores several aspects (UniEval's): name one with --aspect.
    """
    if evaluator_name in _OWN_ASPECT:
        return _OWN_ASPECT[evaluator_name]
    raise ValueError(f"{evaluator_name} scores several aspects: name the one to train with --aspect TASK/ASPECT "
                     "(e.g. summarization/consistency); `unieval-local tasks` lists them")


def _aspect(config: TrainConfig, evaluator):
    from ..registry.user_aspects import registry_with

    registry = registry_with(config.aspects_config)
    task, _, name = (config.aspect or default_aspect(evaluator.name)).rpartition("/")
    if not task:
        raise ValueError(f"--aspect {config.aspect!r}: write TASK/ASPECT, e.g. fact/{name}")
    aspect = registry.get_aspect(task, name)
    if aspect.checkpoint != evaluator.name:
        raise ValueError(f"--aspect {task}/{name} is scored by {aspect.checkpoint}, not by the base {evaluator.name}: "
                         f"train {aspect.checkpoint} for it, or name an aspect of {evaluator.name}")
    if aspect.reduction not in ("mean", "max", "min") or aspect.scale:
        raise ValueError(f"--aspect {task}/{name} is a {'rating' if aspect.scale else 'sum over sentences'}, not a "
                         "probability: training supports aspects whose score lies in [0, 1]")
    return task, aspect


def _rows(config: TrainConfig, log: Callable[[str], None]) -> tuple[LabelledRows, LabelledRows, LabelledRows]:
    """``(train, dev, evaluation)`` rows."""
    fields = dict(label_field=config.label_field, positive_label=config.positive_label,
                  label_threshold=config.label_threshold, target_field=config.target_field,
                  source_field=config.source_field)
    rows = read_labelled([config.data], **fields)
    if config.dev:
        train_rows, dev_rows = rows, read_labelled([config.dev], **fields)
    else:
        keep, held = held_out_split(len(rows.records), rows.labels, config.dev_share, config.seed)
        train_rows, dev_rows = rows.subset(keep), rows.subset(held)
        log(f"dev rows: {len(held)} of {len(rows.records)} held out of {config.data} (seed {config.seed}, share "
            f"{config.dev_share})")
    check_classes(train_rows, "training")
    if len(set(dev_rows.labels.tolist())) < 2:
        raise ValueError("the dev rows hold one class only: the dev figures (and the kept checkpoint) need both")
    shared = overlap(train_rows, dev_rows)
    if shared:
        warnings.warn(f"{plural(shared, 'dev row')} of {len(dev_rows.records)} share target and source with a "
                      "training row: the dev figures overstate what the model learned", UserWarning, stacklevel=3)
    test_rows = read_labelled([config.test], **fields) if config.test else dev_rows
    return train_rows, dev_rows, test_rows


def _items(trainable, aspect, rows: LabelledRows, max_length: int, chunk_words: int | None, what: str,
           log: Callable[[str], None]):
    """The :class:`~unieval_local.models.train.trainer.TrainItem` of each row that plans (the
    others are named and left out), and how many queries were over ``max_length``."""
    from ..models.train.trainer import TrainItem
    from ..pipeline.planning import build_plan
    from ..pipeline.validate import parse_example
    from ..registry.evaluators import format_of
    from ..text.prompts import default_chunk_words
    from ..text.sentences import DEFAULT_SPLITTER

    examples, problems = [], []
    for i, rec in enumerate(rows.records):
        ex, bad = parse_example(i, rec)
        examples.append(ex)
        problems += [f"{rows.where[i]}: {p.field}: {p.message}" for p in bad]
    plan, planned = build_plan(examples, [aspect], DEFAULT_SPLITTER, counter=trainable.counter, max_length=max_length,
                               chunk_words=chunk_words or default_chunk_words(format_of(aspect)))
    problems += [f"{rows.where[p.index]}: {p.field}: {p.message}" for p in planned]
    ids = trainable.encode(plan.prompts, max_length) if plan.prompts else []
    full = trainable.counter.count(plan.prompts) if plan.prompts else []
    over = sum(n > max_length for n in full)
    items, kept = [], []
    for i, block in enumerate(plan.blocks[aspect.name]):
        if block is None:
            continue
        order = block.indices
        local = {k: j for j, k in enumerate(order)}
        grid = tuple(tuple(tuple(local[k] for k in cell) for cell in row) for row in block.grid)
        items.append(TrainItem(tuple(tuple(ids[k]) for k in order), grid, int(rows.labels[i])))
        kept.append(i)
    if problems:
        warnings.warn(f"{plural(len(problems), what + ' row')} left out: " + "; ".join(problems[:5])
                      + (" ..." if len(problems) > 5 else ""), UserWarning, stacklevel=3)
    if over:
        log(f"{what}: {over} of {len(full)} queries were longer than max_length ({max_length} tokens) and are cut "
            "at the end, as scoring cuts them (docs/long-inputs.md)")
    return items, kept, over


def _score(folder: Path, evaluator, task: str, aspect, rows: LabelledRows, kept: list[int], where: Path,
           config: TrainConfig, progress: bool) -> np.ndarray:
    """Scores of the rows ``kept`` with the checkpoint ``folder`` through the ordinary scoring path."""
    from ..batch.run import run_batch
    from ..records import write_jsonl

    where.parent.mkdir(parents=True, exist_ok=True)
    staged = where.with_suffix(".input.jsonl")
    write_jsonl(staged, [rows.records[i] for i in kept])
    settings = {"model": {evaluator.name: str(folder)}, "aspects_config": config.aspects_config,
                "device": config.device, "dtype": config.dtype, "max_length": config.max_length,
                "progress": progress}
    if where.exists():
        where.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        run_batch(staged, where, task=task, aspects=[aspect.name], settings=settings, progress=progress)
    out = np.full(len(kept), np.nan)
    for line in where.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        value = (rec.get("scores") or {}).get(aspect.name)
        if value is not None:
            out[rec["index"]] = value
    return out


def _versions() -> dict[str, str]:
    """The scoring libraries' versions (:func:`~unieval_local.config.library_versions`, as signatures
    record them), the package's, and the trainer's own (accelerate, peft) where installed."""
    from importlib.metadata import PackageNotFoundError, version

    from .._version import __version__
    from ..config import library_versions

    out = {"unieval-local": __version__, **library_versions()}
    for name in ("accelerate", "peft"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def train(config: TrainConfig, *, progress: bool = True, log: Callable[[str], None] | None = None) -> TrainingResult:
    """Fine-tune ``config.base`` on ``config.data`` and write the evaluator folder ``config.output``.

    Returns:
        :class:`TrainingResult`; ``OUTPUT/training_report.json`` (and ``.html`` with the html extra)
        holds the before/after figures.

    Raises:
        FileExistsError: the output exists (without ``overwrite``).
        ValueError: a bad setting, an aspect the base does not score, too few rows of a class, a base
            that cannot be trained. InputFileError: unreadable data (row and field named).
        CheckpointNotFoundError / CheckpointError: the base is not staged or does not load, or
            training would not fit in memory.
        MissingExtraError: the ``train`` extra (accelerate) is not installed.
    """
    from ..extras import require
    from ..models.train.readout import check_training_memory, load_trainable
    from ..models.train.save import save_evaluator_folder
    from ..models.train.trainer import TrainSettings, fit
    from .report import before_after

    rank, world, local_rank = distributed_rank()
    log = log or (lambda line: print(f"unieval-local: {line}", file=sys.stderr))
    if rank > 0:
        log = lambda line: None  # noqa: E731  (rank 0 logs)
    out = Path(config.output)
    if out.exists() and not config.overwrite:
        raise FileExistsError(f"{out} exists: choose another output folder or pass --overwrite")
    require("train")
    evaluator, checkpoint = resolve_base(config.base)
    config = config.for_backend(evaluator.backend)
    task, aspect = _aspect(config, evaluator)
    train_rows, dev_rows, test_rows = _rows(config, log)
    from ..models.devices import resolve_device
    from ..models.checkpoints import fingerprint_checkpoint

    device = resolve_device(config.device)
    if world > 1 and device == "cuda":
        device = f"cuda:{local_rank}"  # one GPU per process
    need = check_training_memory(checkpoint.path, config.optimizer, device)
    size = f"{need / 2**30:.1f} GiB" if need >= 2**30 else f"{need / 2**20:.0f} MiB"
    log(f"base {evaluator.name} ({checkpoint.path}), aspect {task}/{aspect.name}: about {size} to train on {device} "
        f"with {config.optimizer}")
    base_fp = fingerprint_checkpoint(checkpoint.path)
    trainable = load_trainable(checkpoint, evaluator, device=device, dtype="float32")
    max_length = config.max_length or evaluator.max_length
    train_items, _, train_over = _items(trainable, aspect, train_rows, max_length, None, "training", log)
    dev_items, _, _ = _items(trainable, aspect, dev_rows, max_length, None, "dev", log)
    _, test_kept, _ = _items(trainable, aspect, test_rows, max_length, None, "test", log)
    work = out.parent / f"{out.name}.work"
    eval_dir = work / "evaluation"
    if world > 1:
        log(f"{world} processes: {config.batch_size} records per process and step, {world * config.batch_size} "
            "in all")
    before = None if rank else _score(checkpoint.path, evaluator, task, aspect, test_rows, test_kept, eval_dir / "base.scores.jsonl",
                    config, progress)
    settings = TrainSettings(
        work_dir=str(work / "checkpoints"), seed=config.seed, epochs=config.epochs, max_steps=config.max_steps,
        batch_size=config.batch_size, learning_rate=config.learning_rate, optimizer=config.optimizer,
        schedule=config.schedule, warmup_ratio=config.warmup_ratio, eval_steps=config.eval_steps,
        save_steps=config.eval_steps, early_stopping=config.early_stopping, best_metric=config.best_metric,
        unit_reduction=aspect.reduction, window_reduction=aspect.window_reduction, device=device,
        bf16=config.dtype == "bfloat16", progress=progress, resume=config.resume, dropout=config.dropout,
        shuffle=config.shuffle)
    def on_log(entry: dict[str, Any]) -> None:
        if "eval_loss" in entry:
            log(f"step {entry['step']}: dev loss {entry['eval_loss']:.4f}, balanced accuracy "
                f"{entry.get('eval_balanced_accuracy', float('nan')):.4f}, ROC AUC {entry.get('eval_roc_auc', float('nan')):.4f}")
        elif "loss" in entry and not progress:
            log(f"step {entry['step']}: loss {entry['loss']:.4f}")

    from ..registry.user_aspects import registry_with
    from .replay import replay_items

    replayed, replay_summary = replay_items(trainable, registry_with(config.aspects_config), task, aspect,
                                            evaluator.name, train_rows, len(train_items), config.replay, config.seed,
                                            max_length, settings, _items, log)
    lora = None
    if config.lora:
        from ..models.train.lora import apply_lora

        lora = apply_lora(trainable, rank=config.lora_rank, alpha=config.lora_alpha, dropout=config.lora_dropout,
                          targets=config.lora_targets)
        log(f"LoRA adapters on {', '.join(lora.targets)}: {lora.trainable:,} of {lora.total:,} parameters train")
    if config.resume:
        from ..models.train.trainer import last_checkpoint

        last = last_checkpoint(settings.work_dir)
        log(f"resuming from {last}" if last else f"--resume: no checkpoint in {settings.work_dir} yet: starting anew")
    fitted = fit(trainable, train_items + replayed, dev_items, settings, on_log=on_log)
    if lora is not None:
        from ..models.train.lora import merge_lora

        merge_lora(trainable)
    if rank > 0:
        return TrainingResult(out, None, "")
    training = {"fine_tuned_from": {"evaluator": evaluator.name, "fingerprint": base_fp, "folder": str(checkpoint.path)},
                "aspect": f"{task}/{aspect.name}", "data_sha256": data_fingerprint(train_rows),
                "dev_sha256": data_fingerprint(dev_rows), "rows": {"train": len(train_items), "dev": len(dev_items)},
                "config": config.as_dict(), "seed": config.seed, "steps": fitted.steps, "best_step": fitted.best_step,
                "versions": _versions(), "replay": replay_summary,
                "lora": None if lora is None else {"rank": config.lora_rank, "alpha": config.lora_alpha,
                                                    "targets": list(lora.targets), "trainable_parameters": lora.trainable,
                                                    "parameters": lora.total}}
    save_evaluator_folder(trainable.module, checkpoint.path, out, evaluator=evaluator.name, training=training,
                          overwrite=config.overwrite)
    after = _score(out, evaluator, task, aspect, test_rows, test_kept, eval_dir / "trained.scores.jsonl", config,
                   progress)
    forgetting = None
    if config.forgetting:
        from .forgetting import measure_forgetting

        forgetting = measure_forgetting(config, evaluator.name, task, aspect, checkpoint.path, out, eval_dir, progress)
    report, table = before_after(before, after, test_rows.labels[test_kept], config=config, evaluator=evaluator.name,
                                 aspect=f"{task}/{aspect.name}", fitted=fitted, training=training,
                                 rows_over=train_over, evaluated_on="test" if config.test else "dev",
                                 out=out, forgetting=forgetting)
    return TrainingResult(out, report, table)

