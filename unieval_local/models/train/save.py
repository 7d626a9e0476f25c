"""Saving a trained model as an evaluator folder like any other.

The folder keeps the base's layout: the base's ``config.json`` (plus the identity and training
keys below), the trained tensors under the SAME names the base stores (``model.safetensors``: a
T5 v1.1 base keeps its untied ``lm_head.weight``, whatever transformers ties in memory), the
base's tokenizer files byte for byte, and a ``unieval_manifest.json`` written by the download's
code (:func:`~unieval_local.models.manifest.write_manifest`). It is written into a temporary
folder beside ``out`` and renamed into place only when complete: a crash or a full disk leaves no
half-written folder that loads (an existing ``out`` is replaced only with ``overwrite``, after the
new one is complete).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ...errors import CheckpointError
from ..manifest import MANIFEST_NAME, manifest_entries, write_manifest

__all__ = ["TRAINING_KEY", "save_evaluator_folder"]

#: The ``config.json`` key holding how a folder was trained (``fine_tuned_from`` ...).
TRAINING_KEY = "unieval_local_training"

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".ckpt", ".msgpack", ".h5")


def _stored_names(folder: Path) -> list[str]:
    from ..t5.loading import stored_weight_names

    return sorted(stored_weight_names(folder))


def _tokenizer_files(base: Path) -> list[Path]:
    """The base's files that are neither weights, nor its config, nor its manifest: its tokenizer
    (``spiece.model``, ``tokenizer.json``, ``spm.model``, their configs) and other small files."""
    skip = {"config.json", MANIFEST_NAME, "model.safetensors.index.json", "pytorch_model.bin.index.json"}
    return [p for p in sorted(base.iterdir()) if p.is_file() and p.name not in skip
            and not p.name.endswith(_WEIGHT_SUFFIXES) and not p.name.startswith(".")]


def save_evaluator_folder(module, base: str | os.PathLike, out: str | os.PathLike, *, evaluator: str,
                          training: dict[str, Any], overwrite: bool = False) -> Path:
    """Write ``module``'s weights as an evaluator folder ``out`` in ``base``'s layout (module docstring).

    Args:
        module: the trained transformers model. base: the base checkpoint folder.
        out: the folder to write. evaluator: the evaluator name recorded as
            ``unieval_local_evaluator`` (the base's). training: recorded under :data:`TRAINING_KEY`
            (``fine_tuned_from``, the data's fingerprint, the config, seed, library versions).
        overwrite: replace an existing ``out`` (after the new folder is complete).

    Returns:
        ``out`` as a Path.

    Raises:
        FileExistsError: ``out`` exists and ``overwrite`` is False.
        CheckpointError: a tensor the base stores is not in the trained model.
        OSError: writing failed (no folder is left at ``out``; an existing one is unchanged).
    """
    from safetensors.torch import save_file

    base, out = Path(base), Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists: choose another output folder or pass --overwrite")
    out.parent.mkdir(parents=True, exist_ok=True)
    state = module.state_dict()
    names = _stored_names(base)
    missing = [n for n in names if n not in state]
    if missing:
        raise CheckpointError(f"the trained model lacks tensors the base {base} stores: {', '.join(missing[:5])}")
    tmp = Path(tempfile.mkdtemp(dir=str(out.parent), prefix=f".{out.name}.partial-"))
    try:
        tensors = {n: state[n].detach().to("cpu").contiguous().clone() for n in names}
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
        config["unieval_local_evaluator"] = evaluator
        config[TRAINING_KEY] = training
        (tmp / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        for f in _tokenizer_files(base):
            shutil.copyfile(f, tmp / f.name)
        write_manifest(tmp, manifest_entries(tmp), checkpoint=evaluator, hub_id=None, revision=None)
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out

