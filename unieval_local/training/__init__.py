"""Fine-tuning an evaluator on your labels (``unieval-local train``): the data, the run and the
before/after report. The torch side (loss on the scoring readout, transformers' Trainer, saving
the folder) is :mod:`unieval_local.models.train`; inputs come from the scoring planner and prompt
formats, figures from :mod:`unieval_local.analysis.labels`. Never imported by the engine, the
requests, the service or the reports (ARCHITECTURE)."""

from __future__ import annotations

from .config import TrainConfig, load_config
from .run import TrainingResult, train

__all__ = ["TrainConfig", "TrainingResult", "load_config", "train"]
