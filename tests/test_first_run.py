"""A first run that works, and errors instead of tracebacks: the Python forms of a request,
field-name mistakes caught before any model loads, devices, runtime failures of the model
(exit 5, records kept), Ctrl-C (exit 130), the attention-memory bound, progress lines."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from unieval_local import InvalidExampleError, Scorer, api
from unieval_local.cli import EXIT_INTERRUPTED, EXIT_MODEL, EXIT_USAGE, main
from unieval_local.errors import ModelRuntimeError
from unieval_local.registry.evaluators import EVALUATORS
from unieval_local.models.t5.runner import T5Runner, load_t5_model
from unieval_local.models.batching import attention_cells, plan_batches
from unieval_local.models.devices import resolve_device

from conftest import FakeRunner, fake_factory

EXE = shutil.which("unieval-local")


def by_prompt(prompt: str) -> float:
    """P(Yes) as a fixed function of the prompt text (stable across processes)."""
    import zlib

    return zlib.crc32(prompt.encode()) % 997 / 997


def crc_scorer(fake_ckpt, **kw):
    return Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(by_prompt)), **kw)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


# ----------------------------------------------------------------------------- Python forms
def test_a_scorer_takes_any_number_of_examples_in_passes(fake_ckpt, monkeypatch):
    data = [{"target": f"Summary {i}. It has {i % 5} parts.", "source": f"Document {i % 13}."} for i in range(700)]
    whole = crc_scorer(fake_ckpt).evaluate(data, aspects=["coherence", "consistency"])
    from unieval_local.requests.scheduler import RequestPolicy

    small = crc_scorer(fake_ckpt)
    small.scheduler.policy = RequestPolicy(64)  # 11 requests
    passes = small.evaluate(data, aspects=["coherence", "consistency"])
    assert len(whole.examples) == 700 and whole.examples == passes.examples
    one = [crc_scorer(fake_ckpt).score([d], aspect="consistency").examples[0].value for d in data[:20]]
    assert [e.value for e in whole.per_aspect["consistency"].examples[:20]] == one


def test_parallel_lists_and_dataframes_equal_dicts(fake_ckpt):
    import pandas as pd

    data = [{"target": "A short summary. Second.", "source": "The document.", "references": ["Ref one.", "Two."]},
            {"target": "Another one.", "source": "Other document.", "references": ["Only ref."]}]
    s = crc_scorer(fake_ckpt)
    want = [e.value for e in s.score(data, aspect="relevance").examples]
    lists = s.score(targets=[d["target"] for d in data], sources=[d["source"] for d in data],
                    references=[d["references"] for d in data], aspect="relevance")
    assert [e.value for e in lists.examples] == want
    frame = s.score(pd.DataFrame(data), aspect="relevance")
    assert [e.value for e in frame.examples] == want
    one_ref = s.score(targets=["Another one."], references=["Only ref."], aspect="relevance")
    assert one_ref.examples[0].value == want[1]  # one text per example is one reference
    with pytest.raises(ValueError, match="targets has 2, sources has 1"):
        s.score(targets=["a", "b"], sources=["x"], aspect="coherence")
    with pytest.raises(ValueError, match="not both"):
        s.score(data, targets=["a"], aspect="coherence")
    with pytest.raises(ValueError, match="wrap it in a list"):
        s.score(data[0], aspect="coherence")
    # a DataFrame's empty cell is a missing field, named as such
    df = pd.DataFrame([{"target": "A.", "source": "Doc."}, {"target": "B.", "source": None}])
    with pytest.raises(InvalidExampleError, match="example 1, aspect 'coherence', field 'source'.*missing"):
        s.score(df, aspect="coherence")


def test_bytes_are_refused_naming_the_field(fake_ckpt):
    s = crc_scorer(fake_ckpt)
    with pytest.raises(InvalidExampleError) as info:
        s.score([{"target": b"bytes summary", "source": "doc"}, {"target": "ok", "source": b"doc"},
                 {"target": "ok", "references": [b"ref"]}], aspect="coherence")
    msg = str(info.value)
    assert "example 0, field 'target': Input should be a valid string, got bytes (decode it to str first" in msg
    assert "example 1, field 'source'" in msg and "example 2, field 'references.0'" in msg


def test_common_field_names_get_a_did_you_mean_all_at_once(fake_ckpt):
    with pytest.raises(InvalidExampleError) as info:
        crc_scorer(fake_ckpt).evaluate([{"summary": "A.", "document": "B."}], aspects=["coherence", "relevance"])
    problems = [(p.field, p.aspect) for p in info.value.problems]
    assert problems == [("target", None), ("source", "coherence"), ("references", "relevance")]
    assert "the record has 'summary': did you mean 'target'?" in str(info.value)
    assert "the record has 'document': did you mean 'source'?" in str(info.value)


def test_non_english_targets_warn_once_per_run_naming_aspect_and_language(fake_ckpt):
    data = [{"target": "Это краткое изложение.", "source": "Документ."}, {"target": "English text.", "source": "Doc."}]
    scorer = crc_scorer(fake_ckpt)
    with pytest.warns(UserWarning, match=r"summarization/coherence: examples in Russian \(ru\), but its evaluator "
                                         r"unieval-sum was trained on en"):
        scorer.score(data, aspect="coherence")


# ----------------------------------------------------------------------------- devices
@pytest.mark.parametrize("device", ["gpu", "CPU", "", "mps", "cuda:7", "cuda", "cpu:0"])
def test_bad_devices_are_refused_at_construction_listing_the_available(device, fake_ckpt, tmp_path, capsys):
    import torch

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match=r"is not available on this machine.*available: cpu"):
        resolve_device(device)
    with pytest.raises(ValueError, match="available: cpu"):
        Scorer(model=fake_ckpt, device=device)
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "A.", "source": "B."}])
    assert main(["score", str(src), "--model", str(fake_ckpt), "--device", device, "--no-progress"]) == EXIT_USAGE
    assert "available: cpu" in capsys.readouterr().err


# ----------------------------------------------------------------------------- before the model loads
def test_nothing_scorable_exits_2_before_loading_with_the_fix(tmp_path, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "summary": "A summary.", "document": "A document."}
                                              for i in range(3)])
    missing_model = tmp_path / "no-such-checkpoint"  # never opened: the check comes first
    rc = main(["score", str(src), "--model", str(missing_model), "--aspect", "coherence", "-o",
               str(tmp_path / "o.jsonl"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == EXIT_USAGE and len(err.splitlines()) == 1
    assert "no record of" in err and "the records have fields document, id, summary" in err
    assert "coherence needs target, source" in err and "rename 'document' to 'source', 'summary' to 'target'" in err
    assert not (tmp_path / "o.jsonl").exists()
    # references missing for relevance: the aspects that can run are named
    src = write_jsonl(tmp_path / "in2.jsonl", [{"target": "A.", "source": "B."}])
    rc = main(["score", str(src), "--model", str(missing_model), "--aspect", "relevance", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == EXIT_USAGE and "relevance needs target, references" in err
    assert "--aspect coherence --aspect consistency --aspect fluency" in err


def test_aspect_all_without_references_scores_the_rest(tmp_path, tiny_ckpt, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "target": f"Summary {i}.", "source": "A document."}
                                              for i in range(4)])
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "all", "-o", str(out),
                 "--no-progress"]) == 0
    lines = read(out)
    assert [sorted(x["scores"]) for x in lines] == [["coherence", "consistency", "fluency"]] * 4
    assert "skipped aspect relevance (--aspect all): needs 'references'; no record has it" in capsys.readouterr().err


def test_failures_are_summarised_by_reason(tmp_path, tiny_ckpt, capsys):
    rows = [{"id": i, "target": "A summary.", "source": "Doc."} for i in range(3)]
    rows += [{"id": f"x{i}", "target": "A summary."} for i in range(4)]
    out = tmp_path / "o.jsonl"
    assert main(["score", str(write_jsonl(tmp_path / "in.jsonl", rows)), "--model", str(tiny_ckpt),
                 "--aspect", "coherence", "-o", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "failed records by reason (1 distinct):" in err
    assert "4 record(s): InvalidExample: aspect 'coherence', field 'source'" in err and "(keys x0, x1, x2, x3)" in err


def test_output_dash_is_stdout(tmp_path, tiny_ckpt, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "A.", "source": "B."}])
    assert main(["score", str(src), "--model", str(tiny_ckpt), "-o", "-", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["key"] == 0 and not (tmp_path / "-").exists()


def test_a_device_or_pipe_output_is_written_like_stdout(tmp_path, tiny_ckpt, capsys):
    """-o /dev/null (or a FIFO): no fsync (a device refuses it: exit 4 before), no sidecar
    beside it (it landed in /dev), and --resume refused."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "A.", "source": "B."}])
    sidecar = os.devnull + ".meta.json"
    try:
        assert main(["score", str(src), "--model", str(tiny_ckpt), "-o", os.devnull, "--no-progress"]) == 0
        assert not os.path.exists(sidecar)
        assert main(["score", str(src), "--model", str(tiny_ckpt), "-o", os.devnull, "--resume",
                     "--no-progress"]) == EXIT_USAGE
        assert "is not a regular file (a device or pipe); --resume needs a file" in capsys.readouterr().err
    finally:
        if os.path.isfile(sidecar):
            os.remove(sidecar)
    # /dev/stdout redirected to a regular file that already has lines (a SLURM log)
    log = tmp_path / "job.log"
    log.write_text("earlier log line\n")
    script = (f"from unieval_local.cli import main; raise SystemExit(main(['score', {str(src)!r}, '--model', "
              f"{str(tiny_ckpt)!r}, '-o', '/dev/stdout', '--no-progress']))")
    try:
        with open(log, "a") as fh:
            rc = subprocess.run([sys.executable, "-c", script], stdout=fh, stderr=subprocess.PIPE, text=True)
        assert rc.returncode == 0, rc.stderr
        assert not os.path.exists("/dev/stdout.meta.json")
        lines = log.read_text().splitlines()
        assert lines[0] == "earlier log line" and json.loads(lines[1])["key"] == 0
    finally:
        if os.path.isfile("/dev/stdout.meta.json"):
            os.remove("/dev/stdout.meta.json")


def test_converters_create_their_output_folder(tmp_path):
    root = os.path.dirname(os.path.dirname(__file__))
    for script, args in (("convert_summeval.py", ["--docs", "1"]), ("convert_qmsum.py", ["--meetings", "1"])):
        out = tmp_path / "new" / "folder" / f"{script}.jsonl"
        subprocess.run([sys.executable, os.path.join(root, "scripts", script), str(out), *args], check=True,
                       capture_output=True)
        assert out.is_file() and out.read_text().count("\n") >= 1


def test_report_html_refuses_a_file_that_is_not_a_score_output(tmp_path, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "A.", "source": "B."}])
    assert main(["report-html", str(src), "-o", str(tmp_path / "r.html")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is not a unieval-local score output record" in err and "looks like a score input" in err
    assert not (tmp_path / "r.html").exists()


# ----------------------------------------------------------------------------- the model failing
def test_a_runtime_error_of_the_model_exits_5_and_keeps_the_records(tmp_path, tiny_ckpt, monkeypatch, capsys):
    rows = [{"id": f"r{i}", "target": f"Sentence {i}. And {i % 4}."} for i in range(260)]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "o.jsonl"
    argv = ["score", str(src), "--model", str(tiny_ckpt), "--aspect", "fluency", "--max-length", "48",
            "-o", str(out), "--no-progress"]
    real = T5Runner._two_logits
    calls = []

    def broken(self, ids, batch, fast):  # record 255 meets a CUDA-style failure
        if any("Sentence 255." in self.t5.tokenizer.decode(ids[i]) for i in batch):
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors ...")
        calls.append(len(batch))
        return real(self, ids, batch, fast)

    monkeypatch.setattr(T5Runner, "_two_logits", broken)
    assert main(argv) == EXIT_MODEL
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("unieval-local: stopped: the model failed on cpu while scoring a batch of")
    # the micro-batch that failed is split until the one record it fails on is found: every other
    # record is complete and written (in input order up to it, the rest as they completed)
    assert err[-1].endswith(f"CUDA error: an illegal memory access was encountered: 259 of 260 records written "
                            f"to {out}; rerun with --resume")
    assert sorted(x["key"] for x in read(out)) == sorted(f"r{i}" for i in range(260) if i != 255)
    monkeypatch.setattr(T5Runner, "_two_logits", real)
    assert main([*argv, "--resume"]) == 0
    got = read(out)
    assert [x["key"] for x in got] == [f"r{i}" for i in range(260)]  # in input order again


def test_cpu_allocator_failure_backs_off_and_single_query_oom_is_runtime_error(tiny_ckpt, monkeypatch):
    from unieval_local.models.checkpoints import resolve_checkpoint

    runner = T5Runner(load_t5_model(resolve_checkpoint("unieval-sum", tiny_ckpt), "cpu", "float32"),
                      evaluator=EVALUATORS["unieval-sum"], fingerprint="t", batch_tokens=10**6)
    monkeypatch.setattr(runner.t5, "oom_budget", None)  # the model is shared by the process: restored after
    prompts = [f"question: Is this a fluent paragraph? </s> paragraph: Words {i} " * (1 + i % 5) for i in range(30)]
    base = runner.score(prompts, max_length=256)[0]
    real = runner._two_logits

    def allocator(ids, batch, fast):
        if len(batch) > 3:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:118] data. DefaultCPUAllocator: can't allocate "
                               "memory: you tried to allocate 68719476736 bytes. Error code 12")
        return real(ids, batch, fast)

    monkeypatch.setattr(runner, "_two_logits", allocator)
    with pytest.warns(RuntimeWarning, match="out of memory"):
        got = runner.score(prompts, max_length=256)[0]
    assert np.abs(got - base).max() < 1e-5
    monkeypatch.setattr(runner, "_two_logits", lambda *a: (_ for _ in ()).throw(MemoryError()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ModelRuntimeError, match="out of memory on cpu on a single query"):
            runner.score(prompts[:1], max_length=256)


def test_attention_memory_bounds_a_batch(tiny_ckpt, monkeypatch):
    lengths = [1000] * 50 + [100] * 500
    # 64 MiB, 4 heads, float32, 2 tensors (mask and scores): 2,097,152 cells per head
    cells = attention_cells(64, n_heads=4, element_bytes=4)
    assert cells == 64 * 2**20 // (2 * 4 * 4) == 2_097_152
    for batch in plan_batches(lengths, 10**9, max_cells=cells):
        longest = max(lengths[i] for i in batch)
        assert len(batch) == 1 or len(batch) * longest * longest <= cells
    assert len(plan_batches(lengths, 10**9, max_cells=cells)[0]) == 2  # 2 x 1000^2 <= 2.10M < 3 x 1000^2
    assert attention_cells(1024, n_heads=16, element_bytes=4) // 1024**2 == 8  # T5-large, 1,024 tokens: 8 rows
    from unieval_local.models.checkpoints import resolve_checkpoint

    model = load_t5_model(resolve_checkpoint("unieval-sum", tiny_ckpt), "cpu", "float32")
    runner = T5Runner(model, evaluator=EVALUATORS["unieval-sum"], fingerprint="t", batch_tokens=10**7, attention_mib=4)
    seen = []
    real = runner._two_logits
    monkeypatch.setattr(runner, "_two_logits", lambda ids, batch, fast: seen.append(
        (len(batch), max(len(ids[i]) for i in batch))) or real(ids, batch, fast))
    prompts = [f"question: Is this a fluent paragraph? </s> paragraph: {'word ' * 150} {i}" for i in range(40)]
    got = runner.score(prompts, max_length=1024)[0]
    small = attention_cells(4, model.n_heads, model.element_bytes)
    assert all(rows * s * s <= small for rows, s in seen) and len(seen) > 1
    unbounded = T5Runner(model, evaluator=EVALUATORS["unieval-sum"], fingerprint="t", batch_tokens=10**7)
    assert np.abs(got - unbounded.score(prompts, max_length=1024)[0]).max() < 1e-5


# ----------------------------------------------------------------------------- Ctrl-C, progress
@pytest.mark.parametrize("sig, code, what", [(signal.SIGINT, EXIT_INTERRUPTED, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated (SIGTERM)")], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_exit_with_one_line_and_resume_completes(tmp_path, tiny_ckpt, summeval_records, sig,
                                                                     code, what):
    words = " ".join(r["target"] for r in summeval_records).split()
    rows = [{"id": f"r{i}", "target": " ".join(words[i % 500:i % 500 + 6 + i % 7]) + "."} for i in range(1500)]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "o.jsonl"
    argv = [EXE, "score", str(src), "--model", str(tiny_ckpt), "--aspect", "fluency", "--max-length", "48",
            "-o", str(out), "--no-progress"]
    proc = subprocess.Popen(argv, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 250:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == code, err
    assert "Traceback" not in err
    n = len(read(out))
    assert err.strip().splitlines()[-1] == (f"unieval-local: {what}: {n} of 1500 records written to {out}; "
                                            "rerun with --resume")
    assert main(argv[1:] + ["--resume"]) == 0
    assert [x["key"] for x in read(out)] == [r["id"] for r in rows]


def test_a_stop_lost_inside_a_del_still_stops_the_run(tmp_path, fake_ckpt):
    """A signal that lands while a __del__ runs (garbage collection) has its exception
    printed and dropped by Python; the run must stop anyway (the CLI's handler also calls
    request_stop, and the run checks it after each forward batch and request)."""
    from unieval_local import batch as batch_mod

    class Lost:
        def __del__(self):  # what the CLI's signal handler does, inside a __del__
            batch_mod.request_stop(KeyboardInterrupt())
            raise KeyboardInterrupt

    class StoppedOnce(FakeRunner):
        def score(self, prompts, *, max_length, on_batch=None):
            if len(self.calls) == 1:  # during the second micro-batch
                Lost()  # created and collected at once: the KeyboardInterrupt is swallowed
            return super().score(prompts, max_length=max_length, on_batch=on_batch)

    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "target": f"S {i}.", "source": "D."} for i in range(600)])
    out = tmp_path / "o.jsonl"
    runner = StoppedOnce(by_prompt)
    kw = dict(model=fake_ckpt, runner_factory=fake_factory(runner))
    hook, sys.unraisablehook = sys.unraisablehook, lambda u: None
    try:
        with pytest.raises(batch_mod.RunInterrupted) as exc:
            batch_mod.run_batch(src, out, aspects=["coherence"], settings=kw, progress=False)
    finally:
        sys.unraisablehook = hook
    # the stop is seen after the second micro-batch (one query per record, each record its own
    # request): the records of those two micro-batches are complete and written, none after
    done = len(runner.calls[0]) + len(runner.calls[1])
    assert len(runner.calls) == 2 and 0 < done < 600
    assert isinstance(exc.value.cause, KeyboardInterrupt) and exc.value.written == done
    from unieval_local.batch import run as batch_run

    assert len(read(out)) == done and not batch_run._STOP  # cleared for the next run
    batch_mod.run_batch(src, out, aspects=["coherence"], settings=kw, resume=True, progress=False)
    assert [x["key"] for x in read(out)] == list(range(600))


def test_progress_is_logged_per_forward_batch_off_a_terminal(tmp_path, fake_ckpt, monkeypatch, caplog):
    from unieval_local import batch as batch_mod

    seen = []
    real_set = batch_mod.Progress.set
    monkeypatch.setattr(batch_mod.Progress, "set", lambda self, done: seen.append(done) or real_set(self, done))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "target": f"S {i}.", "source": "D."} for i in range(300)])
    out = tmp_path / "o.jsonl"
    # about 10 queries a micro-batch: each record is given back (and counted) as soon as it is scored
    kw = dict(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(by_prompt)), batch_tokens=128)
    with caplog.at_level(logging.INFO, logger="unieval_local"):
        monkeypatch.setattr(batch_mod.Progress, "__init__", _progress_init_every(0.0))
        batch_mod.run_batch(src, out, aspects=["coherence"], settings=kw, progress=None)
    assert seen[-1] == 300 and len({int(x) for x in seen}) > 20  # it moves with each micro-batch and record
    early = [r.getMessage() for r in caplog.records if r.getMessage().startswith("records ")]
    assert early and not early[0].startswith("records 300/300")
    # a resumed run starts at the records already written
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:100]) + "\n")
    starts = []
    monkeypatch.setattr(batch_mod.Progress, "__init__", _progress_init_every(0.0, starts))
    batch_mod.run_batch(src, out, aspects=["coherence"], settings=kw, resume=True, progress=None)
    assert starts == [(300, 100)]


def _progress_init_every(every, starts=None):
    from unieval_local import batch as batch_mod
    from unieval_local.progress import LogLines

    real = batch_mod.Progress.__dict__["__init__"]

    def init(self, total, initial=0, enabled=None, every_=every):
        if starts is not None:
            starts.append((total, initial))
        real(self, total, initial, enabled, every)
        self.lines = LogLines("records", total, initial, every)  # as when stderr is not a terminal
        self.bar = None

    return init


BLOCKER = """
import importlib.machinery, sys
_find = importlib.machinery.PathFinder.find_spec
def _absent(cls, name, path=None, target=None):  # these packages look uninstalled
    if name.split('.')[0] in ('scipy', 'sklearn', 'networkx', 'matplotlib', 'jinja2', 'pandas'):
        return None
    return _find(name, path, target)
importlib.machinery.PathFinder.find_spec = classmethod(_absent)
"""


def test_the_core_runs_without_the_optional_extras(tmp_path, tiny_ckpt, shared_data):
    """score/tasks/verify need only the base install; meta, report-html and report name their extra."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "A summary.", "source": "A document."}])
    code = BLOCKER + f"""
from unieval_local.cli import main
codes = [main(["score", {str(src)!r}, "--model", {str(tiny_ckpt)!r}, "--aspect", "all", "--no-progress",
               "-o", {str(tmp_path / 'o.jsonl')!r}]),
         main(["tasks"]), main(["verify", {str(tiny_ckpt)!r}]),
         main(["meta", {str(shared_data / 'unieval-reproduce/predict/fact/qags_xsum_result.json')!r}]),
         main(["report", {str(src)!r}, "--format", "summ", "--model", {str(tiny_ckpt)!r}]),
         main(["report-html", {str(tmp_path / 'o.jsonl')!r}, "-o", {str(tmp_path / 'r.html')!r}])]
mods = sorted(m for m in ('scipy', 'sklearn', 'networkx', 'matplotlib', 'jinja2') if m in sys.modules)
print("CODES", codes, mods)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert "CODES [0, 0, 0, 2, 2, 2] []" in run.stdout, run.stdout + run.stderr
    for extra in ("meta", "reports", "html"):
        assert f"pip install 'unieval-local[{extra}]'" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_report_run_off_a_terminal_logs_query_progress(tiny_ckpt, monkeypatch, caplog):
    """report (and any engine with progress=None) shows no bar when stderr is not a terminal
    (a SLURM log): the T5 runner logs 'queries done/total' lines instead."""
    from unieval_local import progress as progress_mod
    from unieval_local.engine import Engine
    from unieval_local.reports import make_report

    monkeypatch.setattr(progress_mod, "LOG_EVERY_S", 0.0)
    engine = Engine(model=tiny_ckpt, progress=None, batch_tokens=64)
    recs = [{"summary": f"The council voted {k} times.", "input": "The council met. It voted twice. " * 3}
            for k in range(6)]
    with caplog.at_level(logging.INFO, logger="unieval_local"):
        make_report(recs, "summ", engine=engine, warn=False)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("queries ")]
    assert len(lines) >= 2, lines
    done = [int(m.split()[1].split("/")[0]) for m in lines]
    totals = {int(m.split()[1].split("/")[1]) for m in lines}
    assert done == sorted(done) and len(totals) == 1 and done[-1] == totals.pop()
    # with progress=False (the library default) nothing is logged
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="unieval_local"):
        make_report(recs, "summ", engine=Engine(model=tiny_ckpt, progress=False, batch_tokens=64), warn=False)
    assert not [r for r in caplog.records if r.getMessage().startswith("queries ")]
