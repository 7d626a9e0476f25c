"""LoRA adapters for ``train --lora`` (Hu et al., 2022, "LoRA: Low-Rank Adaptation of Large Language
Models", section 4): the base's weights frozen, a low-rank update ``B A`` (rank ``r``, scaled by
``alpha / r``) trained beside chosen linear layers, through ``peft``. On save the adapters are
merged into the weights (``merge_and_unload``): the folder is a plain one in the base's layout,
scored without ``peft``.

Target modules per family (the paper's choice, section 7.1: the attention's query and value
projections): T5 ``q``, ``v`` (``k``, ``o`` with ``lora_targets: all``); DeBERTa ``query_proj``,
``value_proj`` (``key_proj``, ``attention.output.dense`` with ``all``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .readout import TrainableModel

__all__ = ["LORA_TARGETS", "LoraInfo", "apply_lora", "merge_lora", "trainable_parameters"]

#: The linear layers adapted, by backend: ``qv`` (the default) and ``all``.
LORA_TARGETS = {"t5": {"qv": ["q", "v"], "all": ["q", "k", "v", "o"]},
                "seq-classifier": {"qv": ["query_proj", "value_proj"],
                                   "all": ["query_proj", "key_proj", "value_proj", "attention.output.dense"]}}


@dataclass(frozen=True)
class LoraInfo:
    """What :func:`apply_lora` did: the targets, and the trainable and total parameter counts."""

    targets: tuple[str, ...]
    trainable: int
    total: int


def trainable_parameters(module) -> int:
    """How many parameters of ``module`` require gradients."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def apply_lora(trainable: TrainableModel, *, rank: int = 8, alpha: float = 16.0, dropout: float = 0.05,
               targets: str = "qv") -> LoraInfo:
    """Wrap ``trainable.module`` in place with LoRA adapters (module docstring); only the adapters
    train (a classifier's head stays trainable too: it is task-specific, ``modules_to_save``).

    Raises:
        ValueError: a rank below 1, a bad ``targets``. MissingExtraError: ``peft`` is not installed.
    """
    from ...extras import require

    require("train")
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:  # pragma: no cover - the train extra carries it
        from ...errors import MissingExtraError

        raise MissingExtraError("--lora needs peft: pip install 'unieval-local[train]'") from None
    if rank < 1:
        raise ValueError(f"lora_rank must be at least 1, got {rank}")
    if targets not in LORA_TARGETS[trainable.backend]:
        raise ValueError(f"lora_targets must be qv or all, got {targets!r}")
    names = LORA_TARGETS[trainable.backend][targets]
    save = ["classifier", "pooler"] if trainable.backend == "seq-classifier" else None
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=names,
                        modules_to_save=save, bias="none")
    total = sum(p.numel() for p in trainable.module.parameters())
    trainable.module = get_peft_model(trainable.module, config)
    return LoraInfo(tuple(names), trainable_parameters(trainable.module), total)


def merge_lora(trainable: TrainableModel) -> None:
    """Merge the adapters into the weights and drop ``peft``'s wrapping (``merge_and_unload``):
    ``trainable.module`` is the base's plain model class again, its tensors under the base's names."""
    trainable.module = trainable.module.merge_and_unload()
