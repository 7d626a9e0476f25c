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


@pytest.fixture(scope="session")
def _hash_memo(tmp_path_factory) -> Path:
    """A per-session file for the persistent memo of file hashes (never the user's ~/.cache)."""
    return tmp_path_factory.mktemp("hash-memo") / "file_sha256.json"


@pytest.fixture(autouse=True)
def _offline(monkeypatch, _hash_memo):
    """No test touches the network, nor the user's cache of file hashes."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("UNIEVAL_LOCAL_HASH_MEMO", str(_hash_memo))
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


@pytest.fixture(scope="session")
def official_shape_ckpt(tmp_path_factory) -> Path:
    """A fake-runner checkpoint folder that names unieval-sum and has the official T5-large
    shape in its config (what the calibration card holds for; the weights are never loaded)."""
    folder = tmp_path_factory.mktemp("official-shape") / "unieval-sum"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "t5", "d_model": 1024, "num_layers": 24, '
                                        '"unieval_local_evaluator": "unieval-sum"}')
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def real_home() -> Path:
    """``$UNIEVAL_LOCAL_HOME`` holding the official ``unieval-sum``; skips where absent."""
    if not REAL_HOME or not (Path(REAL_HOME) / "unieval-sum" / "config.json").is_file():
        pytest.skip("official UniEval checkpoints not staged in UNIEVAL_LOCAL_HOME")
    return Path(REAL_HOME)


# ----------------------------------------------------------------------------- the one fake runner
from unieval_local.engine import Runner  # noqa: E402


class FakeRunner(Runner):
    """The tests' fake model runner (implements the engine's Runner protocol explicitly).

    P(Yes) of a prompt is ``answer(prompt)`` (a function), or the value of the first marker of
    ``table`` found in the prompt (else ``default``). Tokens are whitespace words (the final
    EOS counts as one), so long-input planning is exact arithmetic; ``answer`` sees the
    prompt truncated to ``max_length - 1`` words, as a T5 runner would read it.
    ``prompts`` keeps every prompt scored, ``calls`` the prompts of each ``score`` call.
    """

    def __init__(self, answer=None, *, table=None, default=0.5, name="fake", fingerprint="fake"):
        self.answer, self.table, self.default = answer, dict(table or {}), default
        self.name, self.fingerprint = name, fingerprint
        self.prompts: list[str] = []
        self.calls: list[list[str]] = []

    def count(self, texts):
        return [len(t.split()) + 1 for t in texts]

    def count_plain(self, texts):
        return [len(t.split()) for t in texts]

    def cut(self, text, n_tokens):
        words = text.split()
        if n_tokens >= len(words):
            return len(text)
        pos = 0
        for w in words[:max(n_tokens, 0)]:
            pos = text.index(w, pos) + len(w)
        return pos

    def value(self, prompt: str) -> float:
        if self.answer is not None:
            return float(self.answer(prompt))
        return next((v for k, v in self.table.items() if k in prompt), self.default)

    def score(self, prompts, *, max_length, on_batch=None):
        import numpy as np

        self.calls.append(list(prompts))
        self.prompts += list(prompts)
        kept = [" ".join(p.split()[: max_length - 1]) if len(p.split()) >= max_length else p for p in prompts]
        values = np.array([self.value(k) for k in kept], dtype=np.float64)
        if on_batch is not None:
            on_batch(len(set(prompts)), len(set(prompts)))
        return values, np.array(self.count(prompts), dtype=np.int64)


def fake_factory(runner: FakeRunner):
    """A runner factory that always gives ``runner`` (taking the checkpoint's fingerprint,
    as the T5 runner does, so cache keys follow the checkpoint's content)."""
    def factory(checkpoint, fingerprint, evaluator):
        runner.fingerprint = fingerprint
        runner.evaluator = evaluator
        return runner
    return factory


@pytest.fixture
def fake_scorer(fake_ckpt):
    """``fake_scorer(answer=None, table=None, default=0.5, **scorer_kwargs) -> (Scorer, FakeRunner)``."""
    from unieval_local import Scorer

    def make(answer=None, *, table=None, default=0.5, **kw):
        runner = FakeRunner(answer, table=table, default=default)
        return Scorer(model=fake_ckpt, runner_factory=fake_factory(runner), **kw), runner
    return make


def documented_shape(name: str):
    """The documented example output of report format ``name`` (tests/data/formats/NAME.json)."""
    import json

    return json.loads((ROOT / "tests" / "data" / "formats" / f"{name}.json").read_text())


def assert_same_shape(actual, documented, path: str = "$", allow_extra: bool = False) -> None:
    """``actual`` has the documented example's keys (the same ones, in the same order; with
    ``allow_extra``, at least them) and, value by value, the same JSON types (bool, int,
    float and str are told apart; each list item is checked against the example's first item)."""
    if isinstance(documented, dict):
        assert isinstance(actual, dict), f"{path}: {type(actual).__name__}, documented an object"
        missing = [k for k in documented if k not in actual]
        extra = [k for k in actual if k not in documented]
        assert not missing, f"{path}: missing keys {missing}"
        assert allow_extra or not extra, f"{path}: keys not in the documented shape {extra}"
        if not allow_extra:
            assert list(actual) == list(documented), f"{path}: key order {list(actual)} != {list(documented)}"
        for k in documented:
            assert_same_shape(actual[k], documented[k], f"{path}.{k}", allow_extra)
    elif isinstance(documented, list):
        assert isinstance(actual, list), f"{path}: {type(actual).__name__}, documented a list"
        for i, item in enumerate(actual if documented else []):
            assert_same_shape(item, documented[0], f"{path}[{i}]", allow_extra)
    else:
        assert type(actual) is type(documented), \
            f"{path}: {type(actual).__name__} {actual!r}, documented {type(documented).__name__} {documented!r}"


def claim_rescale(monkeypatch) -> None:
    """Make transformers' loaded seq2seq config claim the decoder-output rescale whatever
    config.json says, as transformers 5.0.0 did for untied T5 checkpoints
    (``scale_decoder_outputs=True``; on 4.x the attribute its forward reads is ``tie_word_embeddings``)."""
    import transformers

    original = transformers.AutoModelForSeq2SeqLM.from_pretrained

    def misread(*args, **kwargs):
        out = original(*args, **kwargs)
        model = out[0] if isinstance(out, tuple) else out
        if getattr(model.config, "scale_decoder_outputs", None) is not None:
            model.config.scale_decoder_outputs = True
        else:
            model.config.tie_word_embeddings = True
        return out

    monkeypatch.setattr(transformers.AutoModelForSeq2SeqLM, "from_pretrained", misread)
    from unieval_local.models.t5 import runner as t5_runner

    monkeypatch.setattr(t5_runner, "_MODELS", {})  # load afresh, and drop the misread model after the test


def drop_cls(monkeypatch) -> None:
    """Make every tokenizer transformers' ``AutoTokenizer`` loads add no leading ``[CLS]`` (a pair
    as ``A [SEP] B [SEP]``, one text as ``A [SEP]``), as transformers 5.1.0's DeBERTa tokenizer
    built from a folder without ``tokenizer.json`` did (golden ids: ``At index 0 diff: 25 != 1``).
    Classifier models are loaded afresh and dropped after the test."""
    import transformers
    from tokenizers.processors import TemplateProcessing

    original = transformers.AutoTokenizer.from_pretrained

    def without_cls(*args, **kwargs):
        tokenizer = original(*args, **kwargs)
        sep = tokenizer.sep_token
        if sep is not None and getattr(tokenizer, "backend_tokenizer", None) is not None:
            tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
                single=f"$A {sep}", pair=f"$A {sep} $B:1 {sep}:1", special_tokens=[(sep, tokenizer.sep_token_id)])
        return tokenizer

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", without_cls)
    from unieval_local.models.classifier import runner as classifier_runner

    monkeypatch.setattr(classifier_runner, "_MODELS", {})


class ReposHub:
    """A hub client serving local folders as repositories (no network): ``{repo_id: folder}``."""

    def __init__(self, repos):
        self.repos = repos

    def list_files(self, repo_id, revision):
        return "c" * 40, sorted(p.name for p in self.repos[repo_id].iterdir() if p.is_file())

    def download(self, repo_id, filename, revision, local_dir):
        import shutil

        local_dir.mkdir(parents=True, exist_ok=True)
        return shutil.copy(self.repos[repo_id] / filename, local_dir / filename)
