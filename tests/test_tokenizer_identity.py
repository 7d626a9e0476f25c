"""Issue 29, no silent wrong number: a checkpoint's tokenizer is its model's, or it is refused (or,
where that cannot be told, warned about and signed ``identity:unverified``); a classifier's
readout label follows its config's ``id2label`` and a config that contradicts the evaluator is
refused; the tokenizer's class and flags are signed.

Generated checkpoints (``scripts/make_test_checkpoint.py``) stand in for the real ones: another
generated checkpoint's tokenizer (another vocabulary size, the mt5 layout's) is swapped in.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import pytest

from unieval_local import Scorer
from unieval_local.errors import CheckpointError
from unieval_local.models.manifest import check_recorded_files
from unieval_local.models.verify import verify_checkpoint

TOKENIZER = ("spiece.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
REC = [{"target": "The council approved the budget.", "source": "The city council approved a new budget."}]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory, shared_data) -> dict[str, Path]:
    """A t5 folder with a manifest (named unieval-sum), the same without one, a larger-vocabulary
    t5 tokenizer's folder, and an mt5-layout folder."""
    from make_test_checkpoint import build_mt5_checkpoint, build_test_checkpoint

    home = tmp_path_factory.mktemp("tokid")
    return {"t5": build_test_checkpoint(home / "m" / "unieval-sum", data_dir=shared_data, evaluator="unieval-sum",
                                        manifest=True),
            "bare": build_test_checkpoint(home / "b" / "unieval-sum", data_dir=shared_data, evaluator="unieval-sum"),
            "big": build_test_checkpoint(home / "big", data_dir=shared_data, vocab_size=2500),
            "mt5": build_mt5_checkpoint(home / "mt5", evaluator="seahorse-large-q1")}


def swapped(src: Path, tokenizer_of: Path, dst: Path, *, manifest: bool = True) -> Path:
    """A copy of ``src`` with ``tokenizer_of``'s tokenizer files (its own removed first)."""
    shutil.copytree(src, dst)
    for name in TOKENIZER:
        (dst / name).unlink(missing_ok=True)
        if (tokenizer_of / name).is_file():
            shutil.copyfile(tokenizer_of / name, dst / name)
    if not manifest:
        (dst / "unieval_manifest.json").unlink(missing_ok=True)
    return dst


def score(folder: Path, **kw):
    scorer = Scorer(model=str(folder), device="cpu", **kw)
    return scorer, scorer.score(REC, task="summarization", aspect="coherence")


def test_the_generated_manifest_is_downloads_format_and_an_untouched_folder_passes(ckpts):
    manifest = json.loads((ckpts["t5"] / "unieval_manifest.json").read_text())
    assert set(manifest) == {"checkpoint", "hub_id", "revision", "files", "tokenizer_sha256", "unieval_local_version"}
    assert manifest["files"]["spiece.model"]["sha256"] == hashlib.sha256(
        (ckpts["t5"] / "spiece.model").read_bytes()).hexdigest()
    names = sorted(n for n in manifest["files"] if n in TOKENIZER)
    assert manifest["tokenizer_sha256"] == hashlib.sha256("".join(
        f"{n}\0{manifest['files'][n]['sha256']}\n" for n in names).encode()).hexdigest()
    assert check_recorded_files(ckpts["t5"]) == "manifest" and check_recorded_files(ckpts["bare"]) == "none"
    (report,) = verify_checkpoint(ckpts["t5"])
    assert report.ok, report.messages
    assert any(m.startswith("ok   tokenizer fingerprint matches the manifest") for m in report.messages)
    assert any("tokenizer T5Tokenizer+extra:100 fits the model" in m for m in report.messages)


@pytest.mark.parametrize("other", ["mt5", "big"])
def test_another_models_tokenizer_in_a_manifest_folder_is_refused_by_name(ckpts, tmp_path, other, capsys):
    from unieval_local.cli import main
    from unieval_local.cli.common import EXIT_CHECKPOINT

    folder = swapped(ckpts["t5"], ckpts[other], tmp_path / "unieval-sum")
    with pytest.raises(CheckpointError, match=r"its download manifest .*changed: spiece\.model .*tokenizer\.json"):
        score(folder)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(REC[0]) + "\n")
    assert main(["score", str(src), "--model", str(folder), "--no-progress", "-o", str(tmp_path / "o.jsonl")]) \
        == EXIT_CHECKPOINT
    assert "changed: spiece.model" in capsys.readouterr().err
    (report,) = verify_checkpoint(folder)
    assert not report.ok and any("spiece.model checksum differs" in m for m in report.messages)


def test_one_changed_byte_is_named_at_load_and_a_weight_byte_by_verify(ckpts, tmp_path):
    folder = tmp_path / "unieval-sum"
    shutil.copytree(ckpts["t5"], folder)
    config = folder / "tokenizer_config.json"
    data = config.read_bytes()
    at = data.index(b"1024") if b"1024" in data else data.index(b"</s>") + 1
    config.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])  # one byte, same size
    with pytest.raises(CheckpointError, match=r"changed: tokenizer_config\.json \(content hash differs\)"):
        score(folder)
    config.write_bytes(data)  # back: it loads again
    assert score(folder)[1].overall.value == pytest.approx(score(ckpts["t5"])[1].overall.value, abs=0)
    weights = folder / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-3] ^= 1
    weights.write_bytes(bytes(raw))
    (report,) = verify_checkpoint(folder)  # weights are hashed by verify, compared by size at load
    assert not report.ok and any("model.safetensors checksum differs" in m for m in report.messages)
    weights.write_bytes(bytes(raw[:-8]))  # a truncated weight file is named at load
    with pytest.raises(CheckpointError, match=r"changed: model\.safetensors \(size"):
        score(folder)


def test_a_tokenizer_file_added_beside_the_manifest_is_refused(ckpts, tmp_path):
    folder = tmp_path / "unieval-sum"
    shutil.copytree(ckpts["t5"], folder)
    shutil.copyfile(ckpts["mt5"] / "special_tokens_map.json", folder / "special_tokens_map.json")
    with pytest.raises(CheckpointError, match=r"not recorded \(a tokenizer file added since\): special_tokens_map\.json"):
        score(folder)


def test_without_a_manifest_a_larger_tokenizer_is_refused_and_a_far_smaller_one_signs_unverified(ckpts, tmp_path):
    big = swapped(ckpts["bare"], ckpts["big"], tmp_path / "a" / "unieval-sum")
    with pytest.raises(CheckpointError, match=r"has 2,600 tokens but the model has 2,100 embedding rows"):
        score(big)
    # the mt5 layout's tokenizer: same special ids, fewer pieces than the 2,100 rows
    small = swapped(ckpts["bare"], ckpts["mt5"], tmp_path / "b" / "unieval-sum")
    from transformers import AutoTokenizer

    n = len(AutoTokenizer.from_pretrained(small))
    assert 2100 - n > 128  # the slack of a 2,100-row model
    with pytest.warns(UserWarning, match=rf"has {n:,} tokens for 2,100 embedding rows"):
        scorer, _ = score(small)
    sig = scorer.signature("summarization", "coherence")
    assert sig.identity == "unverified" and "|identity:unverified|" in str(sig)
    own = score(ckpts["bare"])[0].signature("summarization", "coherence")
    assert own.identity == "named" and "identity:unverified" not in str(own)  # its config.json names it (issue 40)
    (report,) = verify_checkpoint(small)
    assert report.ok and any(m.startswith("WARN") and "2,100 embedding rows" in m for m in report.messages)
    # the reverse: the t5 tokenizer (2,100 tokens) in the mt5 folder (1,792 rows)
    rows = json.loads((ckpts["mt5"] / "config.json").read_text())["vocab_size"]
    reverse = swapped(ckpts["mt5"], ckpts["bare"], tmp_path / "c" / "seahorse-large-q1")
    with pytest.raises(CheckpointError, match=rf"has 2,100 tokens but the model has {rows:,} embedding rows"):
        Scorer(model={"seahorse-large-q1": str(reverse)}, device="cpu").score(
            REC, task="summarization", aspect="comprehensible")


def test_special_ids_that_differ_from_the_config_are_refused(ckpts, tmp_path):
    folder = tmp_path / "unieval-sum"
    shutil.copytree(ckpts["bare"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "eos_token_id": 5}))
    with pytest.raises(CheckpointError, match=r"eos_token_id 1 \(config\.json: 5\)"):
        score(folder)
    (folder / "config.json").write_text(json.dumps({**config, "decoder_start_token_id": 2}))
    with pytest.raises(CheckpointError, match=r"decoder_start_token_id, T5's pad: 2"):
        score(folder)


def test_answer_ids_outside_the_rows_are_refused(ckpts):
    from transformers import AutoTokenizer

    from unieval_local.registry.evaluators import EVALUATORS, answer_ids

    tok = AutoTokenizer.from_pretrained(ckpts["bare"])
    yes, no = answer_ids(tok, EVALUATORS["unieval-sum"], rows=2100)
    assert (yes, no) == (tok("Yes").input_ids[0], tok("No").input_ids[0])
    with pytest.raises(CheckpointError, match="outside the model's"):
        answer_ids(tok, EVALUATORS["unieval-sum"], rows=min(yes, no))


def test_an_hf_cache_snapshot_is_checked_against_its_blob_names(ckpts, tmp_path):
    """Blobs are named by their content hash (SHA-256 for LFS files, the git blob SHA-1 otherwise)."""
    from unieval_local.models.manifest import git_blob_sha1

    repo = tmp_path / "hub" / "models--MingZhong--unieval-sum"
    snap, blobs = repo / "snapshots" / ("a" * 40), repo / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    for p in ckpts["bare"].iterdir():
        etag = hashlib.sha256(p.read_bytes()).hexdigest() if p.suffix in (".safetensors", ".model") \
            else git_blob_sha1(p)
        shutil.copyfile(p, blobs / etag)
        (snap / p.name).symlink_to(Path("../../blobs") / etag)
    assert check_recorded_files(snap) == "hf-cache"
    blob = (snap / "tokenizer_config.json").resolve()
    assert blob.name == hashlib.sha1(b"blob %d\0" % blob.stat().st_size + blob.read_bytes()).hexdigest()
    blob.write_text(blob.read_text().replace("1024", "1025"))
    with pytest.raises(CheckpointError,
                       match=r"Hugging Face cache blobs .*changed: tokenizer_config\.json \(content hash differs\)"):
        check_recorded_files(snap)


# ----------------------------------------------------------------------------- label maps
@pytest.mark.parametrize("labels, index", [
    (None, 1), ({"0": "LABEL_0", "1": "LABEL_1"}, 1), ({0: "hallucinated", 1: "consistent"}, 1),
    ({"0": "Consistent", "1": "hallucinated"}, "refused"), ({0: "hallucinated", 1: "faithful"}, "refused"),
])
def test_hhem_readout_follows_its_labels_or_the_registry_index(labels, index):
    from unieval_local.models.classifier.runner import readout_label
    from unieval_local.registry.evaluators import EVALUATORS

    hhem = EVALUATORS["hhem-2.1-open"]
    if index == "refused":
        with pytest.raises(CheckpointError, match=r"labels \{0: '.*', 1: '.*'\}"):
            readout_label(labels, hhem, "x", 2)
    else:
        assert readout_label(labels, hhem, "x", 2) == index


@pytest.mark.parametrize("labels, index", [
    ({"0": "entailment", "1": "neutral", "2": "contradiction"}, 0),
    ({"0": "contradiction", "1": "neutral", "2": "ENTAILMENT"}, 2),
    ({"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "name no class"),
    ({"0": "positive", "1": "negative"}, "do not include 'entailment'"),
])
def test_nli_readout_needs_the_entailment_label(labels, index):
    from unieval_local.models.classifier.runner import readout_label
    from unieval_local.registry.evaluators import EVALUATORS

    if isinstance(index, str):
        with pytest.raises(CheckpointError, match=index):
            readout_label(labels, EVALUATORS["mdeberta-nli"], "x")
    else:
        assert readout_label(labels, EVALUATORS["mdeberta-nli"], "x") == index


@pytest.fixture(scope="module")
def hhem(tmp_path_factory, shared_data) -> Path:
    from make_test_checkpoint import build_hhem_checkpoint

    return build_hhem_checkpoint(tmp_path_factory.mktemp("hhem-labels") / "hhem-2.1-open", data_dir=shared_data)


def hhem_scores(folder: Path) -> tuple[list[float], object]:
    scorer = Scorer(model={"hhem-2.1-open": str(folder)}, device="cpu")
    rec = REC + [{"target": "The budget was rejected.", "source": REC[0]["source"]}]
    return [e.value for e in scorer.score(rec, task="fact", aspect="hhem").examples], scorer


def test_an_hhem_config_naming_class_1_hallucinated_is_refused_and_named_labels_are_read(hhem, tmp_path):
    base, scorer = hhem_scores(hhem)
    assert scorer.runner("hhem-2.1-open").label == 1
    sig = str(scorer.signature("fact", "hhem"))
    assert "|tok:T5Tokenizer+extra:100|" in sig
    config = json.loads((hhem / "config.json").read_text())
    for labels, expect in (({"0": "consistent", "1": "hallucinated"}, "refused"),
                           ({"0": "hallucinated", "1": "consistent"}, base)):
        folder = tmp_path / str(len(list(tmp_path.iterdir()))) / "hhem-2.1-open"
        shutil.copytree(hhem, folder)
        shutil.copytree(hhem.parent / "flan-t5-base", folder.parent / "flan-t5-base")
        (folder / "config.json").write_text(json.dumps({**config, "id2label": labels}))
        if expect == "refused":
            with pytest.raises(CheckpointError, match=r"labels \{0: 'consistent', 1: 'hallucinated'\} name "
                                                      r"'consistent' as output 0"):
                hhem_scores(folder)
        else:
            assert hhem_scores(folder)[0] == expect


def test_the_classifier_signs_its_tokenizer_and_an_nli_config_without_entailment_is_refused(tmp_path, shared_data):
    from make_test_checkpoint import build_nli_checkpoint

    folder = build_nli_checkpoint(tmp_path / "mdeberta-nli", data_dir=shared_data, evaluator="mdeberta-nli")
    scorer = Scorer(model={"mdeberta-nli": str(folder)}, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer.score(REC, task="fact", aspect="nli_support")
    sig = scorer.signature("fact", "nli_support")
    assert sig.tokenizer == "DebertaV2Tokenizer+add_prefix_space" and "|tok:DebertaV2Tokenizer+add_prefix_space|" in str(sig)
    generic = build_nli_checkpoint(tmp_path / "g" / "mdeberta-nli", data_dir=shared_data,
                                   labels=("LABEL_0", "LABEL_1", "LABEL_2"))
    with pytest.raises(CheckpointError, match=r"labels \{0: 'LABEL_0', 1: 'LABEL_1', 2: 'LABEL_2'\} name no class"):
        Scorer(model={"mdeberta-nli": str(generic)}, device="cpu").score(REC, task="fact", aspect="nli_support")


def test_the_tokenizer_is_signed_once_loaded_and_is_not_in_the_cache_key(ckpts):
    from unieval_local.registry.evaluators import EVALUATORS

    scorer = Scorer(model=str(ckpts["bare"]), device="cpu")
    before = scorer.signature("summarization", "coherence")
    assert before.tokenizer is None and "|tok:" not in str(before)  # nothing loaded yet
    scorer.score(REC, task="summarization", aspect="coherence")
    after = scorer.signature("summarization", "coherence")
    assert after.tokenizer == "T5Tokenizer+extra:100"
    assert "|dtype:float32|device:cpu|threads:" in str(after) and "|tok:T5Tokenizer+extra:100|torch:" in str(after)
    assert "tokenizer" not in json.dumps(EVALUATORS["unieval-sum"].key())
    assert EVALUATORS["hhem-2.1-open"].key()["label_index"] == 1
