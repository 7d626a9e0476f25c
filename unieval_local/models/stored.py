"""Read the checkpoint, not the library's reading of it (issue 35).

Everything that changes a score is read from the folder's own files (``config.json`` with
``json``, tensors with safetensors / ``torch.load``) and checked against the model transformers
loaded: the decoder-output rescale of a T5 head (tied T5 multiplies the last decoder state by
``d_model**-0.5``, T5 v1.1 does not), the LM head's rows, the vocabulary size, the special ids
(pad, eos, decoder start), the label map of a classifier and the dtype of the parameters. Where
the loaded object disagrees with the stored file, the stored file wins when the loaded model can
be set to it (a config attribute the forward reads at run time); otherwise the load is refused
with the transformers version and the remedy. transformers 5.0.0 is the case that made this
necessary: its T5 config object said ``scale_decoder_outputs=True`` for checkpoints whose
``config.json`` says ``tie_word_embeddings: false`` (every official UniEval checkpoint), and every
score moved by up to 0.36 without a word.

Also here: the keyword that passes a dtype to ``from_pretrained`` on each admitted transformers
(``dtype`` from 4.56, ``torch_dtype`` before), and the message for a tokenizer folder saved by a
newer transformers with keys an older one cannot read.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from ..errors import CheckpointError

__all__ = ["PROBE_TEXTS", "REMEDY", "StoredFacts", "dtype_kwarg", "explain_tokenizer_failure", "read_config",
           "reconcile", "require_transformers", "stored_fast_tokenizer", "stored_rescale", "transformers_version"]

#: What a refusal tells the user to do.
REMEDY = ("install a transformers release this package tests (pip install 'transformers>=4.46.1,!=5.0.*'; the "
          "tested versions are listed in docs/development.md), or report the checkpoint and the version")

_warned: set[tuple[str, str]] = set()


def transformers_version() -> tuple[int, int, int]:
    """The installed transformers version as ``(major, minor, patch)`` (dev/rc suffixes dropped)."""
    import transformers

    parts = []
    for p in transformers.__version__.split(".")[:3]:
        digits = "".join(c for c in p if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple((parts + [0, 0, 0])[:3])  # type: ignore[return-value]


def dtype_kwarg(torch_dtype: Any) -> dict[str, Any]:
    """The ``from_pretrained`` keyword for a dtype on the installed transformers: ``dtype`` from
    4.56 (where it was introduced; ``torch_dtype`` is deprecated there), ``torch_dtype`` before
    (4.46-4.55 pass an unknown ``dtype`` into the config, whose JSON serialisation then fails:
    "Object of type dtype is not JSON serializable")."""
    return {"dtype" if transformers_version() >= (4, 56, 0) else "torch_dtype": torch_dtype}


def require_transformers(minimum: tuple[int, int, int], what: str) -> None:
    """Refuse ``what`` on a transformers older than ``minimum`` (the oldest release it is tested on).

    Raises:
        CheckpointError: naming the installed version, the one needed and the pip command.
    """
    import transformers

    if transformers_version() < minimum:
        need = ".".join(map(str, minimum))
        raise CheckpointError(f"{what} needs transformers>={need} (the oldest release it is tested on; "
                              f"transformers {transformers.__version__} is installed and gives other numbers): "
                              f"pip install 'transformers>={need},!=5.0.*'")


def read_config(folder: str | Path) -> dict[str, Any]:
    """The folder's ``config.json`` as stored (a dict; ``{}`` when it is absent or unreadable: the
    loader then fails with its own message)."""
    try:
        data = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def stored_rescale(stored: dict[str, Any]) -> bool:
    """Whether a T5-family checkpoint's STORED config means the decoder output is multiplied by
    ``d_model**-0.5`` before the LM head: the tied-head layout of the original T5 (Raffel et al.,
    2020; transformers 4.x ``T5ForConditionalGeneration.forward``: ``if self.config.tie_word_embeddings``).
    ``tie_word_embeddings`` absent means transformers 4.x's default for the model type: True for
    ``t5``, False for ``mt5`` / ``umt5`` (their configs default to an untied head)."""
    default = stored.get("model_type") not in ("mt5", "umt5")
    value = stored.get("tie_word_embeddings", default)
    return bool(default if value is None else value)


def library_rescale(config) -> bool:
    """Whether the loaded model's own forward rescales the decoder output: transformers 5's T5 reads
    ``config.scale_decoder_outputs``; its MT5 never rescales; transformers 4.x rescales T5 and MT5
    when ``config.tie_word_embeddings`` is true."""
    stated = getattr(config, "scale_decoder_outputs", None)
    if stated is not None:
        return bool(stated)
    if getattr(config, "model_type", None) in ("mt5", "umt5") and transformers_version() >= (5, 0, 0):
        return False
    return bool(getattr(config, "tie_word_embeddings", True))


class StoredFacts:
    """What the stored files say about the score-changing properties of a loaded model.

    Attributes:
        rescale: multiply the decoder output by ``d_model**-0.5`` (T5 family; False elsewhere).
        start_id: the decoder start id (seq2seq; None elsewhere).
        id2label: the label map, int keys (classifiers; ``{}`` when the file has none).
        plain_forward_ok: the model's own forward now agrees with the stored files (False: only
            the runner's own forward, which follows :attr:`rescale`, is exact).
        notes: what was corrected, one line each.
    """

    def __init__(self):
        self.rescale = False
        self.start_id: int | None = None
        self.id2label: dict[int, str] = {}
        self.plain_forward_ok = True
        self.notes: list[str] = []


def _refuse(where: str, what: str) -> CheckpointError:
    import transformers

    return CheckpointError(f"checkpoint {where!r}: {what}. transformers {transformers.__version__} read the "
                           f"checkpoint otherwise than its files say; {REMEDY}")


def _note(facts: StoredFacts | None, where: str, line: str) -> None:
    """Warn (once per checkpoint and line) that the stored file overruled transformers' reading;
    the line is also kept in ``facts.notes`` when given."""
    import transformers

    text = f"checkpoint {where!r}: {line} (transformers {transformers.__version__}); the stored file wins"
    if facts is not None:
        facts.notes.append(text)
    if (where, line) not in _warned:
        _warned.add((where, line))
        warnings.warn(text, RuntimeWarning, stacklevel=3)


def _as_ids(value) -> tuple:
    """An id or a list of ids as a sorted tuple (transformers may hold either for eos)."""
    return tuple(sorted(value)) if isinstance(value, (list, tuple)) else (value,)


def _check_ids(stored: dict[str, Any], config, where: str, keys: tuple[str, ...]) -> None:
    """The special ids ``keys`` of the stored config equal the loaded config's (where both have one)."""
    for key in keys:
        if key in stored and stored[key] is not None and getattr(config, key, None) is not None:
            if _as_ids(stored[key]) != _as_ids(getattr(config, key)):
                raise _refuse(where, f"config.json says {key} = {stored[key]!r}, the loaded config "
                                     f"{getattr(config, key)!r}")


def _check_head(model, folder: Path, stored: dict[str, Any], where: str) -> None:
    """The loaded LM head equals the stored ``lm_head.weight`` (or, with none stored, the stored
    input embedding: a tied head). The candidate tensors are read in one pass over the weight
    files (safetensors lazily, ``.bin`` memory-mapped)."""
    import torch

    from .weights import iter_stored_tensors

    head = model.get_output_embeddings()
    if head is None:
        return
    names = ("lm_head.weight", "shared.weight", "model.embed_tokens.weight", "embed_tokens.weight",
             "model.decoder.embed_tokens.weight")
    name, tensor = None, None
    for key, value in iter_stored_tensors(folder, set(names)):  # keep the first of ``names`` stored
        if name is None or names.index(key) < names.index(name):
            name, tensor = key, value
    if name is None:
        return
    loaded = head.weight.detach().to("cpu")
    if tensor.shape != loaded.shape or not torch.equal(tensor.to(loaded.dtype), loaded):
        raise _refuse(where, f"the loaded LM head differs from the stored {name} "
                             f"(config.json tie_word_embeddings = {stored.get('tie_word_embeddings')!r})")


def reconcile(model, folder: str | Path, *, kind: str, dtype: str) -> StoredFacts:
    """Check a loaded model against its folder's stored files, set what can be set, refuse the rest.

    Args:
        model: the loaded transformers model (any device; its parameters are compared on the CPU).
        folder: the checkpoint folder it was loaded from.
        kind: ``"seq2seq"`` (T5 family), ``"classifier"`` or ``"causal-lm"``.
        dtype: the dtype asked for (``float32`` / ``bfloat16``).

    Returns:
        :class:`StoredFacts`: the rescale, start id and label map the scores must use.

    Raises:
        CheckpointError: the loaded model disagrees with the stored files in a way that cannot be
            set right (vocabulary size, special ids, label map, LM head rows, parameter dtype,
            the rescale of a model whose forward cannot be told), naming the transformers version
            and the remedy (:data:`REMEDY`).
    """
    import torch

    folder = Path(folder)
    where = str(folder)
    stored = read_config(folder)
    config = model.config
    facts = StoredFacts()
    got = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if got and got != {getattr(torch, dtype)}:
        raise _refuse(where, f"asked for {dtype}, the model loaded in {', '.join(sorted(str(g) for g in got))}")
    rows = int(model.get_input_embeddings().weight.shape[0])
    if isinstance(stored.get("vocab_size"), int) and stored["vocab_size"] != rows:
        raise _refuse(where, f"config.json says vocab_size = {stored['vocab_size']}, the loaded embedding has "
                             f"{rows} rows")
    _check_ids(stored, config, where, ("pad_token_id", "eos_token_id", "bos_token_id"))
    if kind == "seq2seq":
        _check_ids(stored, config, where, ("decoder_start_token_id",))
        start = stored.get("decoder_start_token_id")
        facts.start_id = int(start) if isinstance(start, int) else None
        facts.rescale = stored_rescale(stored)
        if library_rescale(config) != facts.rescale:
            said = f"config.json says tie_word_embeddings = {stored.get('tie_word_embeddings', '(absent)')!r}: " \
                   f"{'a' if facts.rescale else 'no'} d_model**-0.5 rescale of the decoder output, but the " \
                   f"loaded config {'asks for one' if library_rescale(config) else 'leaves it out'}"
            if getattr(config, "scale_decoder_outputs", None) is not None:
                config.scale_decoder_outputs = facts.rescale
            elif transformers_version() < (5, 0, 0) and getattr(config, "model_type", None) in ("t5", "mt5"):
                config.tie_word_embeddings = facts.rescale  # 4.x's forward reads it at run time
            else:
                facts.plain_forward_ok = False
            _note(facts, where, said)
        _check_head(model, folder, stored, where)
    elif kind == "causal-lm":
        _check_head(model, folder, stored, where)
    if kind == "classifier" and isinstance(stored.get("id2label"), dict):
        try:
            want = {int(k): str(v) for k, v in stored["id2label"].items()}
        except (TypeError, ValueError):
            raise _refuse(where, f"config.json's id2label has keys that are not integers: "
                                 f"{list(stored['id2label'])[:4]}") from None
        have = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
        if want != have:
            raise _refuse(where, f"config.json's id2label {want} differs from the loaded {have}")
        facts.id2label = want
    return facts


#: Texts whose ids a tokenizer and its folder's tokenizer.json must agree on (digits, runs of
#: spaces, newlines, punctuation, non-ASCII): where a pre-tokenizer differs, these split otherwise.
PROBE_TEXTS = ("Coherence (1-5): 3", " 12345 and  two  spaces\n\nnew line", "Score: 4 <score> yes </score>",
               "Caf\u00e9 na\u00efve \u2014 \u4e2d\u6587 2024-12-04", "x=1.5e-3; y==2")


def stored_fast_tokenizer(folder: str | Path, tokenizer):
    """The tokenizer of a folder with a ``tokenizer.json``, as that file says: ``tokenizer`` itself
    when its ids equal the file's on :data:`PROBE_TEXTS` (special tokens left out), else the file
    loaded as ``PreTrainedTokenizerFast`` with the same special tokens and chat template, and a
    warning. transformers 5 builds a model type's own class (``Qwen2Tokenizer``) with that model's
    pre-tokenizer rules instead of the stored ones: on a folder whose tokenizer.json splits
    otherwise (a fine-tune with its own tokenizer, the generated stand-ins) the ids, and so every
    score, differed from transformers 4.x's by up to 1.07 rating points.

    Raises:
        CheckpointError: the file's ids still differ after the rebuild.
    """
    folder = Path(folder)
    path = folder / "tokenizer.json"
    if not path.is_file():
        return tokenizer
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(path))

    def agrees(tok) -> bool:
        return all(tok(t, add_special_tokens=False).input_ids == raw.encode(t, add_special_tokens=False).ids
                   for t in PROBE_TEXTS)

    if agrees(tokenizer):
        return tokenizer
    from transformers import PreTrainedTokenizerFast

    rebuilt = PreTrainedTokenizerFast.from_pretrained(folder, local_files_only=True)
    rebuilt.chat_template = tokenizer.chat_template
    if not agrees(rebuilt):
        raise _refuse(str(folder), "its tokenizer's ids differ from its tokenizer.json's")
    _note(None, str(folder), f"transformers built {type(tokenizer).__name__}, whose ids differ from the "
                              "folder's tokenizer.json (another pre-tokenizer); tokenizer.json is used")
    return rebuilt


#: Keys that a newer transformers writes into tokenizer_config.json and older ones cannot read.
_NEWER_KEYS = {
    "extra_special_tokens": "a list written by transformers 5 (transformers 4.51-4.57 read a mapping there); "
                            "rename the key to \"additional_special_tokens\"",
    "tokenizer_class": "\"TokenizersBackend\" is transformers 5's class; transformers 4.x loads the same "
                       "tokenizer.json as \"PreTrainedTokenizerFast\"",
}


def explain_tokenizer_failure(folder: str | Path, exc: BaseException) -> str:
    """The message for a tokenizer that does not load: the exception's first line, and, when the
    folder's ``tokenizer_config.json`` holds a key this transformers cannot read (saved by a newer
    one), the file, the key and how to rewrite it."""
    import transformers

    path = Path(folder) / "tokenizer_config.json"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    base = f"{type(exc).__name__}: {first}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return base
    found = []
    if isinstance(data.get("extra_special_tokens"), list) and transformers_version() < (5, 0, 0):
        found.append(("extra_special_tokens", _NEWER_KEYS["extra_special_tokens"]))
    if data.get("tokenizer_class") == "TokenizersBackend" and transformers_version() < (5, 0, 0):
        found.append(("tokenizer_class", _NEWER_KEYS["tokenizer_class"]))
    if not found:
        return base
    keys = "; ".join(f"key {k!r}: {why}" for k, why in found)
    return (f"{base}. {path} was saved by a newer transformers than the installed {transformers.__version__}: "
            f"{keys} (or install transformers>=5.1)")
