"""The ``seq-classifier`` backend: an encoder with a classification head
(``AutoModelForSequenceClassification``, e.g. mDeBERTa-v3 NLI) scoring (premise, hypothesis)
pairs; the score of a pair is the softmax probability of the evaluator's label
(``entailment``) over the head's labels, read from ``config.json``'s ``id2label``.

Loading is strict: a folder whose weights miss the classification head (or any tensor), whose
labels lack the evaluator's, or whose tokenizer does not load is refused with
:class:`~unieval_local.errors.CheckpointError` naming it. Batching is the shared core's
(:mod:`unieval_local.models.batching`: length sort, padded-token budget, out-of-memory back-off).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...errors import CheckpointError
from ...registry.evaluators import Evaluator
from ...settings import BATCH_TOKENS, check_dtype
from ...text.prompts import PAIR_SEPARATOR, NLIPair, split_pair
from .. import tokens
from ..base import Runner
from ..batching import first_line, run_batches, sort_by_length
from ..checkpoints import ResolvedCheckpoint
from ..stored import dtype_kwarg, explain_tokenizer_failure, reconcile
from ..strict_loading import load_strictly
from ..tokenizer_identity import check_tokenizer_fits, describe_tokenizer
from .specials import check_special_layout

__all__ = ["ClassifierModel", "ClassifierRunner", "GENERIC_LABEL", "TextClassifierModel", "classifier_runner_factory",
           "model_class_of", "readout_label", "report_tokenizer", "shared_classifier_runner", "verify_classifier"]


#: transformers' default label names (``LABEL_0``, ``LABEL_1``, ...): a config that names none.
GENERIC_LABEL = re.compile(r"^LABEL_\d+$")


def readout_label(id2label: dict | None, evaluator: Evaluator, where: str, n_labels: int | None = None) -> int:
    """The output index whose probability is ``evaluator``'s score, from a config's ``id2label``.

    Named labels (mDeBERTa's ``entailment``/``neutral``/``contradiction``): the index of
    ``evaluator.label`` (case-insensitive), which must equal ``evaluator.label_index`` when the
    registry declares one. Generic labels (``LABEL_0``...; transformers' default when a config
    names none, as HHEM-2.1-Open's) or none: ``evaluator.label_index`` (HHEM's 1).

    Args:
        id2label: the config's ``id2label`` (keys int or str), or None.
        evaluator: its ``label`` and ``label_index``.
        where: the folder, for messages.
        n_labels: the head's outputs (default: ``len(id2label)``).

    Raises:
        CheckpointError: named labels that lack ``evaluator.label`` (or hold it twice), or name it
            at another index than the registry's (e.g. HHEM's class 1 named ``hallucinated``);
            generic labels for an evaluator that declares no index, or an index outside the head.
            The message lists the labels.
    """
    labels = {int(k): str(v) for k, v in (id2label or {}).items()}
    shown = dict(sorted(labels.items()))
    n_labels = n_labels if n_labels is not None else len(labels)
    label, declared = evaluator.label or "entailment", evaluator.label_index
    if not labels or all(GENERIC_LABEL.match(v) for v in labels.values()):
        if declared is None:
            raise CheckpointError(f"{where}: its labels {shown or '(none)'} name no class, and {evaluator.name} reads "
                                  f"P({label}) by name; give the checkpoint's own config.json (its id2label names "
                                  f"{label!r})")
        if not 0 <= declared < max(n_labels, 1):
            raise CheckpointError(f"{where}: {evaluator.name} reads output {declared} ({label}), but the head has "
                                  f"{n_labels} outputs (labels {shown})")
        return declared
    found = [i for i, name in labels.items() if name.lower() == label.lower()]
    if len(found) != 1:
        raise CheckpointError(f"{where}: its labels {shown} do not include {label!r} once; {evaluator.name} reads "
                              f"P({label}): the config's labels contradict the evaluator (is it this evaluator's "
                              "checkpoint?)")
    if declared is not None and found[0] != declared:
        raise CheckpointError(f"{where}: its labels {shown} name {label!r} as output {found[0]}, but {evaluator.name} "
                              f"reads output {declared} ({label}): the config contradicts the evaluator")
    return found[0]


def _missing_head(missing: list[str]) -> str:
    """The hint of a strict-loading refusal whose missing tensors include the classification head."""
    return (" (the classification head is missing: not a fine-tuned classifier?)"
            if any("classifier" in k for k in missing) else "")


class ClassifierModel:
    """A loaded classifier checkpoint: tokenizer, model on its device, the label's index.

    Args:
        checkpoint: the resolved folder. evaluator: its spec (``label``). device, dtype: where and how.

    Raises:
        CheckpointError: the tokenizer or the model does not load, a tensor (the head) is
            missing or unexpected, the tokenizer does not fit the model
            (:func:`~unieval_local.models.tokenizer_identity.check_tokenizer_fits`), a DeBERTa
            tokenizer adds [CLS]/[SEP] otherwise than its stored files say even after correction
            (:func:`~unieval_local.models.classifier.specials.check_special_layout`), or the labels
            contradict the evaluator's (:func:`readout_label`).
    """

    def __init__(self, checkpoint: ResolvedCheckpoint, evaluator: Evaluator, device: str, dtype: str):
        import torch
        import transformers
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = self.path = Path(checkpoint.path)
        self.dtype = check_dtype(dtype)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # noqa: BLE001  named below
            raise CheckpointError(f"{path}: its tokenizer does not load: {explain_tokenizer_failure(path, exc)}") from None
        model = load_strictly(AutoModelForSequenceClassification, path, "a sequence classifier",
                              hint=_missing_head, **dtype_kwarg(getattr(torch, self.dtype)))
        # the label map, vocabulary, special ids and dtype as the stored files say (refused otherwise)
        reconcile(model, path, kind="classifier", dtype=self.dtype)
        #: the tokenizer's class and flags (signatures), and a doubt about it (None: none)
        self.tokenizer_class = describe_tokenizer(self.tokenizer)
        self.tokenizer_doubt = check_tokenizer_fits(self.tokenizer, model.config,
                                                    rows=int(model.get_input_embeddings().weight.shape[0]),
                                                    where=str(path))
        #: [CLS]/[SEP] where the stored files say (corrected or refused otherwise), one line for verify
        self.special_layout = check_special_layout(path, self.tokenizer, getattr(model.config, "model_type", None),
                                                   transformers.__version__)
        self.id2label = dict(model.config.id2label or {})
        readout_label(self.id2label, evaluator, str(path), model.config.num_labels)
        self.tokenizer.model_max_length = int(1e12)  # we count and truncate ourselves: no length warning
        self.model = model.to(device).eval()
        self.device = device
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.lock = threading.Lock()
        self.oom_budget: int | None = None

    def encode(self, prompts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """Token ids of each rendered pair (``[CLS] premise [SEP] hypothesis [SEP]``): untruncated,
        or cut to ``max_length`` from the premise's end (``only_first``: the claim is kept whole).

        A pair whose hypothesis alone (with the special tokens) is over ``max_length``, which
        ``only_first`` cannot cut (the tokenizer raises "Sequence to truncate too short"), is cut
        ``longest_first`` instead, so that one such pair never fails the batch of every other
        record's; planning refuses such a claim before it gets here
        (:func:`~unieval_local.pipeline.planning.build_plan`), and the engine's truncation
        count names its ``target``."""
        if not prompts:
            return []
        pairs = [split_pair(p) for p in prompts]
        if max_length is None:
            return tokens.encode(self.tokenizer, [p for p, _ in pairs], [h for _, h in pairs])["input_ids"]
        premises, hypotheses = [p for p, _ in pairs], [h for _, h in pairs]
        try:
            return tokens.encode(self.tokenizer, premises, hypotheses, truncation="only_first",
                                 max_length=max_length)["input_ids"]
        except Exception:  # noqa: BLE001  a hypothesis too long for only_first: each pair on its own
            out = []
            for premise, hypothesis in pairs:
                try:
                    enc = tokens.encode(self.tokenizer, premise, hypothesis, truncation="only_first",
                                        max_length=max_length)
                except Exception:  # noqa: BLE001  the claim alone is over the window
                    enc = tokens.encode(self.tokenizer, premise, hypothesis, truncation="longest_first",
                                        max_length=max_length)
                out.append(enc["input_ids"])
            return out

    def label_of(self, evaluator: Evaluator) -> int:
        """The output index read for ``evaluator`` (:func:`readout_label`; CheckpointError when the
        labels contradict it)."""
        return readout_label(self.id2label, evaluator, str(self.path), self.model.config.num_labels)

    def logits(self, input_ids, mask):
        """(B, n_labels) logits of a padded batch."""
        return self.model(input_ids=input_ids, attention_mask=mask).logits

    def probabilities(self, ids: list[list[int]], batch: Sequence[int], label: int) -> np.ndarray:
        """P(label) (float64; softmax over the head's labels) of the rows ``batch`` of ``ids``,
        padded to the longest."""
        import torch

        rows = [ids[i] for i in batch]
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for k, r in enumerate(rows):
            input_ids[k, :len(r)] = torch.tensor(r)
            mask[k, :len(r)] = 1
        with torch.inference_mode():
            logits = self.logits(input_ids.to(self.device), mask.to(self.device))
        return torch.softmax(logits.double(), dim=-1)[:, label].cpu().numpy()


class TextClassifierModel(ClassifierModel):
    """A :class:`ClassifierModel` whose prompts are ONE text each, not a rendered pair: the
    evaluator's prompt format joins the fields itself (FactCG's instruction template,
    :mod:`unieval_local.text.factcg`). Encoded as ``[CLS] prompt [SEP]``; past ``max_length``
    the end is cut (the ``[SEP]`` kept), as FactCG's ``tokenizer(text, max_length=2048,
    truncation='only_first')`` does with a single text."""

    def encode(self, prompts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """Token ids of each prompt with the tokenizer's special tokens: untruncated, or cut at
        its end to ``max_length``."""
        if not prompts:
            return []
        cut = {"truncation": True, "max_length": max_length} if max_length is not None else {}
        return tokens.encode(self.tokenizer, list(prompts), **cut)["input_ids"]


def model_class_of(evaluator: Evaluator) -> type[ClassifierModel]:
    """The model class for ``evaluator``'s prompts: :class:`ClassifierModel` (a (premise,
    hypothesis) pair) for the ``nli-pair`` format, :class:`TextClassifierModel` (one text)
    for any other (FactCG's)."""
    return ClassifierModel if isinstance(evaluator.prompt_format, NLIPair) else TextClassifierModel


class ClassifierRunner(tokens.TokenArithmetic, Runner):
    """The :class:`~unieval_local.models.base.Runner` of a classifier model (a :class:`ClassifierModel`
    over rendered pairs, :func:`~unieval_local.text.prompts.split_pair`; or the HHEM model over
    prompts, :mod:`unieval_local.models.hhem`), on the shared batching core
    (:func:`~unieval_local.models.batching.run_batches`): each distinct prompt once,
    sorted by length, batched under ``batch_tokens`` padded tokens; an out-of-memory error halves
    the budget and retries (a single pair that does not fit raises
    :class:`~unieval_local.errors.ModelRuntimeError`)."""

    def __init__(self, model: ClassifierModel, *, evaluator: Evaluator, fingerprint: str,
                 batch_tokens: int = BATCH_TOKENS["gpu"]):
        self.model = model
        self.evaluator = evaluator
        self.name = str(getattr(model, "path", None) or evaluator.hub_id or evaluator.name)
        self.fingerprint = fingerprint
        self.batch_tokens = batch_tokens
        #: the model's own forward (no single-step path here)
        self.forward = "plain"
        #: the index of the evaluator's label in the head's output
        self.label = model.label_of(evaluator)
        self.tokenizer_class = model.tokenizer_class
        self.tokenizer_doubt = model.tokenizer_doubt

    # token arithmetic (TokenCounter): of plain texts, as the tokenizer reads them
    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as the model reads it, untruncated: a rendered pair as
        ``[CLS] premise [SEP] hypothesis [SEP]`` (a pair model's), any other text with the special
        tokens of one segment."""
        texts = list(texts)
        if not texts:
            return []
        pair_model = isinstance(self.model, ClassifierModel) and not isinstance(self.model, TextClassifierModel)
        if pair_model and all(PAIR_SEPARATOR in t for t in texts):
            return [len(x) for x in self.model.encode(texts)]
        return [len(x) for x in tokens.encode(self.model.tokenizer, texts)["input_ids"]]

    def score(self, prompts: Sequence[str], *, max_length: int,
              on_batch: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(P(label), n_tokens)`` per rendered pair, in order (float64 in [0, 1]; untruncated tokens).

        Raises:
            ValueError: a prompt that is not a rendered pair.
            ModelRuntimeError: the model failed (out of memory on a single pair included).
        """
        distinct = list(dict.fromkeys(prompts))
        full = self.model.encode(distinct)
        ids = self.model.encode(distinct, max_length)
        lengths = [len(x) for x in ids]
        order = sort_by_length(lengths)
        values = np.full(len(distinct), np.nan)

        def forward(batch: list[int]) -> None:
            values[batch] = self.model.probabilities(ids, batch, self.label)

        def done(batch: list[int], end: int) -> None:
            if on_batch is not None:
                on_batch(end, len(distinct))

        with self.model.lock:
            run_batches(order, lengths, batch_tokens=self.batch_tokens, holder=self.model, device=self.model.device,
                        forward=forward, on_batch=done)
        index = {p: k for k, p in enumerate(distinct)}
        at = [index[p] for p in prompts]
        return values[at], np.array([len(full[k]) for k in at], dtype=np.int64)


_MODELS: dict[tuple[str, str, str | None, str, str], object] = {}
_LOCK = threading.Lock()


def shared_classifier_runner(model_class, checkpoint: ResolvedCheckpoint, fingerprint: str, evaluator: Evaluator, *,
                             device: str, dtype: str, batch_tokens: int) -> ClassifierRunner:
    """A :class:`ClassifierRunner` over ``model_class(checkpoint, evaluator, device, dtype)``, loaded
    once per (model class, folder, content fingerprint, device, dtype) per process (replaced weights:
    loaded again): the factory of every classifier backend (seq-classifier, hhem).

    Raises:
        CheckpointError, CheckpointNotFoundError: as ``model_class`` raises them.
    """
    key = (model_class.__name__, str(Path(checkpoint.path).resolve()), fingerprint, device, check_dtype(dtype))
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = model_class(checkpoint, evaluator, device, dtype)
        model = _MODELS[key]
    return ClassifierRunner(model, evaluator=evaluator, fingerprint=fingerprint, batch_tokens=batch_tokens)


def classifier_runner_factory(checkpoint: ResolvedCheckpoint, fingerprint: str, evaluator: Evaluator, *, device: str,
                              dtype: str, batch_tokens: int = BATCH_TOKENS["gpu"], **_: object) -> ClassifierRunner:
    """The ``seq-classifier`` backend's :data:`~unieval_local.models.base.RunnerFactory` (one model per
    folder, device and dtype per process; the T5-only settings, ``fast_forward``, ``attention_mib``
    and ``progress``, do not apply).

    Raises:
        CheckpointError: the checkpoint does not load strictly (see :class:`ClassifierModel`).
    """
    return shared_classifier_runner(model_class_of(evaluator), checkpoint, fingerprint, evaluator, device=device,
                                    dtype=dtype, batch_tokens=batch_tokens)


def verify_classifier(report, folder, spec):
    """``unieval-local verify`` for the ``seq-classifier`` backend: the config loads, the evaluator's
    label is among ``id2label``, then the strict load the backend does (every tensor, the
    classification head, a tokenizer that fits). ``report``: the
    :class:`~unieval_local.models.verify.VerifyReport` to add to; returned."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        report.fail(f"config does not load: {first_line(exc)}")
        return report
    report.info(f"config loads ({config.model_type}, vocab_size={config.vocab_size})")

    try:
        index = readout_label(config.id2label, spec, str(folder), config.num_labels)
        report.info(f"label {spec.label!r} is output {index} of {len(config.id2label)} ({spec.name} reads P({spec.label}))")
        model = ClassifierModel(ResolvedCheckpoint(spec.name, Path(folder), "local"), spec, "cpu", "float32")
    except CheckpointError as exc:
        report.fail(str(exc))
        return report
    report_tokenizer(report, model)
    report.info("model loads strictly: every weight matches the config, the classification head included")
    return report


def report_tokenizer(report, model) -> None:
    """Add a loaded classifier or HHEM model's tokenizer checks to a ``verify`` report: its class and
    that it fits the model, or the doubt about it (a warning)."""
    if model.tokenizer_doubt:
        report.warn(model.tokenizer_doubt)
    else:
        report.info(f"tokenizer {model.tokenizer_class} fits the model (special ids as its config says, "
                    f"{len(model.tokenizer):,} tokens within the embedding rows)")
    layout = getattr(model, "special_layout", None)
    if layout:
        report.info(f"tokenizer {layout}")
