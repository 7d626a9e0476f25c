"""HHEM-2.1-Open (Vectara, Apache-2.0), natively: no remote code is run.

What its published ``modeling_hhem_v2.py`` does, read and reimplemented here: the checkpoint
is a ``T5ForTokenClassification`` (a T5 encoder, dropout, a linear head to 2 labels) built from
the config of its *foundation* (``google/flan-t5-base``, named in its ``config.json``) and
stored under the prefix ``t5.``; a (premise, hypothesis) pair is put in its prompt
(``<pad> Determine if the hypothesis is true given the premise?\\n\\nPremise: {premise}\\n\\n
Hypothesis: {hypothesis}``, :class:`~unieval_local.text.prompts.HHEMPrompt`), tokenized with the
foundation's tokenizer, and the score is ``softmax(logits[:, 0, :])[:, 1]``: the probability of
label 1 (consistent) at the first position (the literal ``<pad>``). Its published config names no
labels; one that does must name ``consistent`` at index 1 (the registry's ``label_index``), or the
checkpoint is refused.

Loading is strict: every stored tensor must fill the model and every model tensor must be
stored, except the encoder's ``embed_tokens``, which is ``shared`` (tied) when not stored on
its own. The foundation (its ``config.json`` and tokenizer) is found offline: a folder named
like it (``flan-t5-base``) beside the HHEM folder or in ``$UNIEVAL_LOCAL_HOME``, the HHEM
folder itself when it holds ``foundation_config.json`` and a tokenizer, else the Hugging Face
cache, or the hub when online.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from ...errors import CheckpointError, CheckpointNotFoundError
from ...registry.evaluators import Evaluator
from ...settings import BATCH_TOKENS, check_dtype
from .. import tokens
from ..batching import first_line
from ..checkpoints import ResolvedCheckpoint
from ..classifier.runner import (ClassifierModel, ClassifierRunner, readout_label, report_tokenizer,
                                 shared_classifier_runner)
from ..manifest import check_recorded_files
from ..tokenizer_identity import check_tokenizer_fits, describe_tokenizer
from ..stored import explain_tokenizer_failure

__all__ = ["HHEMModel", "foundation_folder", "foundation_of", "hhem_runner_factory", "verify_hhem"]

#: The prefix of HHEM's stored tensors (its wrapper's ``self.t5``).
PREFIX = "t5."


def foundation_folder(folder: Path, config: dict[str, Any], evaluator: Evaluator) -> Path:
    """The folder of the foundation's config and tokenizer (module docstring).

    Raises:
        CheckpointNotFoundError: none found (the message says where to stage it).
    """
    if (folder / "tokenizer.json").is_file() or (folder / "spiece.model").is_file():
        if (folder / "foundation_config.json").is_file():
            return folder
    name = evaluator.tokenizer_from or str(config.get("foundation") or "google/flan-t5-base")
    short = name.split("/")[-1]
    import os

    from ..checkpoints import HOME_ENV, resolve_checkpoint

    for place in (folder.parent / short, Path(os.environ.get(HOME_ENV) or folder.parent) / short):
        if (place / "config.json").is_file():
            return place
    try:
        return Path(resolve_checkpoint(name).path)
    except CheckpointNotFoundError as exc:
        raise CheckpointNotFoundError(
            f"{folder}: HHEM reads its tokenizer and T5 config from its foundation {name}, not found beside it "
            f"({folder.parent / short}), in ${HOME_ENV}/{short} nor elsewhere: {exc}") from None


def foundation_of(folder: str | Path, evaluator: Evaluator) -> Path:
    """The foundation folder of the HHEM checkpoint ``folder`` (:func:`foundation_folder`, its config read here)."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return foundation_folder(folder, config, evaluator)


class HHEMModel:
    """A loaded HHEM checkpoint with the interface :class:`~unieval_local.models.classifier.runner.ClassifierRunner`
    batches over (``encode``, ``logits``, ``label_of``, ``tokenizer``, ``lock``, ``oom_budget``).

    Raises:
        CheckpointError: no weights, a tensor missing or unexpected (the head included), a
            foundation whose files differ from their record or whose tokenizer does not fit the
            embeddings, labels in its config that contradict the evaluator (class 1 not
            ``consistent``).
        CheckpointNotFoundError: the foundation is not found.
    """

    def __init__(self, checkpoint: ResolvedCheckpoint, evaluator: Evaluator, device: str, dtype: str):
        import torch
        from transformers import AutoTokenizer, T5Config, T5ForTokenClassification

        from ..t5.loading import iter_stored_tensors

        self.path = path = Path(checkpoint.path)
        self.dtype = check_dtype(dtype)
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        base = foundation_folder(path, config, evaluator)
        base_config = base / ("foundation_config.json" if (base / "foundation_config.json").is_file() else "config.json")
        t5_config = T5Config(**{k: v for k, v in json.loads(base_config.read_text()).items()
                                if k not in ("architectures", "model_type", "transformers_version")})
        t5_config.num_labels = 2
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise CheckpointError(f"{base}: the foundation's tokenizer does not load: "
                                  f"{explain_tokenizer_failure(base, exc)}") from None
        model = T5ForTokenClassification(t5_config)
        state = {k[len(PREFIX):]: v for k, v in iter_stored_tensors(path) if k.startswith(PREFIX)}
        if not state:
            raise CheckpointError(f"{path}: no tensor under {PREFIX!r}: not an HHEM-2.1 checkpoint")
        if "transformer.encoder.embed_tokens.weight" not in state and "transformer.shared.weight" in state:
            state["transformer.encoder.embed_tokens.weight"] = state["transformer.shared.weight"]  # tied, as stored
        if "transformer.shared.weight" not in state and "transformer.encoder.embed_tokens.weight" in state:
            state["transformer.shared.weight"] = state["transformer.encoder.embed_tokens.weight"]
        expected = set(model.state_dict())
        missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
        if missing or unexpected:
            head = " (the classification head is missing)" if any(k.startswith("classifier") for k in missing) else ""
            raise CheckpointError(f"{path}: its weights do not match an HHEM-2.1 model of its foundation's config "
                                  f"(strict loading): missing {missing[:5]}, unexpected {unexpected[:5]}{head}")
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise CheckpointError(f"{path}: {first_line(exc)}") from None
        # the foundation's files against its record, its tokenizer against the weights' rows
        check_recorded_files(base)
        #: the tokenizer's class and flags (signatures), and a doubt about it (None: none)
        self.tokenizer_class = describe_tokenizer(self.tokenizer)
        self.tokenizer_doubt = check_tokenizer_fits(self.tokenizer, t5_config,
                                                    rows=int(model.get_input_embeddings().weight.shape[0]),
                                                    where=str(base))
        #: HHEM's readout: label 1 where its config names no labels (the published one names none)
        self.id2label = config.get("id2label") if isinstance(config.get("id2label"), dict) else None
        self.label = readout_label(self.id2label, evaluator, str(path / "config.json"), 2)
        self.model = model.to(device=device, dtype=getattr(torch, self.dtype)).eval()
        self.tokenizer.model_max_length = int(1e12)  # we count and truncate ourselves: no length warning
        self.device = device
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.lock = threading.Lock()
        self.oom_budget: int | None = None

    #: P(label) of a padded batch: the classifier backend's (softmax over the logits, float64)
    probabilities = ClassifierModel.probabilities

    def label_of(self, evaluator: Evaluator) -> int:
        """The output read for ``evaluator``: its config's ``id2label`` index of ``consistent``, or,
        where the config names no labels (the published one), the registry's ``label_index``, 1
        (HHEM's ``transformed_probs[:, 1]``). CheckpointError when the labels contradict it
        (:func:`~unieval_local.models.classifier.runner.readout_label`)."""
        return readout_label(self.id2label, evaluator, str(self.path / "config.json"), 2)

    def encode(self, prompts, max_length: int | None = None) -> list[list[int]]:
        """Token ids of each prompt (ending with EOS): untruncated, or, over ``max_length``, the
        premise's end cut so that the hypothesis (``\n\nHypothesis: ...`` and EOS) is kept whole
        (right truncation would drop the claim: the score would be of the source alone)."""
        from ...text.prompts import HHEM

        if not prompts:
            return []
        ids = tokens.encode(self.tokenizer, list(prompts))["input_ids"]
        if max_length is None:
            return ids
        out = []
        for prompt, x in zip(prompts, ids):
            if len(x) <= max_length:
                out.append(x)
                continue
            tail = prompt[prompt.rfind(HHEM.middle):]
            tail_ids = tokens.encode(self.tokenizer, tail)["input_ids"]
            keep = max(1, max_length - len(tail_ids))
            out.append((x[:keep] + tail_ids)[:max_length])
        return out

    def logits(self, input_ids, mask):
        """(B, 2) logits at the first position."""
        return self.model(input_ids=input_ids, attention_mask=mask).logits[:, 0, :]


def hhem_runner_factory(checkpoint: ResolvedCheckpoint, fingerprint: str, evaluator: Evaluator, *, device: str,
                        dtype: str, batch_tokens: int = BATCH_TOKENS["gpu"], **_: object) -> ClassifierRunner:
    """The ``hhem`` backend's runner factory: the shared classifier runner over an :class:`HHEMModel`
    (one per folder, device and dtype per process).

    Raises:
        CheckpointError, CheckpointNotFoundError: see :class:`HHEMModel`.
    """
    return shared_classifier_runner(HHEMModel, checkpoint, fingerprint, evaluator, device=device, dtype=dtype,
                                    batch_tokens=batch_tokens)


def verify_hhem(report, folder, spec):
    """``unieval-local verify`` for the ``hhem`` backend: its foundation found, then the strict native
    load (every tensor, the head). ``report``: the :class:`~unieval_local.models.verify.VerifyReport`
    to add to; returned."""
    try:
        model = HHEMModel(ResolvedCheckpoint(spec.name, Path(folder), "local"), spec, "cpu", "float32")
    except (CheckpointError, CheckpointNotFoundError) as exc:
        report.fail(str(exc))
        return report
    report.info(f"tokenizer and T5 config from its foundation ({type(model.tokenizer).__name__})")
    report_tokenizer(report, model)
    report.info(f"reads output {model.label} ({spec.label}) of the head"
                + (f" (config.json id2label {model.id2label})" if model.id2label else
                   " (config.json names no labels: the registry's label_index)"))
    report.info("model loads strictly: every weight matches the foundation's config, the classification head included")
    return report
