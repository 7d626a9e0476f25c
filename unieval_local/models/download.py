"""Staging checkpoints for offline machines: only the files a checkpoint needs (config, weights,
tokenizer) from the Hugging Face hub, with a SHA-256 manifest (``unieval-local download``)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Protocol

from ..errors import CheckpointError
from ..registry.tasks import CHECKPOINTS
from .files import OPTIONAL_FILES, TOKENIZER_FILES
from .manifest import file_entry, write_manifest

__all__ = ["HubClient", "HuggingFaceHubClient", "NO_DEFAULT_WEIGHTS", "describe_download", "download_checkpoint",
           "fetch_to_hf_cache", "select_checkpoint_files"]

#: Why an evaluator without a hub id (``g-eval``) cannot be downloaded, and what to do instead.
NO_DEFAULT_WEIGHTS = ("{name} has no default weights to download: use --model {name}=DIR with a local "
                      "instruct model (Llama, Qwen2 or Granite layout), or Scorer(model={{'{name}': DIR}}) in Python")


def describe_download(name: str, hub_id: str | None = None) -> str:
    """One line on what ``download_checkpoint(name)`` fetches: the hub repository, its approximate
    size and the weights' licence (from the registry: :attr:`Evaluator.size_gb`, :attr:`Evaluator.licence`),
    e.g. ``factcg-deberta-large (yaxili96/FactCG-DeBERTa-v3-Large): about 1.74 GB, licence MIT``.
    A name outside the registry (a foundation staged beside HHEM) gives size and licence unknown."""
    from ..registry.evaluators import EVALUATORS

    spec = EVALUATORS.get(name)
    hub_id = hub_id or (spec.hub_id if spec else None) or CHECKPOINTS.get(name)
    size = f"about {spec.size_gb:g} GB" if spec and spec.size_gb is not None else "size unknown"
    licence = spec.licence if spec else "not recorded here (see its model card)"
    return f"{name} ({hub_id}): {size}, licence {licence}"


class HubClient(Protocol):
    """The two hub calls download needs (a fake one is used in tests)."""

    def list_files(self, repo_id: str, revision: str | None) -> tuple[str, list[str]]:
        """Return ``(commit_sha, [file paths in the repo])``."""
        ...

    def download(self, repo_id: str, filename: str, revision: str, local_dir: Path | None) -> Path:
        """Fetch one file; into ``local_dir`` when given, else into the HF cache."""
        ...


class HuggingFaceHubClient:
    """:class:`HubClient` over ``huggingface_hub``."""

    def list_files(self, repo_id: str, revision: str | None) -> tuple[str, list[str]]:
        from huggingface_hub import HfApi

        info = HfApi().model_info(repo_id, revision=revision, files_metadata=False)
        return info.sha, [s.rfilename for s in (info.siblings or [])]

    def download(self, repo_id: str, filename: str, revision: str, local_dir: Path | None) -> Path:
        from huggingface_hub import hf_hub_download

        kwargs = {"local_dir": str(local_dir)} if local_dir is not None else {}
        return Path(hf_hub_download(repo_id, filename, revision=revision, **kwargs))


def select_checkpoint_files(files: list[str], tokenizer_needed: bool = True) -> list[str]:
    """Pick the files a checkpoint needs from a hub repo listing.

    Only top-level files: ``config.json``; the weights, preferring safetensors
    (``model.safetensors`` or its index and shards) over pickle
    (``pytorch_model.bin`` or its index and shards); the tokenizer files;
    ``generation_config.json`` when present. Sub-folders (training
    checkpoints, optimizer states) are never taken.

    ``tokenizer_needed=False``: a checkpoint whose tokenizer lives in another repository
    (HHEM-2.1-Open: flan-t5-base's).

    Raises:
        CheckpointError: no config, no weights or (when needed) no tokenizer in the listing.
    """
    top = {f for f in files if "/" not in f}
    if "config.json" not in top:
        raise CheckpointError("the repository has no top-level config.json")
    safetensors = sorted(f for f in top if f.endswith(".safetensors") or f == "model.safetensors.index.json")
    pickles = sorted(f for f in top if re.fullmatch(r"pytorch_model(-\d+-of-\d+)?\.bin|pytorch_model\.bin\.index\.json", f))
    weights = safetensors or pickles
    if not weights:
        raise CheckpointError("the repository has no model.safetensors or pytorch_model.bin at top level")
    tokenizer = [f for f in TOKENIZER_FILES if f in top]
    if tokenizer_needed and not ({"spiece.model", "spm.model", "tokenizer.json"} & set(tokenizer)):
        raise CheckpointError("the repository has no spiece.model, spm.model or tokenizer.json")
    return ["config.json", *weights, *tokenizer, *[f for f in OPTIONAL_FILES if f in top]]


def fetch_to_hf_cache(hub_id: str, *, revision: str | None = None, client: HubClient | None = None) -> Path:
    """Download the needed files of ``hub_id`` into the HF cache; return the snapshot folder."""
    client = client or HuggingFaceHubClient()
    sha, files = client.list_files(hub_id, revision)
    paths = [client.download(hub_id, f, sha, None) for f in select_checkpoint_files(files)]
    return paths[0].parent


def download_checkpoint(
    name: str, to: str | os.PathLike, *, revision: str | None = None,
    client: HubClient | None = None, hub_id: str | None = None, progress: bool = False,
    announce: Callable[[str], None] | None = None,
) -> Path:
    """Stage checkpoint ``name`` into ``to/<name>/`` with a checksum manifest (each file's SHA-256,
    size, ``st_mtime_ns`` and ``st_ino``, and the tokenizer files' fingerprint:
    :func:`~unieval_local.models.manifest.write_manifest`), against which the folder is checked
    whenever it resolves. The content fingerprint trusts a recorded SHA-256 only while the file keeps
    that stat: copied to another machine, the files are hashed once there (about 0.7 s per GB,
    remembered), or ``unieval-local verify`` records their new stat.

    Run this on a connected machine; copy ``to`` to the offline machine and
    set ``UNIEVAL_LOCAL_HOME=to``.

    Args:
        name: checkpoint name (``unieval-sum``, ``unieval-dialog``, ``unieval-fact``,
            ``minicheck-flan-t5-large``, ``mdeberta-nli``, ``hhem-2.1-open``: its foundation
            ``flan-t5-base`` is staged beside it).
        to: the home folder to write into.
        revision: hub branch, tag or commit (default: the main branch).
        client: the hub client (tests pass a fake one).
        hub_id: override the hub repository of ``name``.
        progress: show a progress bar over files.
        announce: called with :func:`describe_download`'s line (size and licence) before anything
            of each checkpoint is fetched, the foundation staged beside HHEM included (the CLI prints it).

    Returns:
        The checkpoint folder ``to/<name>``.

    Raises:
        UnknownTaskError / CheckpointError: unknown name, an evaluator without default weights
            (``g-eval``: :data:`NO_DEFAULT_WEIGHTS`), or the repo lacks files.
    """
    from ..registry.evaluators import EVALUATORS

    if hub_id is None:
        if name in EVALUATORS and EVALUATORS[name].hub_id is None:
            raise CheckpointError(NO_DEFAULT_WEIGHTS.format(name=name))
        if name not in CHECKPOINTS:
            raise CheckpointError(f"unknown checkpoint {name!r}; known: {', '.join(CHECKPOINTS)}")
        hub_id = CHECKPOINTS[name]
    spec = EVALUATORS.get(name)
    client = client or HuggingFaceHubClient()
    if announce is not None:
        announce(describe_download(name, hub_id))
    sha, files = client.list_files(hub_id, revision)
    wanted = select_checkpoint_files(files, tokenizer_needed=not (spec and spec.tokenizer_from))
    if spec and spec.tokenizer_from:  # its tokenizer and T5 config: the foundation, staged beside it
        short = spec.tokenizer_from.split("/")[-1]
        download_checkpoint(short, to, client=client, hub_id=spec.tokenizer_from, progress=progress,
                            announce=announce)
    folder = Path(to).expanduser() / name
    folder.mkdir(parents=True, exist_ok=True)
    from tqdm.auto import tqdm

    entries = {}
    for fname in tqdm(wanted, desc=f"download {name}", unit="file", disable=not progress):
        path = Path(client.download(hub_id, fname, sha, folder))
        if path.resolve() != (folder / fname).resolve():
            raise CheckpointError(f"the hub client wrote {fname} to {path}, not into {folder}")
        entries[fname] = file_entry(path)
    write_manifest(folder, entries, checkpoint=name, hub_id=hub_id, revision=sha)
    return folder
