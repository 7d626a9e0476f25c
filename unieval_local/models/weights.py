"""Reading a checkpoint folder's stored tensors directly (no transformers): which weight files
``from_pretrained`` would read, and their tensors one file at a time. torch and safetensors are
imported inside the functions."""

from __future__ import annotations

from pathlib import Path

from ..errors import CheckpointError

__all__ = ["iter_stored_tensors", "weight_files"]


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a checkpoint folder, as ``from_pretrained`` would read them:
    ``model.safetensors`` (or the shards of its index), else ``pytorch_model.bin`` (or its shards)."""
    for single, index in (("model.safetensors", "model.safetensors.index.json"),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if (folder / single).is_file():
            return [folder / single]
        if (folder / index).is_file():
            import json

            shards = sorted(set(json.loads((folder / index).read_text())["weight_map"].values()))
            return [folder / s for s in shards]
    return []


def iter_stored_tensors(folder: Path, names: set[str] | None = None):
    """``(name, tensor)`` for the tensors stored in a checkpoint's weight files (those in
    ``names`` only, when given), one file at a time (safetensors read lazily, ``.bin``
    memory-mapped).

    Raises:
        CheckpointError: a weight file cannot be opened.
    """
    for f in weight_files(folder):
        try:
            if f.suffix == ".safetensors":
                from safetensors import safe_open

                with safe_open(str(f), "pt") as fh:
                    for k in fh.keys():
                        if names is None or k in names:
                            yield k, fh.get_tensor(k)
            else:
                import torch

                state = torch.load(f, map_location="cpu", mmap=True, weights_only=True)
                for k, v in state.items():
                    if names is None or k in names:
                        yield k, v
        except CheckpointError:
            raise
        except Exception as exc:
            raise CheckpointError(f"cannot read weight file {str(f)!r} ({type(exc).__name__}: {exc}); "
                                  "it is truncated or corrupt: stage the checkpoint again") from exc
