"""Finding, staging and verifying checkpoints. Offline first.

Resolution order for a checkpoint name such as ``unieval-sum``
(:func:`resolve_checkpoint`):

1. the explicit ``model`` the user gave (a folder, a hub id, or a mapping
   from checkpoint name to folder or hub id);
2. ``$UNIEVAL_LOCAL_HOME/<name>/`` (a folder written by ``unieval-local download``);
3. the local Hugging Face cache (``hub_id`` of the checkpoint);
4. a download from the hub into the HF cache, only when online and offline
   mode is not set (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1`` or
   ``offline=True`` / ``--offline``).

Downloading is its own function (:func:`~unieval_local.models.download.download_checkpoint`), which fetches
only the files a checkpoint needs (the hub repos also hold gigabytes of
training leftovers) and writes a checksum manifest that :func:`~unieval_local.models.verify.verify_checkpoint`
checks offline.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CheckpointError, CheckpointNotFoundError
from ..hashing import memo_sha256_file, sha256_file, sha256_text  # noqa: F401  (sha256_file re-exported)
from ..registry.evaluators import HUB_ID  # noqa: F401  (re-exported)
from ..registry.tasks import CHECKPOINTS
from .files import MANIFEST_NAME, OPTIONAL_FILES, TOKENIZER_FILES
from .manifest import WEIGHT_SUFFIXES, check_links, check_recorded_files, read_manifest, stat_matches

__all__ = ["CheckpointIdentity", "EVALUATOR_KEY", "HOME_ENV", "ModelSpec", "ResolvedCheckpoint", "check_identity",
           "fingerprint_checkpoint", "is_offline", "named_by", "named_message", "read_identity", "resolve_checkpoint",
           "unverified_message"]

HOME_ENV = "UNIEVAL_LOCAL_HOME"

ModelSpec = str | os.PathLike | Mapping[str, str | os.PathLike] | None



@dataclass(frozen=True)
class ResolvedCheckpoint:
    """Where a checkpoint was found.

    Attributes:
        name: checkpoint name (``unieval-sum`` ...), or the user's folder/hub id.
        path: local folder holding ``config.json``, weights and tokenizer files.
        origin: ``explicit``, ``home``, ``hf-cache`` or ``hub``.
        hub_id: the hub repository, when known.
        revision: commit hash of the files, when known (manifest or HF cache).
    """

    name: str
    path: Path
    origin: str
    hub_id: str | None = None
    revision: str | None = None


#: The ``config.json`` key naming the evaluator a folder holds, for folders that no download
#: manifest or hub cache names (generated test checkpoints, your own fine-tunes):
#: ``"unieval_local_evaluator": "unieval-sum"``.
EVALUATOR_KEY = "unieval_local_evaluator"


@dataclass(frozen=True)
class CheckpointIdentity:
    """What a checkpoint folder records about which model it is (:func:`read_identity`).

    Attributes:
        hub_id: the hub repository it names, or None.
        evaluator: the evaluator name its ``config.json`` names (:data:`EVALUATOR_KEY`), or None.
        source: where that was read: ``manifest`` (``unieval_manifest.json`` of ``download``),
            ``hf-cache`` (the folder is a snapshot of the Hugging Face cache), ``config``
            (``config.json``), or ``none`` when nothing names the model.
        model_type: ``config.json``'s ``model_type`` (None when unreadable).
    """

    hub_id: str | None = None
    evaluator: str | None = None
    source: str = "none"
    model_type: str | None = None

    def describe(self) -> str:
        """``'MingZhong/unieval-sum' (its download manifest)``, for messages."""
        what = {"manifest": "its download manifest", "hf-cache": "its Hugging Face cache folder",
                "config": "its config.json"}.get(self.source, self.source)
        name = self.hub_id or self.evaluator
        return f"{name!r} ({what})"


def _hub_id_of_cache_snapshot(folder: Path) -> str | None:
    """``owner/name`` for a folder ``.../models--owner--name/snapshots/<revision>`` of the HF cache."""
    repo = folder.parent.parent.name if folder.parent.name == "snapshots" else ""
    if not repo.startswith("models--"):
        return None
    owner, sep, name = repo[len("models--"):].partition("--")
    return f"{owner}/{name}" if sep and owner and name else None


def read_identity(folder: str | os.PathLike) -> CheckpointIdentity:
    """What ``folder`` records about which model it holds, without loading it.

    In order: the ``hub_id`` of its download manifest; the hub id of the Hugging Face cache
    snapshot it is; its ``config.json``'s :data:`EVALUATOR_KEY`, else a ``_name_or_path``
    that is a built-in evaluator's hub id. ``model_type`` is read from ``config.json`` too.
    Never raises: an unreadable file gives no identity from it.
    """
    from ..registry.evaluators import evaluator_of_hub_id

    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        config = config if isinstance(config, dict) else {}
    except (OSError, ValueError):
        config = {}
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else None
    manifest = _read_manifest(folder) or {}
    if isinstance(manifest.get("hub_id"), str):
        return CheckpointIdentity(manifest["hub_id"], None, "manifest", model_type)
    cached = _hub_id_of_cache_snapshot(folder)
    if cached:
        return CheckpointIdentity(cached, None, "hf-cache", model_type)
    if isinstance(config.get(EVALUATOR_KEY), str):
        return CheckpointIdentity(None, config[EVALUATOR_KEY], "config", model_type)
    named = config.get("_name_or_path")
    if isinstance(named, str) and evaluator_of_hub_id(named) is not None:
        return CheckpointIdentity(named, None, "config", model_type)
    return CheckpointIdentity(None, None, "none", model_type)


def check_identity(folder: str | os.PathLike, evaluator) -> tuple[str, CheckpointIdentity]:
    """Whether checkpoint ``folder`` is a checkpoint of ``evaluator`` (an
    :class:`~unieval_local.registry.evaluators.Evaluator`), as far as the folder says, and what
    vouches for it.

    The folder's files are then compared with its record, when it has one (a download
    manifest, an HF cache snapshot: :func:`~unieval_local.models.manifest.check_recorded_files`;
    config and tokenizer files hashed, weight files by size): a changed or added tokenizer
    file is a tokenizer of another model under this one's name. The loaded tokenizer is
    checked against the model by each backend at load
    (:mod:`~unieval_local.models.tokenizer_identity`).

    Returns:
        ``(status, identity)``. ``status`` is one of:

        * ``verified``: the evaluator's hub id is recorded by something other than the folder's
          own label, and the files were compared with that record: a download manifest
          (``unieval-local download``: hub id and each file's SHA-256) listing the files, or an HF
          cache snapshot whose files link to blobs named by their content hashes;
        * ``named``: only a label names ``evaluator``: ``config.json``'s :data:`EVALUATOR_KEY`
          (``make_test_checkpoint.py --evaluator``, a fine-tune of your own) or its
          ``_name_or_path``, a manifest that lists no file, a folder path of the HF cache whose
          files are no blob links (:func:`named_message` says which);
        * ``unverified``: nothing names the model, or a hub repository that is no built-in
          evaluator's (a fine-tune of your own): it is then used as ``evaluator`` unchecked.

    Raises:
        CheckpointError: the folder names ANOTHER evaluator (e.g. a ``unieval-sum`` folder
            given for MiniCheck), or its ``config.json`` has a ``model_type`` that the
            evaluator's family does not have; the message names both. Or a file differs
            from the folder's record (missing, changed, a tokenizer file not in its manifest):
            the message names each.
    """
    status, identity = _named_identity(folder, evaluator)
    check_recorded_files(folder)
    return status, identity


def _named_identity(folder: str | os.PathLike, evaluator) -> tuple[str, CheckpointIdentity]:
    """:func:`check_identity` before the files are compared with their record (``verified``
    assumes they will be: :func:`check_identity` raises where they are not)."""
    from ..registry.evaluators import EVALUATORS, evaluator_of_hub_id
    from .manifest import recorded_by

    identity = read_identity(folder)
    where = f"checkpoint folder {str(folder)!r}"
    _check_family(folder, identity.model_type, evaluator)
    if identity.evaluator is not None:
        named = EVALUATORS.get(identity.evaluator)
        same = identity.evaluator == evaluator.name or (
            named is not None and evaluator.hub_id is not None and named.hub_id == evaluator.hub_id)
        if not same:
            raise _identity_error(where, identity, evaluator)
        return "named", identity  # the folder's own label: nothing independent compared
    if identity.hub_id is not None:
        if evaluator.hub_id is not None and identity.hub_id.lower() == evaluator.hub_id.lower():
            recorded = identity.source in ("manifest", "hf-cache") and recorded_by(folder) == identity.source
            return ("verified" if recorded else "named"), identity
        if evaluator_of_hub_id(identity.hub_id) is not None:
            raise _identity_error(where, identity, evaluator)
    return "unverified", identity


def named_by(identity: CheckpointIdentity) -> str:
    """What alone names the model of a folder whose identity is ``named`` (:func:`check_identity`),
    for messages: ``identity named by config.json ("unieval_local_evaluator": "unieval-sum"), not
    verified against a download manifest``."""
    if identity.source == "manifest":
        return (f"identity named by its download manifest (hub_id {identity.hub_id!r}), which lists no file "
                "checksums, so its files were not verified against it")
    if identity.source == "hf-cache":
        return (f"identity named by its Hugging Face cache folder name ({identity.hub_id!r}), but its files are no "
                "links to blobs named by their content hashes, so they were not verified against the hub's")
    what = (f'"{EVALUATOR_KEY}": "{identity.evaluator}"' if identity.evaluator is not None
            else f"_name_or_path {identity.hub_id!r}")
    return f"identity named by config.json ({what}), not verified against a download manifest"


def named_message(name: str, folder: str | os.PathLike, identity: CheckpointIdentity) -> str:
    """The note for a folder used as evaluator ``name`` whose identity is ``named``
    (:func:`check_identity`): what names it, what its scores sign, and (for an evaluator on the hub)
    how to stage a copy that verifies."""
    from ..registry.evaluators import EVALUATORS

    stage = (f" (`unieval-local download --checkpoint {name}` stages the official files, which verify)"
             if name in EVALUATORS and EVALUATORS[name].hub_id else "")
    return (f"checkpoint folder {str(folder)!r} is used as {name} on its own label: {named_by(identity)}; its "
            f"scores sign identity:named{stage}")


def _check_family(folder: str | os.PathLike, model_type: str | None, evaluator) -> None:
    """Raise when ``folder``'s ``config.json`` names a ``model_type`` that ``evaluator``'s family
    does not have (a DeBERTa folder given for a T5 evaluator): the message names the family the
    folder holds, the evaluators of that family, and the family expected.

    Raises:
        CheckpointError: the families differ (None or no ``model_types``: nothing to compare).
    """
    from ..registry.evaluators import EVALUATORS

    if model_type is None or not evaluator.model_types or model_type in evaluator.model_types:
        return
    kin = [e.name for e in EVALUATORS.values() if model_type in e.model_types]
    raise CheckpointError(
        f"checkpoint folder {str(folder)!r} holds a {model_type!r} model (config.json model_type"
        + (f"; the family of {', '.join(kin)}" if kin else "") + f"), but {evaluator.name} is a "
        f"{'/'.join(evaluator.model_types)} model: give the folder of {evaluator.name}"
        + (f" ({evaluator.hub_id})" if evaluator.hub_id else ""))


def _identity_error(where: str, identity: CheckpointIdentity, evaluator) -> CheckpointError:
    return CheckpointError(
        f"{where} is {identity.describe()}, not {evaluator.name}"
        + (f" ({evaluator.hub_id})" if evaluator.hub_id else "")
        + f": its scores would not be {evaluator.name}'s. Give each evaluator its own folder "
        f"(--model {evaluator.name}=DIR, model={{{evaluator.name!r}: DIR}}), or stage it with "
        f"`unieval-local download --checkpoint {evaluator.name}`")


def unverified_message(name: str, folder: str | os.PathLike, identity: CheckpointIdentity,
                       verify: bool = False) -> str:
    """The warning for a folder used as evaluator ``name`` whose identity cannot be checked
    (``verify``: worded for ``unieval-local verify``, which checks it as ``name``)."""
    from ..registry.evaluators import EVALUATORS

    manifest = "its unieval_manifest.json names no hub repository" if (Path(folder) / MANIFEST_NAME).is_file() \
        else "no unieval_manifest.json from `unieval-local download`"
    says = (f"it names {identity.hub_id!r}, which is not a built-in evaluator's hub repository"
            if identity.hub_id else f"nothing in it names the model ({manifest}, not a Hugging Face cache snapshot, "
            f"no \"{EVALUATOR_KEY}\" in config.json)")
    use = (f"checked as {name}, its identity unchecked: {says}; scores made with it would sign identity:unverified"
           if verify else f"used as {name} unchecked: {says}; the signature says identity:unverified")
    stage = (f"Stage it with `unieval-local download --checkpoint {name}`, or, for" if
             name in EVALUATORS and EVALUATORS[name].hub_id else "For")  # g-eval: nothing to download
    return (f"checkpoint folder {str(folder)!r} is {use}. {stage} a model of your own or a generated one, add "
            f"\"{EVALUATOR_KEY}\": \"{name}\" to its config.json (make_test_checkpoint.py --evaluator does)")


def is_offline(offline: bool | None = None) -> bool:
    """True when offline mode is asked for, by argument or environment."""
    if offline:
        return True
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's download manifest (:func:`~unieval_local.models.manifest.read_manifest`)."""
    return read_manifest(folder)


def _local(name: str, folder: Path, origin: str, hub_id: str | None = None) -> ResolvedCheckpoint:
    check_links(folder, name)  # a deleted HF cache blob: named by its file, a checkpoint error (exit 3)
    if not (folder / "config.json").is_file():
        inside = sorted(p.name for p in folder.iterdir() if p.is_dir() and (p / "config.json").is_file()) \
            if folder.is_dir() else []
        hint = ""
        if inside:
            pick = name if name in inside else inside[0]
            hint = (f"; it is a home folder holding {', '.join(inside)}: pass {str(folder / pick)!r} "
                    f"(or set {HOME_ENV}={str(folder)!r} and leave --model out)")
        raise CheckpointNotFoundError(
            f"checkpoint folder {str(folder)!r} (for {name}) has no config.json; "
            "it should hold config.json, the weights and the tokenizer files" + hint
        )
    from ..registry.evaluators import EVALUATORS
    from .backends import BACKENDS

    spec = EVALUATORS.get(name)
    if spec is not None:  # another family's folder: say so, not that its tokenizer is missing
        _check_family(folder, read_identity(folder).model_type, spec)
    needed = () if spec and spec.tokenizer_from else BACKENDS[spec.backend if spec else "t5"].tokenizer_files
    if needed and not any((folder / f).is_file() for f in needed):
        raise CheckpointError(
            f"checkpoint folder {str(folder)!r} (for {name}) has no tokenizer "
            f"({' or '.join(needed)})"
        )
    manifest = _read_manifest(folder) or {}
    revision = manifest.get("revision")
    if revision is None and folder.parent.name == "snapshots":
        revision = folder.name
    return ResolvedCheckpoint(name, folder, origin, manifest.get("hub_id", hub_id), revision)


def _looks_local(text: str) -> bool:
    """Whether a model value that is no folder is a local path rather than a hub id: it cannot be a hub
    id (``owner/name``, :data:`~unieval_local.registry.evaluators.HUB_ID`), starts with ``.``, ``/`` or
    ``~``, or its parent folder exists here (``out/tk`` beside ``out/``: a typo of ``out/tck``, not the
    hub repository ``out/tk``)."""
    if not HUB_ID.match(text) or text.startswith((".", "/", "~")) or os.sep != "/" and os.sep in text:
        return True
    return Path(text).expanduser().parent.is_dir()


def _did_you_mean(folder: Path) -> str:
    """``; did you mean 'out/tck'?`` over the folders beside ``folder`` (difflib, cutoff 0.6), or
    ``; <parent> holds no folder of a close name``; '' when the parent folder does not exist."""
    import difflib

    parent = folder.parent
    try:
        siblings = sorted(p.name for p in parent.iterdir() if p.is_dir())
    except OSError:
        return ""
    close = difflib.get_close_matches(folder.name, siblings, n=3, cutoff=0.6)
    if close:
        return "; did you mean " + " or ".join(repr(str(parent / c)) for c in close) + "?"
    return f"; {str(parent)!r} holds no folder of a close name"


def _from_hf_cache(hub_id: str, revision: str | None) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = Path(snapshot_download(hub_id, revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        return None
    return path if (path / "config.json").is_file() else None


def _test_layout(name: str) -> str:
    """The make_test_checkpoint.py layout of evaluator ``name``'s backend (``factcg`` for FactCG's
    one-text DeBERTa, the first of ``model_types`` for a causal-lm judge: ``granite``)."""
    from ..registry.evaluators import EVALUATORS

    spec = EVALUATORS.get(name)
    if spec is not None and "mt5" in spec.model_types:
        return "mt5"
    if spec is not None and spec.prompt_format.name == "factcg":
        return "factcg"
    if spec is not None and spec.backend == "causal-lm":
        return spec.model_types[0]
    return {"seq-classifier": "deberta-nli", "hhem": "hhem"}.get(spec.backend if spec else "t5", "v1.1")


def _staged_by(name: str) -> str:
    """The checkpoint name whose ``download`` stages ``name``: itself when it is one; the evaluator whose
    foundation it is (``google/flan-t5-base`` -> ``hhem-2.1-open``, which stages it beside itself);
    else ``unieval-sum``."""
    from ..registry.evaluators import EVALUATORS

    if name in CHECKPOINTS:
        return name
    for spec in EVALUATORS.values():
        if spec.tokenizer_from and name.lower() in (spec.tokenizer_from.lower(), spec.tokenizer_from.split("/")[-1]):
            return spec.name
    return "unieval-sum"


def _staging_help(name: str) -> str:
    return (
        "To stage it for an offline machine, on a connected machine run\n"
        f"    unieval-local download --checkpoint {name} --to DIR\n"
        "copy DIR to this machine and set UNIEVAL_LOCAL_HOME=DIR (or pass --model DIR/"
        f"{name}); check it with `unieval-local verify DIR`.\n"
        "To try unieval-local without the weights, generate a stand-in checkpoint from a clone of the "
        "repository (random weights: the numbers mean nothing): python scripts/make_test_checkpoint.py "
        f"out/home/{name} --layout {_test_layout(name)} --evaluator {name}"
        + (" --answers 1,0" if name == "minicheck-flan-t5-large" else "")
        + f", then --model out/home/{name} (or UNIEVAL_LOCAL_HOME=out/home)."
    )


def resolve_checkpoint(
    name: str, model: ModelSpec = None, *, offline: bool | None = None, revision: str | None = None
) -> ResolvedCheckpoint:
    """Find (or, when allowed, fetch) the checkpoint ``name`` for a task.

    Args:
        name: checkpoint name from the registry, e.g. ``unieval-sum``.
        model: ``None``; a folder or hub id used for every task; or a mapping
            from checkpoint name to folder or hub id.
        offline: force offline mode (also set by ``HF_HUB_OFFLINE=1``).
        revision: hub revision to use when fetching from the hub.

    Returns:
        A :class:`ResolvedCheckpoint` whose ``path`` holds the files.

    Raises:
        CheckpointNotFoundError: nothing found; the message lists every place
            looked at and how to stage the weights on a connected machine.
        CheckpointError: the folder found holds a link to nothing (a deleted Hugging Face cache blob:
            :func:`~unieval_local.models.manifest.check_links` names the file and the download line), or
            no tokenizer file.
    """
    looked: list[str] = []
    explicit: str | os.PathLike | None
    if isinstance(model, Mapping):
        explicit = model.get(name)
        if explicit is None:
            looked.append(f"the model mapping (no entry {name!r}; it has {sorted(model)})")
    else:
        explicit = model
    hub_id = CHECKPOINTS.get(name) or (name if HUB_ID.match(name) else None)
    if explicit is not None:
        text = os.fspath(explicit)
        folder = Path(text).expanduser()
        if folder.is_dir():
            return _local(name, folder, "explicit")
        if _looks_local(text):
            raise CheckpointNotFoundError(f"checkpoint folder {text!r} does not exist" + _did_you_mean(folder))
        hub_id = text
        looked.append(f"a local folder named {text!r} (none)")
    else:
        home = os.environ.get(HOME_ENV)
        if home:
            folder = Path(home).expanduser() / name
            if folder.is_dir():  # the hub id comes from its manifest, if any: the folder may hold anything
                return _local(name, folder, "home")
            looked.append(f"${HOME_ENV}/{name} = {str(folder)!r} (missing)")
        else:
            looked.append(f"${HOME_ENV} (not set)")
    if hub_id is None:
        from ..registry.evaluators import EVALUATORS

        spec = EVALUATORS.get(name)
        how = f"Give its folder with --model {name}=DIR" if spec is not None else "Pass --model <folder>"
        if spec is not None and spec.backend == "causal-lm":
            how += " (a local instruct model: Llama, Qwen2 or Granite layout; docs/evaluators.md)"
        raise CheckpointNotFoundError(f"no checkpoint for {name!r}: looked at " + "; ".join(looked) + f". {how}.")
    cached = _from_hf_cache(hub_id, revision)
    if cached is not None:
        return _local(name, cached, "hf-cache", hub_id)
    looked.append(f"the Hugging Face cache for {hub_id!r} (not there)")
    if is_offline(offline):
        looked.append("the hub (skipped: offline mode is set)")
    else:
        try:
            from .download import fetch_to_hf_cache

            path = fetch_to_hf_cache(hub_id, revision=revision)
            return _local(name, path, "hub", hub_id)
        except Exception as exc:  # network errors come in many types
            looked.append(f"the hub ({type(exc).__name__}: {exc})")
    raise CheckpointNotFoundError(
        f"checkpoint {name!r} ({hub_id}) not found. Looked at: " + "; ".join(looked) + ".\n"
        + _staging_help(_staged_by(name))
    )


#: What enters the content fingerprint: configs, weights, tokenizers and a chat template file
#: (``chat_template.jinja``: it changes the prompts of a causal-lm judge).
_FINGERPRINT_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".jinja")


def fingerprint_checkpoint(folder: str | os.PathLike, file_hash=None) -> str:
    """Content fingerprint of a checkpoint folder: SHA-256 over (name, SHA-256) of its
    config, weights and tokenizer files (not its path).

    A file's SHA-256 is taken from the download manifest only while the file is the one hashed
    for it: same size, ``st_mtime_ns`` and ``st_ino`` as the manifest records (written at
    ``unieval-local download`` and by ``make_test_checkpoint.py``, refreshed by ``unieval-local
    verify`` after it hashes the files: :func:`~unieval_local.models.manifest.stat_matches`).
    Any other file (replaced by another of the same size, touched, copied from another machine,
    or listed by a manifest without the stat fields) is hashed with ``file_hash``: by default
    :func:`~unieval_local.hashing.memo_sha256_file`, remembered by (resolved path, size, mtime,
    inode) in the process and in a JSON file under ``~/.cache/unieval-local/`` so that a folder
    is hashed once per change, not at every start; the score cache passes its own memo. SHA-256
    costs about 0.7 s per GB (measured on this project's build machine, 1 GiB from the page
    cache), 2-3 s for UniEval's 3.1 GB. So other weights under the same folder and manifest get
    another fingerprint, and the score cache never answers for them.

    Args:
        folder: a checkpoint folder.
        file_hash: ``Path -> hex SHA-256`` for the files the manifest does not vouch for.

    Returns:
        The hex SHA-256 fingerprint.

    Raises:
        OSError: a file cannot be read.
    """
    folder = Path(folder)
    file_hash = file_hash or memo_sha256_file
    manifest = (_read_manifest(folder) or {}).get("files", {})
    manifest = manifest if isinstance(manifest, dict) else {}
    files = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix in _FINGERPRINT_SUFFIXES and p.name != MANIFEST_NAME)
    parts = []
    for p in files:
        entry = manifest.get(p.name)
        digest = entry.get("sha256") if stat_matches(entry, p.stat()) else None
        if not isinstance(digest, str):
            digest = file_hash(p)
            recorded = entry.get("sha256") if isinstance(entry, dict) else None
            if isinstance(recorded, str) and recorded != digest and p.suffix in WEIGHT_SUFFIXES:
                _warn_replaced(folder, p.name, digest)
        parts.append(f"{p.name}\0{digest}\n")
    return sha256_text("".join(parts))


_REPLACED_WARNED: set[tuple[str, str, str]] = set()


def _warn_replaced(folder: Path, name: str, digest: str) -> None:
    """Warn once per (folder, file, content) that a weight file is not the one its manifest records
    (a fine-tune written over a download, a damaged copy): the scores are still signed with the
    file's own content fingerprint, so the cache never answers for the recorded weights."""
    key = (str(folder), name, digest)
    if key in _REPLACED_WARNED:
        return
    _REPLACED_WARNED.add(key)
    warnings.warn(f"checkpoint {str(folder)!r}: {name} differs from the SHA-256 its {MANIFEST_NAME} records: these "
                  "are not the weights downloaded or verified there (scores are signed with the new content "
                  "fingerprint). Stage the checkpoint again (unieval-local download), or, for weights of your own "
                  f"written over it, delete its {MANIFEST_NAME}", UserWarning,
                  stacklevel=3)


# --------------------------------------------------------------------------- download


# --------------------------------------------------------------------------- verify


def _memo_sha256(path: Path) -> str:
    """:func:`~unieval_local.hashing.memo_sha256_file` (kept for callers of the old name)."""
    return memo_sha256_file(path)
