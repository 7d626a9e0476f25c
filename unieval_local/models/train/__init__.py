"""Fine-tuning the trainable backends (T5 Boolean-QA, DeBERTa classifiers): the torch side of
``unieval-local train`` (:mod:`unieval_local.training` builds the data and the report).

* :mod:`.readout`: a base loaded for training, read as scoring reads it (log P of the score).
* :mod:`.trainer`: transformers' ``Trainer`` with the loss on that readout, folded per record.
* :mod:`.save`: the trained weights as an evaluator folder in the base's layout, with a manifest.

Imported only by the ``train`` command (torch and transformers load lazily).
"""

from __future__ import annotations

__all__ = ["readout", "save", "trainer"]
