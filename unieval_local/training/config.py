"""The training configuration: every key, its default and help, declared once.

``unieval-local train`` reads a YAML file (``--config FILE``) of these keys and takes each key as a
flag too (``learning_rate`` is ``--learning-rate``; a flag overrides the file); Python passes a
:class:`TrainConfig`. Defaults follow the base's family where the literature differs: T5 bases
train with Adafactor at a constant rate (Raffel et al., 2020, section 3.1.2; UniEval's
``train_seq2seq.py`` fine-tunes T5 so), DeBERTa bases with AdamW and a linear decay
(He et al., 2021), the decay following ``max_steps`` when it is given.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

__all__ = ["FAMILY_DEFAULTS", "TrainConfig", "load_config"]

#: Defaults by the base's backend: optimizer, learning rate, schedule.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "t5": {"optimizer": "adafactor", "learning_rate": 1e-4, "schedule": "constant"},
    "seq-classifier": {"optimizer": "adamw", "learning_rate": 2e-5, "schedule": "linear"},
}


def _key(default: Any, help: str, *, flag_type: Any = None, choices: tuple | None = None) -> Any:
    meta = {"help": help, "type": flag_type, "choices": choices}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TrainConfig:
    """How ``unieval-local train`` runs (each field is a YAML key and a flag; its help is here).

    ``data`` and ``base`` are required; ``aspect`` is required where the base scores several
    (UniEval's); every other key has a default. Unknown YAML keys are refused with a did-you-mean.
    """

    data: str = _key(None, "labelled records to train on (.jsonl, .json, .csv, .tsv, .parquet)")
    base: str = _key(None, "the evaluator to start from: NAME=DIR (a folder) or NAME (staged in "
                           "$UNIEVAL_LOCAL_HOME / the HF cache): minicheck-flan-t5-large, factcg-deberta-large, "
                           "mdeberta-nli, unieval-sum, unieval-dialog, unieval-fact")
    output: str = _key(None, "the folder to write the trained evaluator to (refused when it exists, unless "
                             "--overwrite)")
    aspect: str | None = _key(None, "TASK/ASPECT to train (default: the base's own when it scores one, e.g. "
                                    "fact/support for minicheck); a user aspect of --aspects-config too")
    aspects_config: str | None = _key(None, "YAML file of user-defined aspects (their own question)")
    dev: str | None = _key(None, "dev records (else a seeded held-out share of DATA: --dev-share)")
    test: str | None = _key(None, "test records for the before/after figures (default: the dev rows)")
    dev_share: float = _key(0.1, "share of DATA held out as dev rows when no --dev is given", flag_type=float)
    label_field: str = _key("label", "the label's field")
    positive_label: str | None = _key(None, "the label value that means 'holds/supported' (others are 0); "
                                            "default: labels must be 1/0/true/false")
    label_threshold: float | None = _key(None, "read the label field as a human score: score >= T is 1",
                                         flag_type=float)
    target_field: str | None = _key(None, "the target's field (default: target, else claim, system_output, "
                                          "summary, hypothesis)")
    source_field: str | None = _key(None, "the source's field (default: source, else doc, document, premise)")
    seed: int = _key(0, "seed of the split, the data order, dropout and initialisation", flag_type=int)
    epochs: float = _key(3.0, "passes over the training rows (ignored with --max-steps)", flag_type=float)
    max_steps: int | None = _key(None, "optimizer steps in all (the schedule follows it)", flag_type=int)
    batch_size: int = _key(16, "records per step", flag_type=int)
    learning_rate: float | None = _key(None, "peak learning rate (default: 1e-4 for T5 with Adafactor, 2e-5 "
                                             "for DeBERTa with AdamW)", flag_type=float)
    optimizer: str | None = _key(None, "adafactor (T5's default) or adamw (DeBERTa's default)",
                                 choices=("adafactor", "adamw"))
    schedule: str | None = _key(None, "learning-rate schedule: constant (T5's default), linear (DeBERTa's), "
                                      "cosine", choices=("constant", "linear", "cosine"))
    warmup_ratio: float = _key(0.0, "share of the steps warming the rate up", flag_type=float)
    eval_steps: int = _key(50, "steps between dev evaluations (and checkpoints)", flag_type=int)
    early_stopping: int | None = _key(None, "stop after PATIENCE dev evaluations without a better figure (off by "
                                            "default; the best dev checkpoint is kept either way)", flag_type=int)
    best_metric: str = _key("loss", "the dev figure that picks the kept checkpoint: loss (the default: smooth, "
                                    "where balanced accuracy at 0.5 ties across steps and keeps the earliest), "
                                    "roc_auc or balanced_accuracy", choices=("loss", "roc_auc", "balanced_accuracy"))
    dropout: float | None = _key(None, "dropout rate while training (default: the base's own)", flag_type=float)
    shuffle: bool = _key(True, "shuffle the training rows each epoch (seeded); --no-shuffle: one fixed order, the "
                               "file's")
    max_length: int | None = _key(None, "tokens per query (default: the evaluator's own, as scoring)",
                                  flag_type=int)
    device: str | None = _key(None, "cpu, cuda or cuda:N (default: cuda when available)")
    dtype: str = _key("float32", "float32, or bfloat16 autocast (fast on GPUs and on CPUs with bfloat16 matrix "
                                 "units)", choices=("float32", "bfloat16"))
    resume: bool = _key(False, "continue an interrupted run from its last checkpoint (OUTPUT.work/)")
    overwrite: bool = _key(False, "replace an existing output folder (after the new one is complete)")
    replay: float = _key(0.2, "share of the training items that replay the base's other aspects with its own "
                              "scores (UniEval's 0.2; 0: off; a no-op for a single-aspect base)", flag_type=float)
    forgetting: str | None = _key(None, "rated records (human scores) to report the base's other aspects on, "
                                        "before and after (default: forgetting not measured)")
    forgetting_field: str | None = _key(None, "ASPECT=FIELD[,ASPECT=FIELD]: the human score fields of --forgetting "
                                              "(default: human.ASPECT, as scripts/convert_summeval.py writes)")
    lora: bool = _key(False, "train LoRA adapters (peft) instead of every weight; merged into a plain folder on save")
    lora_rank: int = _key(8, "the adapters' rank r (with --lora)", flag_type=int)
    lora_alpha: float = _key(16.0, "the adapters' scale alpha (the update is scaled by alpha / r)", flag_type=float)
    lora_dropout: float = _key(0.05, "dropout on the adapters' input", flag_type=float)
    lora_targets: str = _key("qv", "layers adapted: qv (T5 q,v; DeBERTa query_proj,value_proj) or all (k and o too)",
                             choices=("qv", "all"))
    bootstrap: int = _key(1000, "bootstrap resamples of the before/after intervals (0: none)", flag_type=int)

    def __post_init__(self) -> None:
        for name in ("data", "base", "output"):
            if not getattr(self, name):
                raise ValueError(f"{name} is required")
        for name in ("batch_size", "eval_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.epochs <= 0:
            raise ValueError(f"epochs must be > 0, got {self.epochs}")
        if self.learning_rate is not None and not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.early_stopping is not None and self.early_stopping < 1:
            raise ValueError(f"early_stopping (patience) must be at least 1, got {self.early_stopping}")
        if not 0 <= self.replay < 1:
            raise ValueError(f"replay must lie in [0, 1), got {self.replay}")
        if self.lora_rank < 1:
            raise ValueError(f"lora_rank must be at least 1, got {self.lora_rank}")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must lie in [0, 1), got {self.lora_dropout}")
        if self.label_threshold is not None and self.positive_label is not None:
            raise ValueError("give positive_label (labels as values) or label_threshold (labels as human scores), "
                             "not both")

    def for_backend(self, backend: str) -> "TrainConfig":
        """This config with the family defaults of ``backend`` filled where unset."""
        defaults = FAMILY_DEFAULTS[backend]
        return replace(self, **{k: v for k, v in defaults.items() if getattr(self, k) is None})

    def as_dict(self) -> dict[str, Any]:
        """Every key and its value (recorded in the trained folder's config and the report)."""
        return asdict(self)

    @classmethod
    def keys(cls) -> list[str]:
        """The key names, in declaration order."""
        return [f.name for f in fields(cls)]

    @classmethod
    def help_of(cls, name: str) -> dict[str, Any]:
        """``{help, type, choices, default}`` of key ``name`` (the CLI builds its flag from it)."""
        f = next(f for f in fields(cls) if f.name == name)
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        return {**f.metadata, "default": default}


def load_config(path: str | os.PathLike | None, overrides: dict[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from a YAML file's keys (dashes or underscores), with ``overrides``
    (the flags given, None values dropped) on top.

    Raises:
        ValueError: an unreadable file, a file that is not a mapping, an unknown key (did-you-mean),
            a missing required key, or a bad value (named).
    """
    import yaml

    values: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"--config {path}: {exc}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ValueError(f"--config {path}: expected a mapping of keys, got {type(loaded).__name__}")
        known = TrainConfig.keys()
        for key, value in loaded.items():
            name = str(key).replace("-", "_")
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                raise ValueError(f"--config {path}: unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close
                                                                            else f"; the keys are {', '.join(known)}"))
            values[name] = value
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return TrainConfig(**values)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
