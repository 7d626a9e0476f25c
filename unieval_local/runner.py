"""The model runner: prompts in, P(Yes) out. The only module that imports torch.

Score of one query (UniEval, ``scorer.py``; contract "The score of one query"):
tokenize the prompt (``max_length`` tokens, the end cut off, ``</s>`` read as
the EOS token), run the encoder and ONE decoder step from
``decoder_start_token_id``, and take::

    p_yes = softmax(logits)[yes] / (softmax(logits)[yes] + softmax(logits)[no])
          = sigmoid(logit_yes - logit_no)

The sigmoid form is used: it is the same number in real arithmetic and never
gives 0/0 when both probabilities underflow.

Work is done once per distinct prompt; prompts are sorted by token length and
packed into batches of at most ``batch_tokens`` padded tokens, then results are
put back in input order (bert_score / COMET length batching).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from .checkpoints import ResolvedCheckpoint, yes_no_ids
from .errors import CheckpointError

DTYPES = ("float32", "bfloat16")


class Runner(Protocol):
    """Anything that turns prompts into P(Yes): the T5 runner, or a fake in tests."""

    def p_yes(self, prompts: Sequence[str], *, max_length: int, batch_tokens: int,
              progress: bool | None = False) -> np.ndarray:
        """Return a float64 array, shape ``(len(prompts),)``, values in [0, 1] (NaN if
        the model gave non-finite logits)."""
        ...


def resolve_device(device: str | None) -> str:
    """``cuda`` when available and ``device`` is None, else ``cpu``; else ``device`` checked.

    Raises:
        ValueError: ``cuda`` asked for where torch sees no CUDA device.
    """
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    dev = str(device)
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {dev!r} asked for, but torch sees no CUDA device")
    torch.device(dev)  # raises on nonsense
    return dev


def check_dtype(dtype: str) -> str:
    """Validate a dtype name.

    Raises:
        ValueError: ``float16`` (T5 overflows to NaN in float16) or an unknown name.
    """
    if dtype in ("float16", "fp16", "half"):
        raise ValueError("float16 is refused: T5 activations overflow to NaN in float16; "
                         "use bfloat16 (GPU) or float32")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype


def plan_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Group query indices into batches of at most ``batch_tokens`` padded tokens.

    Queries are sorted by length, longest first (ties by index), and a batch
    grows while ``n_queries * longest_length <= batch_tokens``. A query longer
    than the budget gets a batch of its own.

    Returns:
        Lists of indices into ``lengths``; every index appears exactly once.
    """
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        if current and (len(current) + 1) * longest > batch_tokens:
            batches.append(current)
            current = []
        if not current:
            longest = lengths[i]
        current.append(i)
    if current:
        batches.append(current)
    return batches


class T5Runner:
    """A loaded T5 checkpoint that scores Boolean-QA prompts.

    Args:
        checkpoint: the resolved checkpoint folder.
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        dtype: ``float32`` (exact UniEval parity) or ``bfloat16``.

    Raises:
        CheckpointError: the folder does not load as a seq2seq model with a
            tokenizer that has distinct Yes/No tokens.
    """

    def __init__(self, checkpoint: ResolvedCheckpoint, device: str, dtype: str):
        import torch
        import transformers
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.checkpoint = checkpoint
        self.device = device
        self.dtype = check_dtype(dtype)
        torch_dtype = getattr(torch, dtype)
        path = Path(checkpoint.path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
            bars = transformers.utils.logging.is_progress_bar_enabled()
            transformers.utils.logging.disable_progress_bar()
            try:
                model = AutoModelForSeq2SeqLM.from_pretrained(path, trust_remote_code=False, **{key: torch_dtype})
            finally:
                if bars:
                    transformers.utils.logging.enable_progress_bar()
        except Exception as exc:
            raise CheckpointError(f"cannot load checkpoint {str(path)!r}: {type(exc).__name__}: {exc}") from exc
        if not model.config.is_encoder_decoder:
            raise CheckpointError(f"{path} is not an encoder-decoder model")
        self.model = model.to(device).eval()
        self.yes_id, self.no_id = yes_no_ids(self.tokenizer)
        if max(self.yes_id, self.no_id) >= model.config.vocab_size:
            raise CheckpointError(f"Yes/No ids {self.yes_id}/{self.no_id} exceed vocab_size {model.config.vocab_size}")
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.start_id = model.config.decoder_start_token_id
        if self.start_id is None:
            self.start_id = self.pad_id
        self._lock = threading.Lock()

    def tokenize(self, prompts: Sequence[str], max_length: int) -> list[list[int]]:
        """Token ids of each prompt, cut to ``max_length`` (EOS kept at the end)."""
        if not prompts:
            return []
        enc = self.tokenizer(list(prompts), max_length=max_length, truncation=True)
        return enc["input_ids"]

    def p_yes(self, prompts: Sequence[str], *, max_length: int = 1024, batch_tokens: int = 8192,
              progress: bool | None = False) -> np.ndarray:
        """P(Yes) of each prompt; float64 array of shape ``(len(prompts),)``.

        Identical prompts are scored once. Batches hold at most ``batch_tokens``
        padded tokens. Non-finite logits give NaN for that prompt.
        """
        import torch
        from tqdm.auto import tqdm

        unique = list(dict.fromkeys(prompts))
        ids = self.tokenize(unique, max_length)
        scores = np.full(len(unique), np.nan, dtype=np.float64)
        batches = plan_batches([len(x) for x in ids], batch_tokens)
        with self._lock, torch.inference_mode(), tqdm(
            total=len(unique), desc="queries", unit="q", disable=None if progress is None else not progress, leave=False
        ) as bar:
            for batch in batches:
                width = max(len(ids[i]) for i in batch)
                input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    input_ids[row, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[row, : len(ids[i])] = 1
                decoder_ids = torch.full((len(batch), 1), self.start_id, dtype=torch.long)
                out = self.model(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    decoder_input_ids=decoder_ids.to(self.device),
                    use_cache=False,
                )
                two = out.logits[:, 0, [self.yes_id, self.no_id]].float().cpu().numpy().astype(np.float64)
                diff = two[:, 0] - two[:, 1]
                with np.errstate(over="ignore", invalid="ignore"):
                    p = 1.0 / (1.0 + np.exp(-diff))
                scores[batch] = p
                bar.update(len(batch))
        index = {p: k for k, p in enumerate(unique)}
        return scores[[index[p] for p in prompts]] if prompts else scores


_RUNNERS: dict[tuple[str, str, str], T5Runner] = {}
_RUNNERS_LOCK = threading.Lock()


def load_runner(checkpoint: ResolvedCheckpoint, device: str, dtype: str) -> T5Runner:
    """Load (once per process) the runner for ``(checkpoint folder, device, dtype)``."""
    key = (str(Path(checkpoint.path).resolve()), device, check_dtype(dtype))
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = _RUNNERS[key] = T5Runner(checkpoint, device, dtype)
        return runner


def library_versions() -> tuple[str, str]:
    """``(torch.__version__, transformers.__version__)``."""
    import torch
    import transformers

    return torch.__version__, transformers.__version__
