"""Strict, quiet loading of a Hugging Face model class (the classifier and causal-LM backends):
transformers' progress bar and load report are silenced (our error says what went wrong), and a
checkpoint whose tensors do not match its config is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import CheckpointError
from .batching import first_line

__all__ = ["load_strictly"]


def load_strictly(auto_class: Any, path: str | Path, kind: str, hint=None, **kwargs: Any) -> Any:
    """``auto_class.from_pretrained(path, local_files_only=True, **kwargs)`` with no progress bar
    nor load report, strictly: the model, or a :class:`CheckpointError` naming ``path``.

    Args:
        auto_class: a transformers ``AutoModelFor...`` class.
        kind: what the folder should load as, for the message (``"a causal LM"``).
        hint: ``f(missing_keys) -> str`` appended to the mismatch message (e.g. a missing head), or None.

    Raises:
        CheckpointError: it does not load, or a tensor is missing, unexpected or of another shape
            (the first five of each named).
    """
    import transformers

    logging = transformers.utils.logging
    bars, verbosity = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        model, info = auto_class.from_pretrained(path, local_files_only=True, output_loading_info=True, **kwargs)
    except Exception as exc:  # noqa: BLE001  named here
        raise CheckpointError(f"{path}: does not load as {kind}: {first_line(exc)}") from None
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
    missing, unexpected = sorted(info.get("missing_keys") or []), sorted(info.get("unexpected_keys") or [])
    mismatched = [m[0] if isinstance(m, tuple) else m for m in info.get("mismatched_keys") or []]
    if missing or unexpected or mismatched:
        raise CheckpointError(f"{path}: its weights do not match its config (strict loading): missing "
                              f"{missing[:5]}, unexpected {unexpected[:5]}, mismatched {mismatched[:5]}"
                              + (hint(missing) if hint else ""))
    return model
