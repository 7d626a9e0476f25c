"""What a checkpoint folder records about its own files, and whether they are still those files.

Two records exist:

* the download manifest, ``unieval_manifest.json`` (:data:`~unieval_local.models.files.MANIFEST_NAME`),
  written by ``unieval-local download`` (:func:`~unieval_local.models.download.download_checkpoint`)
  and by ``scripts/make_test_checkpoint.py``: ``{"checkpoint", "hub_id", "revision", "files":
  {name: {"sha256", "size", "mtime_ns", "inode", "ctime_ns"}}, "tokenizer_sha256", "unieval_local_version"}``
  (:func:`manifest_entries`, :func:`write_manifest`). ``mtime_ns``, ``inode`` and ``ctime_ns`` are the
  file's ``st_mtime_ns``, ``st_ino`` and ``st_ctime_ns`` when it was hashed (at download, by ``unieval-local verify``:
  :func:`record_verified_stats`): the content fingerprint trusts a recorded ``sha256`` only while
  the file still has that size, mtime, inode and ctime (:func:`stat_matches`), else hashes the file
  (:func:`~unieval_local.hashing.memo_sha256_file`). A copied folder (another machine, ``cp``
  without ``-p``) or a manifest of an older version (no stat) is therefore hashed once;
* a Hugging Face cache snapshot (``models--owner--name/snapshots/<revision>/``): each file is a link
  to ``blobs/<etag>``, and the etag of a hub file is its content hash (SHA-256 for files stored with
  Git LFS, the weights and usually ``spiece.model``; the git blob SHA-1 for the others).

:func:`check_recorded_files` compares the folder with the record it has: a file that is missing or
changed, and a tokenizer file present in the folder but not in a manifest that lists the others
(transformers prefers ``tokenizer.json`` to ``spiece.model``: a file dropped in beside them is the
tokenizer that runs), are refused with a :class:`~unieval_local.errors.CheckpointError` naming each
file. Small files (config, tokenizer) are hashed every time (memoised per process on path, size, inode and
modification time); weight files are compared by size only unless ``hash_weights`` (``unieval-local
verify`` hashes them: SHA-256 costs about 0.7 s per GB on this project's build machine, 2-3 s for
UniEval's 3.1 GB, too slow for every load). So an in-place edit of a weight file that keeps its size is
caught by ``verify``, not at load; it changes the content fingerprint, though (the score cache never
answers for other weights). No torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..atomic import replace_atomically
from ..errors import CheckpointError
from ..hashing import sha256_file, sha256_text
from .files import MANIFEST_NAME, TOKENIZER_FILES

__all__ = ["STAT_FIELDS", "WEIGHT_SUFFIXES", "check_links", "check_recorded_files", "dangling_links", "file_entry",
           "git_blob_sha1",
           "manifest_entries", "memo_sha256", "read_manifest", "record_verified_stats", "recorded_by", "stat_matches",
           "tokenizer_fingerprint", "write_manifest"]

#: The stat fields a manifest entry records beside ``sha256`` (:func:`stat_matches`).
STAT_FIELDS = ("size", "mtime_ns", "inode", "ctime_ns")

#: Suffixes of weight files (compared by size at load, hashed by ``verify``).
WEIGHT_SUFFIXES = (".safetensors", ".bin")

_FILE_HASHES: dict[tuple[str, str, int, int, int], str] = {}


def memo_sha256(path: Path, kind: str = "sha256") -> str:
    """:func:`~unieval_local.hashing.sha256_file` (``kind="sha1-blob"``: :func:`git_blob_sha1`) of
    ``path``, memoised per process on (kind, resolved path, size, mtime, inode).

    Raises:
        OSError: the file cannot be read.
    """
    st = path.stat()
    key = (kind, str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _FILE_HASHES:
        _FILE_HASHES[key] = sha256_file(path) if kind == "sha256" else git_blob_sha1(path)
    return _FILE_HASHES[key]


def git_blob_sha1(path: Path) -> str:
    """The git blob id of a file (``sha1(b"blob <size>\\0" + content)``): the etag the Hugging Face
    hub gives a file not stored with Git LFS, and so its blob's name in the HF cache."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The folder's download manifest as a dict, or None (absent, unreadable or not an object)."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def tokenizer_fingerprint(entries: dict[str, dict[str, Any]]) -> str | None:
    """SHA-256 over ``(name, sha256)`` of the tokenizer files among manifest ``entries`` (None when
    there is none): one value that changes when any tokenizer file changes, appears or goes."""
    names = sorted(n for n in entries if n in TOKENIZER_FILES)
    if not names:
        return None
    return sha256_text("".join(f"{n}\0{entries[n]['sha256']}\n" for n in names))


def _stat_fields(st: os.stat_result) -> dict[str, int]:
    """The stat a manifest records of a verified file: size, mtime, inode and ctime (no user-space
    call sets a ctime: writing new content and restoring the old mtime still changes it)."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino, "ctime_ns": st.st_ctime_ns}


def file_entry(path: str | os.PathLike) -> dict[str, Any]:
    """A manifest entry for one file: ``{"sha256", "size", "mtime_ns", "inode", "ctime_ns"}``, the stat taken
    before hashing (SHA-256 costs about 0.7 s per GB: :mod:`unieval_local.hashing`).

    Raises:
        OSError: the file cannot be read.
    """
    st = os.stat(path)
    return {"sha256": sha256_file(path), **_stat_fields(st)}


def stat_matches(entry: Any, st: os.stat_result) -> bool:
    """Whether manifest ``entry`` recorded exactly this stat (size, ``st_mtime_ns``, ``st_ino``, ``st_ctime_ns``):
    only then is its ``sha256`` taken for the file's content. An entry without the stat fields (a
    manifest of an older version), or a file replaced, touched or copied since, gives False."""
    return isinstance(entry, dict) and all(
        isinstance(entry.get(k), int) and entry.get(k) == v for k, v in _stat_fields(st).items())


def manifest_entries(folder: str | os.PathLike, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """``{name: {"sha256", "size", "mtime_ns", "inode", "ctime_ns"}}`` (:func:`file_entry`) of the files
    ``names`` of ``folder`` (default: every file at its top level but the manifest), as the
    manifest records them.

    Raises:
        OSError: a file cannot be read.
    """
    folder = Path(folder)
    names = names if names is not None else sorted(p.name for p in folder.iterdir()
                                                   if p.is_file() and p.name != MANIFEST_NAME)
    return {n: file_entry(folder / n) for n in names}


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` (:func:`~unieval_local.atomic.replace_atomically`: a
    rewrite keeps the file's permissions, a new file gets the umask's, readable by a shared
    home's other users).

    Raises:
        OSError: the folder is not writable (nothing is left behind).
    """
    replace_atomically(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def write_manifest(folder: str | os.PathLike, entries: dict[str, dict[str, Any]], *, checkpoint: str,
                   hub_id: str | None, revision: str | None) -> Path:
    """Write ``folder``'s manifest (module docstring) from its files' ``entries``
    (:func:`manifest_entries` or :func:`file_entry`, stat included), atomically.

    Returns:
        The manifest's path.

    Raises:
        OSError: the folder is not writable.
    """
    from .._version import __version__

    manifest = {"checkpoint": checkpoint, "hub_id": hub_id, "revision": revision, "files": entries,
                "tokenizer_sha256": tokenizer_fingerprint(entries), "unieval_local_version": __version__}
    path = Path(folder) / MANIFEST_NAME
    _write_json_atomic(path, manifest)
    return path


def record_verified_stats(folder: str | os.PathLike, stats: dict[str, os.stat_result]) -> list[str]:
    """Record in ``folder``'s manifest the stat of files whose SHA-256 was just checked against it
    (``unieval-local verify``), so that the content fingerprint trusts their recorded digest until
    they change (:func:`stat_matches`).

    Args:
        folder: a checkpoint folder with a manifest.
        stats: ``{file name: os.stat_result}`` taken before the file was hashed; a file whose stat
            differs now (changed meanwhile), or whose name or size the manifest does not record
            as such, is left out.

    Returns:
        The names recorded ([] when nothing changed: the manifest is then not rewritten).

    Raises:
        OSError: the manifest cannot be rewritten (a read-only folder: ``verify`` says so and goes on).
    """
    folder = Path(folder)
    manifest = read_manifest(folder)
    files = manifest.get("files") if manifest else None
    if not isinstance(files, dict):
        return []
    recorded = []
    for name, before in stats.items():
        entry = files.get(name)
        try:
            now = (folder / name).stat()
        except OSError:
            continue
        if not isinstance(entry, dict) or entry.get("size") != now.st_size or \
                _stat_fields(now) != _stat_fields(before):
            continue
        if not stat_matches(entry, now):
            entry.update(_stat_fields(now))
            recorded.append(name)
    if recorded:
        _write_json_atomic(folder / MANIFEST_NAME, manifest)
    return recorded


def dangling_links(folder: str | os.PathLike) -> list[str]:
    """The files at ``folder``'s top level that are links to nothing (an HF cache snapshot whose blob
    was deleted, a copied or moved home of links), each as ``"<name> is a link to a missing blob
    <target>"`` (a target in a ``blobs`` folder) or ``"... to a missing file <target>"``, the target
    as the link records it (``../../blobs/<etag>``). [] when every link resolves. Never raises."""
    folder = Path(folder)
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    out = []
    for p in entries:
        if p.is_symlink() and not p.exists():
            try:
                target = os.readlink(p)
            except OSError:
                target = "?"
            what = "blob" if Path(target).parent.name == "blobs" else "file"
            out.append(f"{p.name} is a link to a missing {what} {target}")
    return out


def check_links(folder: str | os.PathLike, name: str | None = None) -> None:
    """Refuse a checkpoint folder holding links to nothing (:func:`dangling_links`), naming each file
    (not its blob) and how to get it back.

    Args:
        folder: a checkpoint folder.
        name: the checkpoint name it is for (``unieval-sum``), for the download line; None: read
            from the folder's HF cache path (``models--owner--name``) when it is a built-in's.

    Raises:
        CheckpointError: at least one dangling link; e.g. ``checkpoint folder '...': tokenizer.json is a
            link to a missing blob ../../blobs/00e5...; download the checkpoint again: unieval-local
            download --checkpoint unieval-sum --to DIR (or huggingface-cli download MingZhong/unieval-sum to
            refill the Hugging Face cache)``.
    """
    from ..registry.tasks import CHECKPOINTS

    broken = dangling_links(folder)
    if not broken:
        return
    folder = Path(folder)
    repo = folder.parent.parent.name if folder.parent.name == "snapshots" else ""
    owner, sep, rest = repo[len("models--"):].partition("--") if repo.startswith("models--") else ("", "", "")
    hub_id = f"{owner}/{rest}" if sep else None
    if name not in CHECKPOINTS:
        name = next((n for n, h in CHECKPOINTS.items() if hub_id and h.lower() == hub_id.lower()),
                    folder.name if folder.name in CHECKPOINTS else None)
    if name or hub_id:
        how = f"download the checkpoint again: unieval-local download --checkpoint {name} --to DIR" if name else \
            "download the checkpoint again"
        if hub_id:
            how += f" (or huggingface-cli download {hub_id} to refill the Hugging Face cache)"
    else:  # a folder of one's own (a generated stand-in, a fine-tune): nothing to download it from
        how = "restore what the link points to, or replace the link with the file itself"
    raise CheckpointError(f"checkpoint folder {str(folder)!r}: {'; '.join(broken)}; {how}")


def _snapshot_blobs(folder: Path) -> dict[str, tuple[Path, str]]:
    """``{file name: (blob path, etag)}`` of the files of an HF cache snapshot that link to a blob
    named by a content hash ({} when the folder is no snapshot)."""
    if folder.parent.name != "snapshots" or not folder.parent.parent.name.startswith("models--"):
        return {}
    out = {}
    for p in folder.iterdir():
        if not p.is_symlink():
            continue
        target = Path(os.path.realpath(p))
        etag = target.name
        if target.parent.name == "blobs" and len(etag) in (40, 64) and all(c in "0123456789abcdef" for c in etag):
            out[p.name] = (target, etag)
    return out


def _differs(name: str, path: Path, digest: str, size: int | None, hash_weights: bool) -> str | None:
    """Why file ``name`` (at ``path``) is not the recorded one (None: it is, as far as checked)."""
    if size is not None and path.stat().st_size != size:
        return f"{name} (size {path.stat().st_size:,} bytes, recorded {size:,})"
    if Path(name).suffix in WEIGHT_SUFFIXES and not hash_weights:
        return None
    kind = "sha1-blob" if len(digest) == 40 else "sha256"
    return None if memo_sha256(path, kind) == digest else f"{name} (content hash differs)"


def recorded_by(folder: str | os.PathLike) -> str:
    """What records ``folder``'s files, without comparing them (:func:`check_recorded_files` compares):
    ``manifest`` (a download manifest listing at least one file), ``hf-cache`` (an HF cache snapshot
    with at least one file linked to a blob named by its content hash), or ``none``. Never raises."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    files = manifest.get("files") if manifest else None
    if isinstance(files, dict) and files:
        return "manifest"
    try:
        return "hf-cache" if _snapshot_blobs(folder) else "none"
    except OSError:
        return "none"


def check_recorded_files(folder: str | os.PathLike, *, hash_weights: bool = False) -> str:
    """Whether ``folder``'s files are those its record names (module docstring).

    Args:
        folder: a checkpoint folder.
        hash_weights: hash weight files too (``verify``); else they are compared by size.

    Returns:
        How they were checked: ``manifest`` (every listed file, and no unlisted tokenizer file),
        ``hf-cache`` (every file linked to a blob named by its hash), or ``none``: nothing records
        them (no manifest, or one listing no files; not an HF cache snapshot), so nothing was checked.

    Raises:
        CheckpointError: a file is a link to nothing (:func:`check_links`: a deleted HF cache blob), a
            recorded file is missing or changed, or a tokenizer file is in the folder
            but not in its manifest; the message names every such file and the fix.
    """
    folder = Path(folder)
    check_links(folder)
    manifest = read_manifest(folder)
    files = manifest.get("files") if manifest else None
    if isinstance(files, dict) and files:
        missing = [n for n in files if not (folder / n).is_file()]
        changed = [why for n, meta in files.items() if (folder / n).is_file() and isinstance(meta, dict)
                   for why in [_differs(n, folder / n, str(meta.get("sha256")), meta.get("size"), hash_weights)] if why]
        unlisted = [n for n in TOKENIZER_FILES if (folder / n).is_file() and n not in files]
        how, fix = f"its download manifest ({MANIFEST_NAME})", (
            f"stage it again (unieval-local download --checkpoint {manifest['checkpoint']})" if manifest.get("hub_id")
            and manifest.get("checkpoint") else "restore the files it recorded, or build or stage the folder again")
    else:
        blobs = _snapshot_blobs(folder)
        if not blobs:
            return "none"
        missing, unlisted = [], []
        changed = [why for n, (blob, etag) in sorted(blobs.items())
                   for why in [_differs(n, blob, etag, None, hash_weights)] if why]
        how, fix = "the names of its Hugging Face cache blobs (their content hashes)", (
            "delete the snapshot and fetch it again (huggingface-cli download, or unieval-local download)")
    problems = ([f"changed: {', '.join(changed)}"] if changed else []) + (
        [f"missing: {', '.join(missing)}"] if missing else []) + (
        [f"not recorded (a tokenizer file added since): {', '.join(unlisted)}"] if unlisted else [])
    if problems:
        raise CheckpointError(
            f"checkpoint folder {str(folder)!r}: its files are not those recorded in {how} ({'; '.join(problems)}); "
            "a changed or foreign tokenizer, config or weight file gives other scores under the same name: "
            f"{fix}, or put the original files back")
    return "manifest" if manifest and files else "hf-cache"
