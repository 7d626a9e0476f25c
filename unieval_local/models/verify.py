"""Offline checks of staged checkpoints (``unieval-local verify``): files present, SHA-256 as in
the manifest, recorded identity, config and tokenizer load, answer tokens exist, finite
weights, no missing shard."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CheckpointError
from ..hashing import sha256_file
from ..registry.tasks import CHECKPOINTS
from .checkpoints import (HOME_ENV, MANIFEST_NAME, _named_identity, _read_manifest, named_by, read_identity,
                          unverified_message)
from .files import TOKENIZER_FILES
from .manifest import check_links, check_recorded_files, manifest_entries, record_verified_stats, tokenizer_fingerprint
from .tokenizer_identity import check_tokenizer_fits, describe_tokenizer

__all__ = ["VerifyReport", "verify_checkpoint"]


@dataclass
class VerifyReport:
    """The outcome of :func:`verify_checkpoint` for one folder."""

    folder: Path
    ok: bool = True
    messages: list[str] = field(default_factory=list)
    #: what the folder's files were compared with: ``manifest`` (its download manifest's SHA-256),
    #: ``hf-cache`` (the content hashes its HF cache blobs are named by), or ``nothing`` (no record:
    #: config, tokenizer and weights were loaded and checked, but no checksum was compared).
    compared: str = "nothing"
    #: the evaluator whose foundation model the folder holds (``flan-t5-base`` staged beside
    #: ``hhem-2.1-open`` by ``download``), else None.
    foundation_of: str | None = None

    def headline(self) -> str:
        """``<folder>: OK`` / ``FAILED``, with ``, no checksums compared (...)`` when nothing recorded them."""
        state = "OK" if self.ok else "FAILED"
        if self.ok and self.compared == "nothing":
            state += (f", no checksums compared (no {MANIFEST_NAME}, not a Hugging Face cache snapshot): the files "
                      "load and fit, but nothing says they are the published ones")
        return f"{self.folder}: {state}"

    def fail(self, message: str) -> None:
        self.ok = False
        self.messages.append("FAIL " + message)

    def info(self, message: str) -> None:
        self.messages.append("ok   " + message)

    def warn(self, message: str) -> None:
        self.messages.append("WARN " + message)


def verify_checkpoint(folder: str | os.PathLike, evaluator: str | None = None) -> list[VerifyReport]:
    """Check staged checkpoints offline.

    ``folder`` is one checkpoint folder or a home folder holding several
    (``unieval-sum/`` ...). For each checkpoint: manifest files present with
    matching SHA-256 (a folder without a manifest only gets a warning); every
    weight file opens (a truncated or corrupt file fails); config and tokenizer
    load; the tokenizer's ids equal SentencePiece's encoding with ``spiece.model``
    (:func:`~unieval_local.models.t5.spm_check.check_tokenizer`); the evaluator's answer words
    (Yes/No for UniEval, 1/0 for MiniCheck and SEAHORSE) have distinct first tokens inside the
    vocabulary; and
    the model loads with every tensor its config needs, none missing, unexpected
    or of another shape (:func:`~unieval_local.models.t5.runner.load_model`). In a home
    folder, each sub-folder must be named as a checkpoint (``unieval-sum``,
    ``unieval-dialog``, ``unieval-fact``): ``$UNIEVAL_LOCAL_HOME`` is searched by
    those names, so a misnamed folder would never be found.

    A folder named after, or recording the hub id of, an evaluator's foundation model (``flan-t5-base``,
    which ``download --checkpoint hhem-2.1-open`` stages beside ``hhem-2.1-open/``) is checked as that
    foundation: its files against their record, config and tokenizer load (no answer words: it is no
    evaluator). A folder named after one evaluator (``unieval-sum/``) whose record names another
    (``MingZhong/unieval-dialog``, ``"unieval_local_evaluator": "unieval-dialog"``) fails: lookups by
    name would score with the other's weights. A manifest that is not valid JSON fails (nothing can be
    compared); a folder with no record at all passes with ``compared == "nothing"``, said in its
    :meth:`VerifyReport.headline`.

    The evaluator of a folder is ``evaluator`` when given, else the one the folder itself
    names (:func:`read_identity`), else the one its folder name names
    (:data:`~unieval_local.registry.evaluators.EVALUATORS`), else UniEval's (Yes/No answers). The
    folder's recorded identity is checked against it (:func:`check_identity`: another
    evaluator's model fails, an unnamed one warns), every stored tensor must be finite, and a
    weight shard listed in the index but absent is reported missing.

    Returns:
        One :class:`VerifyReport` per checkpoint folder (``ok`` False on any failure).
    """
    import difflib

    root = Path(folder).expanduser()
    if (root / "config.json").is_file() or (root / MANIFEST_NAME).is_file():
        return [_verify_one(root, evaluator)]
    targets = sorted(p for p in root.iterdir() if p.is_dir() and
                     ((p / MANIFEST_NAME).is_file() or (p / "config.json").is_file())) if root.is_dir() else []
    if not targets:
        report = VerifyReport(root)
        if not root.exists():  # a typo of a folder: as score says it (did-you-mean over the folders beside it)
            from .checkpoints import _did_you_mean

            report.fail(f"{root} does not exist{_did_you_mean(root)}")
        else:
            report.fail(f"{root} is not a checkpoint folder and holds none")
        return [report]
    reports = []
    for t in targets:
        report = _verify_one(t, evaluator)
        if report.foundation_of is not None:  # flan-t5-base beside hhem-2.1-open: found by the folder beside it
            reports.append(report)
            continue
        if t.name not in CHECKPOINTS:
            close = difflib.get_close_matches(t.name, list(CHECKPOINTS), n=1, cutoff=0.6)
            report.fail(f"folder name {t.name!r} is not a checkpoint name, so ${HOME_ENV} lookups never find it; "
                        + (f"rename it to {close[0]!r}" if close else f"name it one of {', '.join(CHECKPOINTS)}")
                        + f" (or pass it with --model <checkpoint name>={t})")
        reports.append(report)
    return reports


def manifest_json_error(folder: str | os.PathLike) -> str | None:
    """Why ``folder``'s ``unieval_manifest.json`` cannot be read as a manifest (None: absent or a JSON
    object), e.g. ``unieval_manifest.json is not valid JSON (line 3): Expecting ',' delimiter; verify
    cannot compare checksums: stage the checkpoint again ...``. Loading treats such a manifest as
    absent (no record); ``verify`` fails on it."""
    import json

    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return None
    fix = ("verify cannot compare checksums: stage the checkpoint again (unieval-local download), or, for "
           f"weights of your own, delete {MANIFEST_NAME}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        return f"{MANIFEST_NAME} is not valid JSON (line {exc.lineno}): {exc.msg}; {fix}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"{MANIFEST_NAME} cannot be read ({type(exc).__name__}: {exc}); {fix}"
    if not isinstance(data, dict):
        return f"{MANIFEST_NAME} is not a JSON object (a {type(data).__name__}); {fix}"
    return None


def _foundation_of(folder: Path, hub_id: str | None):
    """The evaluator whose foundation model ``folder`` holds (its recorded hub id is an evaluator's
    ``tokenizer_from``, or its name is that hub id's last part: ``flan-t5-base``), else None."""
    from ..registry.evaluators import EVALUATORS

    for spec in EVALUATORS.values():
        base = spec.tokenizer_from
        if base and ((hub_id or "").lower() == base.lower() or (not hub_id and folder.name == base.split("/")[-1])):
            return spec
    return None


def _verify_foundation(report: VerifyReport, folder: Path, spec) -> VerifyReport:
    """``folder`` as the foundation of ``spec`` (HHEM's flan-t5-base): its files against their record,
    config and tokenizer load; the evaluator's own folder checks the model with it."""
    report.foundation_of = spec.name
    report.info(f"the foundation model of {spec.name} ({spec.tokenizer_from}: its tokenizer and T5 config), "
                f"as `unieval-local download --checkpoint {spec.name}` stages it beside {spec.name}/")
    _verify_checksums(report, folder)
    try:
        from transformers import AutoConfig, AutoTokenizer

        config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        report.info(f"config loads ({config.model_type}, vocab_size={config.vocab_size})")
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        report.info(f"tokenizer loads ({type(tokenizer).__name__})")
    except Exception as exc:
        from .stored import explain_tokenizer_failure

        report.fail(f"loading failed: {explain_tokenizer_failure(folder, exc)}")
    return report


def _verify_checksums(report: VerifyReport, folder: Path) -> dict | None:
    """Every file the manifest lists against its SHA-256 (the stat of matched ones recorded:
    :func:`_record_stats`), then :func:`_verify_record`. Returns the manifest (None: absent or not
    readable as one, said already)."""
    manifest = _read_manifest(folder)
    if manifest is None and not manifest_json_error(folder):
        report.warn(f"no {MANIFEST_NAME} (written by `unieval-local download`): checksums not checked")
    elif manifest is not None:
        report.compared = "manifest"
        matched = {}
        for fname, meta in manifest.get("files", {}).items():
            path = folder / fname
            if not path.is_file():
                report.fail(f"{fname} is missing")
                continue
            before = path.stat()
            if sha256_file(path) != meta.get("sha256"):
                report.fail(f"{fname} checksum differs from the manifest: not the file downloaded or verified "
                            "there (a damaged copy, or other weights written over it); stage the checkpoint again "
                            "(unieval-local download), or, for weights of your own, delete its unieval_manifest.json")
            else:
                report.info(f"{fname} sha256 matches")
                matched[fname] = before
        if report.ok and matched:
            _record_stats(report, folder, matched)
    _verify_record(report, folder, manifest)
    return manifest


def _verify_record(report: VerifyReport, folder: Path, manifest: dict | None) -> None:
    """What the per-file checksums do not say: a tokenizer file in the folder but not in its
    manifest, the manifest's tokenizer fingerprint, an HF cache snapshot's blobs (weights hashed)."""
    if report.ok:
        try:
            how = check_recorded_files(folder, hash_weights=True)
        except CheckpointError as exc:
            report.fail(str(exc))
            return
        if how == "hf-cache":
            report.compared = "hf-cache"
            report.info("every file matches the content hash its Hugging Face cache blob is named by")
    recorded = (manifest or {}).get("tokenizer_sha256")
    if recorded:
        names = [n for n in TOKENIZER_FILES if (folder / n).is_file()]
        if tokenizer_fingerprint(manifest_entries(folder, names)) == recorded:
            report.info(f"tokenizer fingerprint matches the manifest ({', '.join(names)})")
        else:
            report.fail(f"the tokenizer files ({', '.join(names)}) are not those the manifest's tokenizer "
                        "fingerprint records: a tokenizer of another model; stage the checkpoint again")


def _record_stats(report: VerifyReport, folder: Path, matched: dict) -> None:
    """After every listed file matched its SHA-256: record their stat in the manifest
    (:func:`~unieval_local.models.manifest.record_verified_stats`), so that the content fingerprint
    takes the recorded digests instead of hashing the files again. A read-only folder is said, not failed."""
    try:
        recorded = record_verified_stats(folder, matched)
    except OSError as exc:
        report.info(f"the files' stat is not recorded in {MANIFEST_NAME} ({type(exc).__name__}: {exc}): the "
                    "content fingerprint hashes them once per change (remembered in ~/.cache/unieval-local)")
        return
    if recorded:
        report.info(f"recorded the stat of {len(recorded)} verified file(s) in {MANIFEST_NAME} (the content "
                    "fingerprint trusts their digests until they change)")


def _verify_fit(report: VerifyReport, folder: Path, tokenizer, config, rows: int) -> None:
    """The loaded tokenizer against its model (:func:`~unieval_local.models.tokenizer_identity.check_tokenizer_fits`)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            doubt = check_tokenizer_fits(tokenizer, config, rows=rows, where=str(folder))
    except CheckpointError as exc:
        report.fail(str(exc))
        return
    if doubt:
        report.warn(doubt)
    else:
        report.info(f"tokenizer {describe_tokenizer(tokenizer)} fits the model (special ids as its config says, "
                    f"{len(tokenizer):,} tokens within {rows:,} embedding rows)")


def _verify_one(folder: Path, evaluator: str | None = None) -> VerifyReport:
    from ..registry.evaluators import EVALUATORS, answer_ids, get_evaluator
    from .t5.loading import load_model, non_finite_tensors, stored_weight_names, weight_files
    from .t5.spm_check import check_tokenizer

    report = VerifyReport(folder)
    try:
        check_links(folder)
    except CheckpointError as exc:  # nothing else can be read right: one line naming each file
        report.fail(str(exc))
        return report
    bad_manifest = manifest_json_error(folder)
    if bad_manifest:
        report.fail(bad_manifest)
    if evaluator:
        spec = get_evaluator(evaluator)
    else:  # the evaluator the folder names, else the one its name names, else UniEval's
        named = read_identity(folder)
        from ..registry.evaluators import evaluator_of_hub_id

        base = _foundation_of(folder, named.hub_id)
        if base is not None:
            return _verify_foundation(report, folder, base)
        own = evaluator_of_hub_id(named.hub_id) or EVALUATORS.get(named.evaluator or "")
        spec = own or EVALUATORS.get(folder.name, EVALUATORS["unieval-sum"])
        by_name = EVALUATORS.get(folder.name)
        if own is not None and by_name is not None and own.name != by_name.name and \
                (own.hub_id is None or by_name.hub_id is None or own.hub_id.lower() != by_name.hub_id.lower()):
            report.fail(f"folder {folder.name!r} holds another evaluator's checkpoint: {named.describe()} is "
                        f"{own.name}, not {by_name.name}, so ${HOME_ENV} lookups of {by_name.name} would get "
                        f"{own.name}'s weights (refused when scoring); rename it to {own.name!r}, or stage "
                        f"{by_name.name} there (unieval-local download --checkpoint {by_name.name})")
    try:
        status, identity = _named_identity(folder, spec)  # the files against their record: below, weights hashed
    except CheckpointError as exc:
        report.fail(str(exc))
    else:
        if status == "verified":
            report.info(f"identity: {identity.describe()} is {spec.name} (verified: its files are checked "
                        "against that record below)")
        elif status == "named":
            report.info(f"identity: {identity.describe()} is {spec.name} ({named_by(identity)}; "
                        "scores made with it sign identity:named)")
        else:
            report.warn(unverified_message(spec.name, folder, identity, verify=True))
            if not evaluator and folder.name not in EVALUATORS:
                report.warn(f"checked as {spec.name}: the folder names no evaluator and its folder name "
                            f"{folder.name!r} is none; give --evaluator NAME to check it as another")
    _report_training(report, folder)
    _verify_checksums(report, folder)
    try:
        names = stored_weight_names(folder)
        report.info(f"weight files open ({', '.join(f.name for f in weight_files(folder))}: {len(names)} tensors)")
    except CheckpointError as exc:
        report.fail(str(exc))
        return report
    if spec.backend != "t5":  # the backend's own checks (models/backends.py)
        from .backends import backend_verifier

        return backend_verifier(spec.backend)(report, folder, spec)
    try:
        from transformers import AutoConfig, AutoTokenizer

        config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        report.info(f"config loads ({config.model_type}, vocab_size={config.vocab_size})")
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        report.info(f"tokenizer loads ({type(tokenizer).__name__})")
        try:
            report.info(f"tokenizer {check_tokenizer(folder, tokenizer)}")
        except CheckpointError as exc:
            report.fail(str(exc))
            return report
        pos, neg = answer_ids(tokenizer, spec)
        words = "/".join(spec.answers)
        if max(pos, neg) >= config.vocab_size:
            report.fail(f"{words} answer ids {pos}/{neg} ({spec.name}) are outside the model vocabulary "
                        f"({config.vocab_size})")
        else:
            report.info(f"{words} token ids {pos}/{neg} ({spec.name} answers)")
    except Exception as exc:
        from .stored import explain_tokenizer_failure

        report.fail(f"loading failed: {explain_tokenizer_failure(folder, exc)}")
        return report
    try:
        bad = non_finite_tensors(folder)
    except CheckpointError as exc:
        report.fail(str(exc))
        return report
    if bad:
        report.fail(f"{len(bad)} stored tensor(s) hold NaN or infinite values: {', '.join(bad[:12])}"
                    f"{' ...' if len(bad) > 12 else ''} (a damaged or diverged checkpoint): stage it again")
    else:
        report.info(f"every stored tensor is finite ({len(names)} tensors)")
    try:
        model, tokenizer = load_model(folder)
    except CheckpointError as exc:
        report.fail(str(exc))
        return report
    _verify_fit(report, folder, tokenizer, model.config, int(model.get_input_embeddings().weight.shape[0]))
    untied = model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()
    report.info(f"model loads: every weight matches the config ({'untied LM head, T5 v1.1 layout' if untied else 'tied LM head'})")
    return report


def _report_training(report: VerifyReport, folder: Path) -> None:
    """Say what a folder written by ``unieval-local train`` was fine-tuned from (its ``config.json``'s
    ``unieval_local_training``: the base, its fingerprint, the aspect, the data's SHA-256, steps, seed)."""
    from .stored import read_config

    try:
        training = read_config(folder).get("unieval_local_training")
    except (OSError, ValueError):
        return
    if not isinstance(training, dict):
        return
    base = training.get("fine_tuned_from") or {}
    report.info(f"fine-tuned from {base.get('evaluator', '?')} (fingerprint {str(base.get('fingerprint', '?'))[:12]}) "
                f"on {training.get('aspect', '?')}: data sha256 {str(training.get('data_sha256', '?'))[:12]}, "
                f"{training.get('steps', '?')} steps, seed {training.get('seed', '?')} (unieval-local train)")
