"""The same numbers on every stack the package admits (issue 35).

- Declared = tested: pyproject.toml's floors are the pins of the oldest CI leg (.ci/legs/oldest.txt),
  and the release excluded (transformers 5.0.x) is refused by the declared range.
- transformers 5.0.0's disagreement, built here without installing it: the loaded config object
  claims a decoder-output rescale on an untied (T5 v1.1) checkpoint. The stored file wins: the
  scores equal the float64 reference, fast and plain forward, and a warning names the version.
- Folders written by a newer transformers: make_test_checkpoint.py writes tokenizer configs every
  admitted version reads; a folder that an older one cannot read gets a message naming file and key.
- The causal-lm backend is refused below the oldest transformers it is tested on, naming both.
- transformers 5 builds Qwen2Tokenizer for a qwen2 folder, with Qwen2's pre-tokenizer instead of
  the folder's tokenizer.json: the package uses the file's ids.
"""

from __future__ import annotations

import json
import re
import tomllib
import warnings

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from unieval_local import Scorer
from unieval_local.errors import CheckpointError
from unieval_local.models import stored

from conftest import ROOT, claim_rescale

pytestmark = pytest.mark.parity

#: the libraries whose floors the oldest leg installs
FLOORED = ("transformers", "huggingface_hub", "numpy", "pydantic", "safetensors")


def _declared() -> dict[str, Requirement]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    reqs = [Requirement(d) for d in deps]
    return {r.name.lower().replace("-", "_"): r for r in reqs}


def _leg_pins(leg: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / ".ci" / "legs" / f"{leg}.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.strip().lower().replace("-", "_")] = version.strip()
    return pins


def _floor(req: Requirement) -> str:
    floors = [s.version for s in req.specifier if s.operator == ">="]
    assert len(floors) == 1, f"{req}: one >= floor expected"
    return floors[0]


def test_declared_floors_are_the_oldest_legs_pins():
    declared, pins = _declared(), _leg_pins("oldest")
    for name in FLOORED:
        assert Version(_floor(declared[name])) == Version(pins[name]), (name, str(declared[name]), pins[name])
    assert pins["torch"] == "2.13.0"  # torch is not varied: the local CPU wheel


def test_declared_range_refuses_5_0_and_admits_every_leg():
    spec = _declared()["transformers"].specifier
    assert not spec.contains("5.0.0") and not spec.contains("5.0.1")
    assert not spec.contains("4.46.0")  # yanked
    import transformers

    for admitted in (_leg_pins("oldest")["transformers"], _leg_pins("late-4x")["transformers"], "5.1.0",
                     transformers.__version__):
        assert spec.contains(admitted, prereleases=True), admitted


def test_causal_lm_floor_is_a_tested_leg():
    from unieval_local.models.causal_lm.model import CAUSAL_LM_MIN_TRANSFORMERS

    assert Version(_leg_pins("late-4x")["transformers"]) >= Version(".".join(map(str, CAUSAL_LM_MIN_TRANSFORMERS)))
    assert Version(_leg_pins("oldest")["transformers"]) < Version(".".join(map(str, CAUSAL_LM_MIN_TRANSFORMERS)))


@pytest.mark.parametrize("version,key", [((4, 46, 1), "torch_dtype"), ((4, 55, 4), "torch_dtype"),
                                         ((4, 56, 0), "dtype"), ((5, 25, 0), "dtype")])
def test_dtype_keyword_by_version(monkeypatch, version, key):
    monkeypatch.setattr(stored, "transformers_version", lambda: version)
    assert list(stored.dtype_kwarg("x")) == [key]


def test_causal_lm_refused_below_its_floor_naming_both_versions(monkeypatch, tmp_path):
    from unieval_local.models.causal_lm.model import CausalLMModel
    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.registry.evaluators import get_evaluator

    monkeypatch.setattr(stored, "transformers_version", lambda: (4, 46, 1))
    with pytest.raises(CheckpointError, match=r"causal-lm backend .*needs transformers>=4\.57\.0.*"
                                              r"pip install 'transformers>=4\.57\.0,!=5\.0\.\*'"):
        CausalLMModel(ResolvedCheckpoint("g-eval", tmp_path, "explicit"), get_evaluator("g-eval"), "cpu", "float32")


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "plain"])
def test_a_config_object_claiming_rescale_on_an_untied_checkpoint_is_overruled(
        monkeypatch, v11_ckpts, references, summeval_records, fast):
    folder = v11_ckpts["safetensors"]
    records = summeval_records[:4]
    prompts = [f"question: Is this a coherent summary to the document? </s> summary: {r['target']} </s> "
               f"document: {r['source']}" for r in records]
    want = np.array([references["v1.1-safetensors"](p) for p in prompts])
    claim_rescale(monkeypatch)
    stored._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = Scorer(model=folder, fast_forward=fast).score(records, task="summarization", aspect="coherence")
    values = np.array([e.value for e in got.examples])
    assert np.abs(values - want).max() < 1e-5, (values, want)
    import transformers

    assert any(f"transformers {transformers.__version__}" in str(w.message) and "the stored file wins"
               in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_the_buggy_reading_would_have_moved_the_scores(monkeypatch, v11_ckpts, references, summeval_records):
    """The simulation is real: the model's own forward under the claim gives other numbers."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    folder = v11_ckpts["safetensors"]
    claim_rescale(monkeypatch)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).double().eval()
    tok = AutoTokenizer.from_pretrained(folder)
    r = summeval_records[0]
    prompt = f"question: Is this a coherent summary to the document? </s> summary: {r['target']} </s> document: {r['source']}"
    enc = tok([prompt], max_length=1024, truncation=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
    yes, no = tok("Yes").input_ids[0], tok("No").input_ids[0]
    buggy = float(torch.sigmoid(logits[yes] - logits[no]))
    assert abs(buggy - references["v1.1-safetensors"](prompt)) > 1e-3


def test_generated_tokenizer_configs_are_readable_by_every_admitted_version(v11_ckpts, tmp_path, shared_data):
    from make_test_checkpoint import build_causal_lm_checkpoint

    qwen = build_causal_lm_checkpoint(tmp_path / "qwen2", layout="qwen2", data_dir=shared_data)
    for folder in (v11_ckpts["bin"], qwen):
        config = json.loads((folder / "tokenizer_config.json").read_text())
        assert not isinstance(config.get("extra_special_tokens"), list), folder
        assert config.get("tokenizer_class") != "TokenizersBackend"
        assert "is_local" not in config and "backend" not in config


def test_a_newer_tokenizer_config_is_named_by_file_and_key(monkeypatch, tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "TokenizersBackend", "extra_special_tokens": ["<pad>", "</s>"]}))
    monkeypatch.setattr(stored, "transformers_version", lambda: (4, 57, 6))
    message = stored.explain_tokenizer_failure(tmp_path, AttributeError("'list' object has no attribute 'keys'"))
    assert message.startswith("AttributeError: 'list' object has no attribute 'keys'")
    assert str(tmp_path / "tokenizer_config.json") in message
    assert "key 'extra_special_tokens'" in message and "additional_special_tokens" in message
    assert "key 'tokenizer_class'" in message and "PreTrainedTokenizerFast" in message
    monkeypatch.setattr(stored, "transformers_version", lambda: (5, 25, 0))
    assert "tokenizer_config.json" not in stored.explain_tokenizer_failure(tmp_path, ValueError("x"))


def test_qwen2_folder_is_tokenized_as_its_tokenizer_json_says(tmp_path, shared_data):
    from tokenizers import Tokenizer

    from make_test_checkpoint import build_causal_lm_checkpoint
    from unieval_local.models.causal_lm.model import CausalLMModel
    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.registry.evaluators import get_evaluator

    from unieval_local.models.causal_lm.model import CAUSAL_LM_MIN_TRANSFORMERS

    if stored.transformers_version() < CAUSAL_LM_MIN_TRANSFORMERS:
        pytest.skip("the causal-lm backend is refused on this transformers "
                    "(test_causal_lm_refused_below_its_floor_naming_both_versions)")
    folder = build_causal_lm_checkpoint(tmp_path / "qwen2", layout="qwen2", data_dir=shared_data)
    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CausalLMModel(ResolvedCheckpoint("g-eval", folder, "explicit"), get_evaluator("g-eval"), "cpu",
                              "float32")
    for text in ("Coherence (1-5): 3", "Ratings 12345 and 2024", " two  spaces\n\nthen"):
        assert model.tokenizer(text, add_special_tokens=False).input_ids == \
            raw.encode(text, add_special_tokens=False).ids, text
    assert re.search(r"chat_template|im_start", model.tokenizer.chat_template or "")


def test_legs_files_exist_and_pin_torch():
    legs = sorted(p.stem for p in (ROOT / ".ci" / "legs").glob("*.txt"))
    assert legs == ["late-4x", "oldest"]
    for leg in legs:
        assert _leg_pins(leg)["torch"] == "2.13.0"
    script = (ROOT / ".ci" / "matrix").read_text()
    assert 'pytest -q -p no:cacheprovider -m "smoke or parity or golden"' in script
    assert "bash .ci/matrix" in (ROOT / ".ci" / "run").read_text()
