"""Shared fixtures: a small random T5 checkpoint with a real SentencePiece tokenizer,
real SummEval records, and a plain float64 reference computation of UniEval's score."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from convert_summeval import convert  # noqa: E402
from make_test_checkpoint import build_test_checkpoint, shared_data_dir  # noqa: E402

SHARED = shared_data_dir()
#: Where the official checkpoints are, if a user staged them (read before any test unsets it).
REAL_HOME = os.environ.get("UNIEVAL_LOCAL_HOME")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (CI lays it beside the clone); a clear failure if it is absent."""
    if not (SHARED / "SOURCES.md").is_file():
        pytest.fail(f"shared data not found at {SHARED}; set UNIEVAL_SHARED_DATA")
    return SHARED


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory, shared_data) -> Path:
    """A generated checkpoint folder named ``unieval-sum`` (built once per test run)."""
    return build_test_checkpoint(tmp_path_factory.mktemp("home") / "unieval-sum", data_dir=shared_data)


@pytest.fixture(scope="session")
def v11_ckpts(tmp_path_factory, shared_data) -> dict[str, Path]:
    """Generated checkpoints in the official UniEval layout (T5 v1.1: gated-GELU, untied LM
    head, ``tie_word_embeddings: false``, a 4.x-style config), one per weight format."""
    home = tmp_path_factory.mktemp("v11")
    return {w: build_test_checkpoint(home / w / "unieval-sum", data_dir=shared_data, layout="v1.1", weights=w)
            for w in ("bin", "safetensors")}


#: name -> how the parity tests get each generated layout
LAYOUTS = ("t5-safetensors", "v1.1-bin", "v1.1-safetensors")


@pytest.fixture(scope="session")
def layout_ckpts(tiny_ckpt, v11_ckpts) -> dict[str, Path]:
    """Every generated layout the parity tests run on, by name (:data:`LAYOUTS`)."""
    return {"t5-safetensors": tiny_ckpt, "v1.1-bin": v11_ckpts["bin"], "v1.1-safetensors": v11_ckpts["safetensors"]}


@pytest.fixture(scope="session")
def references(layout_ckpts) -> dict[str, "Reference"]:
    """A float64 :class:`Reference` per layout (loaded once)."""
    return {name: Reference(path) for name, path in layout_ckpts.items()}


@pytest.fixture(scope="session")
def summeval_records(shared_data) -> list[dict]:
    """48 SummEval records, first reference only: 16 systems of the first document,
    then of the two documents with the longest sources (over 1,024 tokens: truncated)."""
    raw = json.loads((shared_data / "summeval" / "summeval_raw.json").read_text())
    records = convert(raw)
    first = sorted(raw)[0]
    longest = sorted(raw, key=lambda k: -len(raw[k]["src"]))[:2]
    by_doc = {d: [r for r in records if r["doc_id"] == d] for d in [first, *longest]}
    mixed = []
    for i in range(16):  # interleave documents so that any slice mixes lengths
        mixed += [by_doc[d][i] for d in by_doc]
    return mixed


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """No test touches the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("UNIEVAL_LOCAL_HOME", raising=False)


class Reference:
    """UniEval's score written plainly: batch size 1, input order, float64 weights,
    full-vocabulary softmax, p[yes] / (p[yes] + p[no]) (UniEval scorer.py)."""

    def __init__(self, folder: Path):
        import torch
        from transformers import AutoTokenizer, T5ForConditionalGeneration

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(folder)
        self.model = T5ForConditionalGeneration.from_pretrained(folder).double().eval()
        self.yes = self.tok("Yes").input_ids[0]
        self.no = self.tok("No").input_ids[0]
        self._memo: dict[tuple[str, int], float] = {}

    def __call__(self, prompt: str, max_length: int = 1024) -> float:
        key = (prompt, max_length)
        if key not in self._memo:
            torch = self.torch
            enc = self.tok([prompt], max_length=max_length, truncation=True, return_tensors="pt")
            labels = self.tok(["No"], return_tensors="pt").input_ids[:, :1]
            with torch.no_grad():
                logits = self.model(input_ids=enc.input_ids, attention_mask=enc.attention_mask,
                                    labels=labels).logits.view(-1, self.model.config.vocab_size)
            p = torch.softmax(logits, dim=1)[0]
            self._memo[key] = float(p[self.yes] / (p[self.yes] + p[self.no]))
        return self._memo[key]


@pytest.fixture(scope="session")
def reference(tiny_ckpt) -> Reference:
    return Reference(tiny_ckpt)


@pytest.fixture(scope="session")
def fake_ckpt(tmp_path_factory) -> Path:
    """A checkpoint folder with placeholder config and tokenizer files, for tests whose runner is a fake."""
    folder = tmp_path_factory.mktemp("fake") / "unieval-sum"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def real_home() -> Path:
    """``$UNIEVAL_LOCAL_HOME`` holding the official ``unieval-sum``; skips where absent."""
    if not REAL_HOME or not (Path(REAL_HOME) / "unieval-sum" / "config.json").is_file():
        pytest.skip("official UniEval checkpoints not staged in UNIEVAL_LOCAL_HOME")
    return Path(REAL_HOME)
