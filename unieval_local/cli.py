"""The ``unieval-local`` command line.

Commands: ``score`` (the batch pipeline: resume, shards, Ray), ``merge`` (join shard
outputs), ``download`` / ``verify`` (stage checkpoints for offline machines), ``tasks``
(the registry), ``meta`` / ``compare`` (agreement with human scores, paired test),
``report-html`` (a self-contained report) and ``report`` (rating / summ / autoeval
report formats, see :mod:`unieval_local.reports`). Each command's ``--help`` gives its inputs.

Exit status of ``unieval-local score``:
    0  every record was scored;
    1  some records failed: each has an error record in the output (with
       --output-format hosted, its request is one request-level error line
       naming every bad example and field), the others are scored;
    2  usage error, unreadable or empty input, no record scorable for the aspects
       (wrong field names), unwritable output, unavailable device, or another
       process is writing the same output (it holds OUT.lock: the message names
       its pid, host and start time) (nothing scored);
    3  checkpoint not found or not loadable, e.g. weights that do not match the
       config (nothing scored);
    4  writing the output or its sidecar failed (disk full, the file-size limit
       of ``ulimit -f``): the records written before are intact; rerun with --resume;
    5  the model failed while scoring (out of memory on a single query, a CUDA or
       cuBLAS error, the CPU allocator's "can't allocate memory"): the records
       written before are intact; rerun with --resume;
    130  interrupted (Ctrl-C): the records written before are intact; rerun with --resume;
    143  terminated by SIGTERM (a scheduler's preemption), also while the model
       is still loading: the same as 130.

A score cache (``--cache-dir``) that fails (damaged or foreign file, read-only, disk
full, folder not creatable) changes no exit status: the run goes on without it after
one ``unieval-local: warning:`` line, and its summary says the cache was disabled.
``report -o`` and ``merge -o`` hold the same output lock (exit 2 when another process
writes that output) and exit 4 when writing the output fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence

EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_CHECKPOINT, EXIT_WRITE, EXIT_MODEL = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


def _usage_exit(message: str):
    """Print a usage error and exit with status 2 (argparse's convention)."""
    print(f"unieval-local: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _model_arg(values: list[str] | None):
    """``--model DIR`` (every task) or ``--model NAME=DIR`` (repeatable mapping); exits 2 when malformed."""
    if not values:
        return None
    if len(values) == 1 and "=" not in values[0]:
        if not values[0].strip():
            _usage_exit("--model needs a folder or hub id, got an empty string")
        return values[0]
    mapping = {}
    for v in values:
        if "=" not in v:
            _usage_exit(f"--model given several times must be NAME=DIR each, got {v!r}")
        name, _, path = v.partition("=")
        if not name.strip() or not path.strip():
            _usage_exit(f"--model NAME=DIR needs both a name and a folder, got {v!r}")
        mapping[name.strip()] = path.strip()
    return mapping


def _number(kind: type, low: float, *, strict: bool = False, high: float | None = None):
    """An argparse ``type`` for a number of ``kind`` >= ``low`` (> ``low`` when ``strict``,
    <= ``high`` when given): argparse names the flag in its error, e.g.
    ``argument --batch-tokens: must be an integer >= 1, got '0'``."""
    what = "an integer" if kind is int else "a number"
    bound = f"{'>' if strict else '>='} {low:g}" + (f" and <= {high:g}" if high is not None else "")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what} {bound}, got {text!r}") from None
        if value != value or (value <= low if strict else value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what} {bound}, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _task_name(text: str) -> str:
    """``--task``: a task of the registry, with a did-you-mean for a near miss."""
    from .tasks import DEFAULT_REGISTRY
    from .errors import UnknownTaskError

    try:
        return DEFAULT_REGISTRY.get_task(text).name
    except UnknownTaskError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dtype(text: str) -> str:
    """``--dtype``: float32 or bfloat16; float16 is refused with the reason (T5 overflows)."""
    from .config import check_dtype

    try:
        return check_dtype(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _read_outputs(path: str) -> list[dict]:
    """Records of a ``score`` output; ValueError naming the file when it is not one."""
    from .records import read_score_output

    return read_score_output(path, "compare")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    """The checkpoint and engine flags that ``score`` and ``report`` share (``--long-input`` is
    per command: its default differs)."""
    from .config import DTYPES
    from .tasks import CHECKPOINTS

    p.add_argument("--model", action="append", metavar="DIR|HUB_ID|NAME=DIR",
                   help="checkpoint folder or hub id for every task, or NAME=DIR per checkpoint "
                   f"({', '.join(CHECKPOINTS)}); default: $UNIEVAL_LOCAL_HOME, HF cache, hub")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument("--dtype", default="float32", type=_dtype, metavar="{" + ",".join(DTYPES) + "}",
                   help="float32 (UniEval parity, default) or bfloat16 (GPU); float16 is refused "
                   "(T5 overflows to NaN)")
    p.add_argument("--max-length", type=_number(int, 8), default=None,
                   help="tokens per query (default: the evaluator's own, 1024 for UniEval, 2048 for MiniCheck)")
    p.add_argument("--chunk-words", type=_number(int, 1), default=500,
                   help="words per document chunk for evaluators that chunk the document themselves "
                   "(MiniCheck's chunk_size; default 500)")
    p.add_argument("--batch-tokens", type=_number(int, 1), default=8192,
                   help="most padded tokens (rows x longest prompt) per forward pass (default 8192)")
    p.add_argument("--attention-mib", type=_number(float, 0, strict=True), default=1024,
                   help="most MiB of encoder attention scores per forward pass (rows x heads x longest^2 x "
                   "bytes; default 1024): bounds memory for long prompts, which --batch-tokens alone does not")
    p.add_argument("--offline", action="store_true", help="never use the network (as HF_HUB_OFFLINE=1)")
    p.add_argument("--cache-dir", default=None,
                   help="persistent score cache folder (SQLite): queries scored before with the same "
                   "checkpoint content and settings are not run again; a cache that fails (damaged, "
                   "read-only, disk full, folder not creatable) is skipped after one warning, with the same scores")
    p.add_argument("--threads", type=_number(int, 1), default=None,
                   help="CPU threads for the model (torch.set_num_threads; default: torch's, one per core); "
                   "on a machine shared with other jobs, give your share of the cores")
    p.add_argument("--merge-punctuation", action="store_true",
                   help="sentence-level aspects: a piece without letters ('?', '1.', '!!') joins a neighbouring "
                   "sentence instead of being scored as one (default: scored, as UniEval does)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _build_parser() -> argparse.ArgumentParser:
    from .batch import BATCH_ENGINES, OUTPUT_FORMATS
    from .config import LONG_INPUT_MODES, MAX_EXAMPLES_PER_REQUEST, REFERENCE_REDUCTIONS
    from .evaluators import EVALUATORS
    from .reports import FORMATS
    from .reports.common import consistency_aspects
    from .tasks import CHECKPOINTS, TASKS

    parser = argparse.ArgumentParser(
        prog="unieval-local",
        description="UniEval-exact evaluation of generated text with local T5 checkpoints.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"unieval-local {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    aspects_help = "; ".join(f"{t}: {', '.join(task.aspects)}" for t, task in TASKS.items())
    sc = sub.add_parser(
        "score",
        help="score a .jsonl/.json/.csv/.tsv file of records, or line-aligned text files",
        description=(
            "Score every record of INPUT (.jsonl, '-' for JSONL on stdin, a .json list, or .csv/.tsv "
            "with a header row of field names), or of line-aligned text files (--targets T.txt "
            "[--sources S.txt] [--references R.txt ...] [--contexts C.txt] instead of INPUT: line i of "
            "each file is example i), for one or more aspects, and write one JSON line per "
            "record, in input order: {index, key, [doc_id, system_id], scores: {aspect: value}} "
            "or {index, key, error: {type, message}}. Text is UTF-8 (a BOM is accepted); only \\n ends "
            "a line. A record that cannot be read (invalid JSON or CSV; text holding a lone UTF-16 "
            "surrogate such as \\ud83d, type InvalidText, its key written with the 6-character escape) "
            "is an error record and the others are scored. Records are sent in requests of at most "
            "250. The mean per aspect (and per system_id) is printed on stderr. Exit status: "
            "0 all scored, 1 some records failed (the rest are scored), 2 usage, input, output, "
            "device or resume error, no record scorable for the aspects, or another process is writing OUTPUT "
            "(one writer per output: the run holds OUTPUT.lock, and the message names the holder's pid, host "
            "and start time), 3 checkpoint not found "
            "or not loadable, 4 writing the output or its sidecar failed (disk full, file-size limit), 5 the "
            "model failed while scoring (out of memory, CUDA "
            "error), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM, also while the model loads); after 4, "
            "5, 130 and 143 the records "
            "written are intact: rerun with --resume (which also repairs a torn last line and drops duplicate "
            "lines of a record, keeping the first). A failing --cache-dir is skipped with one warning. --output-format hosted writes instead one line per "
            "request, {overall: {value}, examples: [{value}]}, or {error: {type, message, n_examples, examples: "
            "[{index, record, key, field, message}]}} for a request holding a record that cannot be scored, as the hosted UniEval "
            "metric answers it (one aspect; no --resume, --shard, --engine ray or --evidence)."
        ),
    )
    sc.add_argument("input", nargs="?", default=None,
                    help="records: .jsonl (streamed; '-' for stdin), a .json list, or .csv/.tsv (header row = "
                    "field names; an empty cell is a missing field; references: one text or a JSON list "
                    '["a", "b"]); leave it out with --targets')
    sc.add_argument("--targets", default=None, metavar="T.txt",
                    help="instead of INPUT: the texts under evaluation, one per line (a line's text as it is; a "
                    "blank line is an empty target, an error record)")
    sc.add_argument("--sources", default=None, metavar="S.txt",
                    help="with --targets: the source of each target, one per line")
    sc.add_argument("--references", action="append", default=None, metavar="R.txt",
                    help="with --targets: one reference per line; repeat it for several references per example")
    sc.add_argument("--contexts", default=None, metavar="C.txt",
                    help="with --targets: the context of each target, one per line. Every file must have the "
                    "same number of lines (else exit 2); --resume checks every file")
    sc.add_argument("--task", default="summarization", type=_task_name, metavar="{" + ",".join(TASKS) + "}",
                    help="task (default summarization)")
    sc.add_argument("--aspect", action="append", dest="aspects", metavar="ASPECT",
                    help=f"aspect to score, repeatable; 'all' for every aspect of the task (default, as UniEval's "
                    f"evaluate: every aspect of the task that the records have the fields for). {aspects_help}")
    sc.add_argument("--aspects-config", default=None, metavar="FILE",
                    help="YAML file of user-defined aspects (see configs/aspects.example.yaml)")
    _add_model_args(sc)
    sc.add_argument("--reference-reduction", default="mean", choices=list(REFERENCE_REDUCTIONS),
                    help="combine scores over several references (default mean)")
    sc.add_argument("--long-input", default="truncate", choices=list(LONG_INPUT_MODES),
                    help="prompts over --max-length: truncate (UniEval: the end is cut; default), fit "
                    "(shorten the document/reference/history, never the target) or chunk (score against "
                    "windows of the long field and combine)")
    sc.add_argument("--window-overlap", type=_number(int, 0), default=None,
                    help="sentences (dialogue turns) shared by consecutive windows in chunk mode (default 1; "
                    "keep it below a window's sentence count, or windows only advance one sentence at a time)")
    sc.add_argument("--evidence", action="store_true",
                    help="add per-sentence scores, windows and truncation flags to each output line")
    sc.add_argument("--no-fast-forward", dest="fast_forward", action="store_false",
                    help="run the model's own forward instead of our exact single-step forward "
                    "(slower; for checking)")
    sc.add_argument("--output", "-o", default=None, help="output .jsonl (default, or '-': stdout)")
    sc.add_argument("--output-format", default="records", choices=list(OUTPUT_FORMATS),
                    help="records (default): one line per record; hosted: one line per request of at most "
                    f"{MAX_EXAMPLES_PER_REQUEST} records in the hosted UniEval metric's schema, "
                    '{"overall": {"value": mean}, "examples": [{"value": v}, ...]}; a request holding a record '
                    'that cannot be scored is one line {"error": {"type", "message", "n_examples", "examples": '
                    '[{"index", "record", "key", "field", "message"}]}} (the hosted metric answers a request whole '
                    "or not at all); exactly one --aspect, and no --resume, "
                    "--shard, --engine ray or --evidence (use records for batch runs)")
    sc.add_argument("--resume", action="store_true",
                    help="continue OUTPUT: skip records already in it (refused if the run or input differ); a torn "
                    "last line is repaired, and duplicate lines of a record (two runs at once) are dropped, "
                    "keeping the first")
    sc.add_argument("--shard", default=None, metavar="K/N",
                    help="score only the records whose key hashes to K modulo N (for job arrays; join with merge)")
    sc.add_argument("--engine", default="local", choices=list(BATCH_ENGINES),
                    help="local (default) or ray: requests go to a Ray Data pool of scorer actors")
    sc.add_argument("--ray-actors", type=_number(int, 1), default=1, help="scorer actors (one model each) with --engine ray")
    sc.add_argument("--gpus-per-actor", type=_number(float, 0), default=0.0, help="GPUs per Ray actor (default 0)")
    sc.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local Ray instance)")

    mg = sub.add_parser(
        "merge",
        help="join shard outputs (--shard K/N runs) into one file",
        description="Join the outputs of --shard 0/N ... N-1/N runs into OUTPUT in input order, after "
        "checking that they come from the same run and input, that every shard is there once and "
        "complete, and that no key is missing or duplicated (across shards or within one). Prints the overall "
        "per aspect. OUTPUT is written atomically, holding OUTPUT.lock meanwhile. Exit 0, 2 when a check fails "
        "or another process is writing OUTPUT (nothing written), 4 when writing OUTPUT failed.",
    )
    mg.add_argument("outputs", nargs="+", help="the shard outputs")
    mg.add_argument("--output", "-o", required=True, help="the merged JSONL (not overwritten without --force)")
    mg.add_argument("--force", action="store_true", help="overwrite an existing --output")

    dl = sub.add_parser(
        "download",
        help="stage checkpoints for an offline machine (run where the hub is reachable)",
        description="Fetch only the files a checkpoint needs (config, weights, tokenizer) into "
        "DIR/<checkpoint>/ with a SHA-256 manifest. Copy DIR to the offline machine and set "
        "UNIEVAL_LOCAL_HOME=DIR.",
    )
    dl.add_argument("--task", choices=list(TASKS), help="stage the checkpoints this task uses")
    dl.add_argument("--checkpoint", action="append", choices=list(CHECKPOINTS), help="checkpoint name, repeatable")
    dl.add_argument("--to", required=True, help="folder to write into (use it as UNIEVAL_LOCAL_HOME)")
    dl.add_argument("--revision", default=None, help="hub branch, tag or commit (default main)")

    mt = sub.add_parser(
        "meta",
        help="correlation of scores with human judgements",
        description="Pearson, Spearman and Kendall correlations between predicted and human scores at sample, "
        "summary (per document, averaged; documents with constant scores skipped, as UniEval does) and system "
        "level, per aspect, with seeded bootstrap 95% intervals (documents resampled when doc ids exist). "
        "PREDICTIONS is a UniEval reproduce file (its records hold predict_scores and the human scores in "
        "scores) or a score output joined by key to --human FILE (the scored input; human scores in the "
        "field 'human', as scripts/convert_summeval.py writes them).",
    )
    mt.add_argument("predictions")
    mt.add_argument("--human", default=None, metavar="FILE",
                    help="records with id and human scores (e.g. the score input), joined by key")
    mt.add_argument("--human-field", default=None, metavar="FIELD",
                    help="field of the human scores (default: 'human' with --human, as scripts/convert_summeval.py "
                    "writes; 'scores' in a UniEval reproduce file)")
    mt.add_argument("--aspect", action="append", dest="aspects", help="aspects (default: all in common)")
    mt.add_argument("--human-aspect", action="append", default=None, metavar="PREDICTED=HUMAN",
                    help="compare a predicted aspect with a human score of another name, e.g. support=consistency "
                    "for MiniCheck's fact/support against QAGS's consistency (repeatable)")
    mt.add_argument("--bootstrap", type=_non_negative, default=1000, help="bootstrap resamples (default 1000; 0 = none)")
    mt.add_argument("--seed", type=int, default=0)
    mt.add_argument("--json", dest="json_out", default=None, help="also write the table as JSON here")
    mt.add_argument("--no-progress", action="store_true",
                    help="no progress bar over resamples (it shows only when stderr is a terminal)")

    cp = sub.add_parser(
        "compare",
        help="paired bootstrap test: are systems better than a baseline?",
        description="Paired bootstrap test (Koehn 2004), per aspect, of whether each system's mean score is "
        "above the baseline's: one row per (system, aspect) with both means, the delta, its 95% interval and "
        "the one-sided p-value (not corrected for multiple comparisons). Two forms: "
        "'compare BASE.jsonl B.jsonl [C.jsonl ...]' compares each output with the first, joined by key; "
        "'compare OUT.jsonl --baseline SYSTEM' compares every other system_id of one output with SYSTEM, "
        "paired on doc_id (--baseline is required there: a file's system order is arbitrary).",
    )
    cp.add_argument("outputs", nargs="+", metavar="OUT.jsonl",
                    help="score outputs: the baseline then the others, or one output with system_id and doc_id")
    cp.add_argument("--baseline", default=None, metavar="SYSTEM",
                    help="one-output form: the system_id the others are compared with (required there)")
    cp.add_argument("--bootstrap", type=_non_negative, default=1000, help="bootstrap resamples (default 1000)")
    cp.add_argument("--seed", type=int, default=0)

    rh = sub.add_parser(
        "report-html",
        help="a self-contained HTML report of a score output",
        description="Score distributions, per-system means with intervals, lowest-scoring examples with "
        "sentences coloured by score and source windows, truncation counts and the run signature, in one "
        "HTML file that needs no network.",
    )
    rh.add_argument("output_jsonl", metavar="OUT.jsonl")
    rh.add_argument("--output", "-o", required=True, help="the HTML file to write")
    rh.add_argument("--input", default=None, help="the scored input, for target text and source windows")
    rh.add_argument("--title", default=None)
    rh.add_argument("--lowest", type=_number(int, 0), default=5, help="lowest-scoring examples per aspect (default 5)")

    rp = sub.add_parser(
        "report",
        help="rating / summ / autoeval reports from UniEval queries (no LLM)",
        description="Build one report per record of INPUT (.jsonl or .json; fields of score, also under "
        "the other evaluators' names: input/transcript for source, summary/output for target; plus report "
        "inputs: key_points, n_key_points, max_n_claims, threshold, section_definitions, section_questions, "
        "instructions, categorical, sections; for summ also a hosted custom-run request body "
        "{threshold, model_slug, evaluations: [...]}) and write one JSON document {format, n_records, "
        "n_reported, n_errors, aggregate, n_queries, n_truncated, settings, notes, reports: [{index, id, "
        "report | error, notes}]}. Each report has the documented shape of its format: rating {summary: "
        "{global_explanation, relevancy_rating, score, possible_issues, binary_score, avg_score, <metric>: "
        "{score, explanation, normalized_score}}} (1-3 per metric, normalized = score/3, a good/incomplete/bad "
        "rule engine); summ {score 0-100, passed, threshold, ..., eval_metadata: {missing_details, "
        "misaligned_details, ...}} (claim alignment and key-point coverage); autoeval {accuracy, "
        "accuracy_score, adherence: {rubrics}, adherence_score, completeness: [...], completeness_score}. "
        "Long sources are read in windows (--long-input chunk by default). Exit status: 0 every record "
        "reported, 1 some records have an "
        "error row (the rest are reported), 2 usage, input, option or output error, or another process is "
        "writing OUTPUT (-o holds OUTPUT.lock from before the model loads until it is written), 3 checkpoint "
        "not found or not loadable, 4 writing the output failed. A failing --cache-dir is skipped with one "
        "warning.",
    )
    rp.add_argument("input", help="records: .jsonl ('-' for stdin) or a .json list")
    rp.add_argument("--format", required=True, choices=list(FORMATS), dest="report_format")
    rp.add_argument("--output", "-o", default=None, help="the JSON document to write (default stdout)")
    rp.add_argument("--config", default=None, metavar="FILE.yaml",
                    help="the format's options as YAML (rating: see configs/rating.yaml); flags below override it")
    rp.add_argument("--enabled-metrics", default=None, metavar="M1,M2",
                    help="rating: metrics to rate, comma-separated (default coherence,consistency,relevance,fluency)")
    rp.add_argument("--language", default=None, help="rating: explanation template set (default en; fr built in)")
    rp.add_argument("--threshold", type=_number(float, 0, high=100), default=None, help="summ: pass mark on the 0-100 score (default 80)")
    rp.add_argument("--n-key-points", type=_number(int, 1), default=None,
                    help="summ, rating: key points to extract (default clamp(round(sqrt(candidate sentences)), 5, 15))")
    rp.add_argument("--max-n-claims", type=_number(int, 1), default=None,
                    help="summ, autoeval: summary sentences checked (default 50)")
    rp.add_argument("--section-question", action="append", default=None, dest="section_questions", metavar="Q",
                    help="autoeval: a completeness question, e.g. 'the dates mentioned' (repeatable; records' "
                    "section_questions take precedence)")
    rp.add_argument("--instruction", action="append", default=None, dest="instructions", metavar="TEXT",
                    help="autoeval: an instruction the summary should follow (repeatable)")
    rp.add_argument("--categorical", action="append", default=None, metavar="NAME=V1|V2",
                    help="autoeval: a categorical section and its allowed values (repeatable)")
    rp.add_argument("--details", action="store_const", const=True, default=None,
                    help="rating, autoeval: also write each report's details (probabilities, cut points, windows, "
                    "offsets) beside the documented fields")
    rp.add_argument("--plain-booleans", action="store_const", const=True, default=None,
                    help="autoeval: is_addressed / is_covered as JSON booleans instead of the strings \"True\"/\"False\"")
    rp.add_argument("--consistency-aspect", default=None, choices=consistency_aspects(), metavar="TASK/ASPECT",
                    help="the aspect that answers consistency-like queries (claims, key points, support): "
                    "summarization/consistency (unieval-sum, default), fact/consistency (unieval-fact), "
                    "fact/support (MiniCheck-Flan-T5, its own protocol), fact/sentence_support ...; choices: %(choices)s")
    _add_model_args(rp)
    rp.add_argument("--long-input", default="chunk", choices=list(LONG_INPUT_MODES),
                    help="prompts over --max-length: chunk (default here: read long sources in windows), "
                    "fit or truncate (UniEval)")

    tk = sub.add_parser(
        "tasks",
        help="list tasks and aspects",
        description="Print every task and aspect: the fields it needs, granularity, range and checkpoint.",
    )
    tk.add_argument("--aspects-config", default=None, metavar="FILE", help="include user-defined aspects")

    cb = sub.add_parser(
        "calibration",
        help="print the calibration card of the rating report's built-in cut points",
        description="Print the card of the built-in rating cut points: fitted on the official unieval-sum's "
        "SummEval scores against the expert ratings (binned < 2.5 -> 1, < 4 -> 2, else 3), with the "
        "cross-validated accuracy and quadratic kappa (95% intervals over documents) of the fitted cut points "
        "and of the thirds, what the card holds for, and the command that refits it "
        "(scripts/fit_calibration.py). Exit 0.",
    )
    cb.add_argument("--json", action="store_true", dest="card_json", help="print the card as JSON instead")

    vf = sub.add_parser(
        "verify",
        help="check staged checkpoints offline",
        description="Check a checkpoint folder, or a home folder of them: files present, SHA-256 "
        "as in the manifest, config and tokenizer load, Yes/No tokens exist. Exit 0 if all pass, 1 if not.",
    )
    vf.add_argument("dir", help="a checkpoint folder or a folder holding several")
    vf.add_argument("--evaluator", default=None, choices=list(EVALUATORS),
                    help="the evaluator whose answer words to check (default: the one the folder is named after, "
                    "else unieval's Yes/No)")
    return parser


def cmd_score(args: argparse.Namespace) -> int:
    """``unieval-local score``: see the module docstring for output and exit status.

    ``--output-format records`` (default) writes one line per record; ``hosted`` one line per
    request in the hosted metric's schema (:func:`unieval_local.batch.hosted_line`), with the
    same exit statuses (1 when some records failed; 2 for a hosted run with zero or several
    aspects, ``--resume``, ``--shard``, ``--engine ray`` or ``--evidence``). The summary goes to
    stderr in both formats.

    The input is INPUT or line-aligned files (``--targets`` [``--sources``, ``--references`` ...,
    ``--contexts``]: a :class:`~unieval_local.records.AlignedInput`); exit 2 when both or
    neither are given, when ``--sources`` / ``--references`` / ``--contexts`` come without
    ``--targets``, or when the aligned files differ in line count (each named with its count)."""
    from .batch import (OutputWriteError, ResumeError, RunInterrupted, format_summary, parse_shard, request_stop,
                        run_batch)
    from .errors import CheckpointError, CheckpointNotFoundError
    from .records import AlignedInput, InputFileError

    extra = [flag for flag, v in (("--sources", args.sources), ("--references", args.references),
                                  ("--contexts", args.contexts)) if v]
    if args.input is not None and args.targets is not None:
        return _usage_error(f"give INPUT ({args.input}) or --targets, not both")
    if args.input is None and args.targets is None:
        return _usage_error("give INPUT (.jsonl, .json, .csv, .tsv, or - for stdin) or --targets T.txt "
                            "[--sources S.txt] [--references R.txt] [--contexts C.txt]")
    if args.input is not None and extra:
        return _usage_error(f"{' and '.join(extra)} go with --targets (line-aligned text files), not with INPUT "
                            f"{args.input}: put those fields in the records")
    source = (args.input if args.input is not None else
              AlignedInput(args.targets, args.sources, tuple(args.references or ()), args.contexts))
    settings = dict(
        model=_model_arg(args.model), device=args.device, dtype=args.dtype, max_length=args.max_length,
        batch_tokens=args.batch_tokens, reference_reduction=args.reference_reduction, offline=args.offline,
        cache_dir=args.cache_dir, fast_forward=args.fast_forward, aspects_config=args.aspects_config,
        long_input=args.long_input, window_overlap=1 if args.window_overlap is None else args.window_overlap,
        attention_mib=args.attention_mib, chunk_words=args.chunk_words, merge_punctuation=args.merge_punctuation,
        threads=args.threads,
    )
    engine_options = ({"actors": args.ray_actors, "gpus_per_actor": args.gpus_per_actor, "address": args.ray_address}
                      if args.engine == "ray" else {})
    ray_flags = [f for f, v, default in (("--ray-actors", args.ray_actors, 1), ("--gpus-per-actor", args.gpus_per_actor, 0.0),
                                         ("--ray-address", args.ray_address, None)) if v != default]
    if ray_flags and args.engine != "ray":
        print(f"unieval-local: warning: {', '.join(ray_flags)} apply to --engine ray (ignored with --engine "
              f"{args.engine})", file=sys.stderr)
    if args.window_overlap is not None and args.long_input != "chunk":
        print(f"unieval-local: warning: --window-overlap only applies to --long-input chunk "
              f"(ignored with {args.long_input})", file=sys.stderr)
    aspects = None if not args.aspects else ("all" if "all" in args.aspects else list(dict.fromkeys(args.aspects)))
    import signal

    from .errors import Terminated

    def on_signal(signum, frame):  # Ctrl-C, or preemption (SIGTERM): stop, keeping what was written
        exc = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
        request_stop(exc)  # in case this raise is lost in a __del__ (request_stop says why)
        raise exc

    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = ({n: signal.signal(n, on_signal) for n in (signal.SIGTERM, signal.SIGINT)} if main_thread else {})
    default_unraisable = sys.unraisablehook

    def quiet_stop(unraisable):  # a stop raised inside a __del__: no "Exception ignored" traceback,
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):  # request_stop has it (Terminated too)
            default_unraisable(unraisable)

    sys.unraisablehook = quiet_stop
    try:
        summary = run_batch(
            source, args.output, task=args.task, aspects=aspects, settings=settings,
            resume=args.resume, shard=parse_shard(args.shard), engine=args.engine, engine_options=engine_options,
            evidence=args.evidence,
            progress=False if args.no_progress else None, output_format=args.output_format,
        )
    except RunInterrupted as exc:
        print(f"unieval-local: {exc}", file=sys.stderr)
        if isinstance(exc.cause, Terminated):
            return EXIT_TERMINATED
        return EXIT_INTERRUPTED if isinstance(exc.cause, KeyboardInterrupt) else EXIT_MODEL
    except (CheckpointNotFoundError, CheckpointError) as exc:
        print(f"unieval-local: error: {exc}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except OutputWriteError as exc:
        print(f"unieval-local: error: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE
    except (ResumeError, InputFileError, ValueError, OSError) as exc:  # also unknown aspects, bad config, device
        return _usage_error(exc)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = default_unraisable
    print(format_summary(summary), file=sys.stderr)
    for aspect, why in summary.skipped_aspects.items():
        print(f"skipped aspect {aspect} ({'--aspect all' if args.aspects else 'no --aspect: every aspect that can run'}"
              f"): {why}", file=sys.stderr)
    if summary.hint_message:
        print(f"warning: {summary.hint_message}", file=sys.stderr)
    if summary.n_non_latin:
        print(f"warning: {summary.n_non_latin} target(s) are mostly in a non-Latin script; the UniEval "
              "evaluators were trained on English only, so their scores there mean little", file=sys.stderr)
    stats = summary.stats
    if stats.n_truncated:
        from .engine import truncation_message

        print(f"warning: {truncation_message(stats, summary.max_lengths, args.long_input, cli=True)}",
              file=sys.stderr)
    if stats.n_shortened:
        print(f"warning: {stats.n_shortened} of {stats.n_queries} distinct queries had a long field "
              "shortened to fit (--long-input fit reads only its beginning; chunk reads all of it); "
              "--evidence shows the windows", file=sys.stderr)
    return EXIT_ROWS_FAILED if summary.n_failed else EXIT_OK


def cmd_merge(args: argparse.Namespace) -> int:
    """``unieval-local merge``: join shard outputs after checking coverage
    (:func:`unieval_local.batch.merge_outputs`, which holds the output's lock and writes it
    atomically).

    Returns:
        0; 2 when a check fails, a shard cannot be read or another process holds the output's
        lock (nothing written); 4 when writing the output failed (it is unchanged).
    """
    from .batch import MergeError, OutputWriteError, format_summary, merge_outputs
    from .locks import OutputLockedError

    try:
        summary = merge_outputs(args.outputs, args.output, force=args.force)
    except OutputWriteError as exc:
        print(f"unieval-local: error: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE
    except (MergeError, OSError, OutputLockedError) as exc:
        return _usage_error(exc)
    print(format_summary(summary), file=sys.stderr)
    print(f"merged {len(args.outputs)} shards into {args.output}", file=sys.stderr)
    return EXIT_OK


def cmd_download(args: argparse.Namespace) -> int:
    """``unieval-local download``: stage checkpoints with a manifest; exit 0, or 3 on failure."""
    from .checkpoints import download_checkpoint
    from .tasks import get_task

    names = list(args.checkpoint or [])
    if args.task:
        names += [a.checkpoint for a in get_task(args.task).aspects.values()]
    names = list(dict.fromkeys(names))
    if not names:
        print("unieval-local: error: give --task or --checkpoint", file=sys.stderr)
        return EXIT_USAGE
    for name in names:
        try:
            folder = download_checkpoint(name, args.to, revision=args.revision, progress=True)
        except Exception as exc:
            print(f"unieval-local: error: downloading {name} failed: {_download_problem(exc)}", file=sys.stderr)
            return EXIT_CHECKPOINT
        print(f"staged {name} in {folder}", file=sys.stderr)
    print(f"done; on the offline machine: export UNIEVAL_LOCAL_HOME={args.to}", file=sys.stderr)
    return EXIT_OK


_OFFLINE = ("OfflineModeIsEnabled",)
_NO_NETWORK = ("ConnectError", "ConnectionError", "ConnectTimeout", "NameResolutionError", "MaxRetryError",
               "gaierror", "TimeoutError", "ReadTimeout", "ConnectTimeoutError", "NewConnectionError")


def _download_problem(exc: BaseException) -> str:
    """Why a download failed, in plain words for the two common causes (offline mode is set;
    the hub cannot be reached), else the error's type and message."""
    seen, e = [], exc
    while e is not None and len(seen) < 10:
        seen.append(type(e).__name__)
        e = e.__cause__ or e.__context__
    if any(n in _OFFLINE for n in seen):
        return ("offline mode is set (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1), and download needs the network: "
                "unset it on a machine that reaches the Hugging Face hub")
    if any(n in _NO_NETWORK for n in seen):
        return ("this machine cannot reach the Hugging Face hub (huggingface.co): no network, or the hub is blocked. "
                "Run `unieval-local download` on a machine that reaches it, then copy the folder here and set "
                "UNIEVAL_LOCAL_HOME to it")
    return f"{type(exc).__name__}: {exc}"


def _usage_error(exc: BaseException) -> int:
    """Print ``exc`` as a one-line CLI error and return the usage exit status (2)."""
    print(f"unieval-local: error: {exc}", file=sys.stderr)
    return EXIT_USAGE


def cmd_meta(args: argparse.Namespace) -> int:
    """``unieval-local meta``: print correlations; exit 0, or 2 on unusable input.

    Human scores: ``--human-field`` (default ``human`` with ``--human FILE``, ``scores`` in a
    UniEval reproduce file; see :func:`unieval_local.meta.load_items`). A progress bar over
    the bootstrap resamples shows on a terminal unless ``--no-progress``.
    """
    from .meta import format_meta, load_items, meta_evaluate, rename_human

    try:
        items = load_items(args.predictions, args.human, args.human_field)
        for pair in args.human_aspect or []:
            pred, sep, human = pair.partition("=")
            if not sep or not pred.strip() or not human.strip():
                raise ValueError(f"--human-aspect wants PREDICTED=HUMAN, got {pair!r}")
            items = rename_human(items, human.strip(), pred.strip())
        result = meta_evaluate(items, args.aspects, n_boot=args.bootstrap, seed=args.seed,
                               progress=False if args.no_progress else None)
    except (ValueError, OSError, KeyError) as exc:
        return _usage_error(exc)
    print(format_meta(result))
    if args.json_out:
        import math

        def clean(x):  # strict JSON: NaN -> null
            if isinstance(x, float) and math.isnan(x):
                return None
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            return x

        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(clean({"n": result.n, "unit": result.unit, "n_boot": result.n_boot, "table": result.table}),
                      fh, indent=2, allow_nan=False)
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    """``unieval-local compare``: print the paired bootstrap table; exit 0, or 2 on unusable input.

    ``compare BASE B [C ...]``: each output against the first, joined by key
    (:func:`unieval_local.meta.compare_outputs`); ``compare OUT --baseline SYSTEM``: every
    other ``system_id`` of OUT against SYSTEM, paired on ``doc_id``
    (:func:`unieval_local.meta.compare_systems`). One row per (system, aspect). Exit 2 with
    a one-line error for: a one-output compare without ``--baseline`` or with an unknown one
    (the systems are listed), records without ``system_id`` / ``doc_id`` there, ``--baseline``
    with several outputs, no common keys or doc ids, unreadable files.
    """
    from .meta import compare_outputs, compare_systems, format_comparison_set

    try:
        outputs = [_read_outputs(path) for path in args.outputs]
        if len(outputs) == 1:
            cs = compare_systems(outputs[0], args.baseline, n_boot=args.bootstrap, seed=args.seed,
                                 source=args.outputs[0])
        elif args.baseline is not None:
            return _usage_error(f"--baseline names a system of ONE output; with {len(outputs)} outputs the first "
                                f"({args.outputs[0]}) is the baseline")
        else:
            cs = compare_outputs(outputs[0], list(zip(args.outputs[1:], outputs[1:])), baseline_name=args.outputs[0],
                                 n_boot=args.bootstrap, seed=args.seed)
        print(format_comparison_set(cs))
    except (ValueError, OSError, KeyError) as exc:
        return _usage_error(exc)
    return EXIT_OK


def cmd_report_html(args: argparse.Namespace) -> int:
    """``unieval-local report-html``: write the HTML report; exit 0, or 2 on unusable input."""
    from .html_report import render_html

    try:
        path = render_html(args.output_jsonl, args.output, input=args.input, title=args.title, n_lowest=args.lowest)
    except (ValueError, OSError, KeyError) as exc:
        return _usage_error(exc)
    print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


#: report CLI argument -> (its flag, formats it applies to, option name)
_REPORT_FLAGS = {
    "enabled_metrics": ("--enabled-metrics", ("rating",), "enabled_metrics"),
    "language": ("--language", ("rating",), "language"),
    "threshold": ("--threshold", ("summ",), "threshold"),
    "n_key_points": ("--n-key-points", ("summ", "rating"), "n_key_points"),
    "max_n_claims": ("--max-n-claims", ("summ", "autoeval"), "max_n_claims"),
    "section_questions": ("--section-question", ("autoeval",), "section_questions"),
    "instructions": ("--instruction", ("autoeval",), "instructions"),
    "categorical": ("--categorical", ("autoeval",), "categorical"),
    "consistency_aspect": ("--consistency-aspect", ("rating", "summ", "autoeval"), "consistency_aspect"),
    "details": ("--details", ("rating", "autoeval"), "details"),
    "plain_booleans": ("--plain-booleans", ("autoeval",), "plain_booleans"),
}


def _report_options(args: argparse.Namespace):
    """The format's options from --config and the flags; ValueError naming the flag or file key."""
    from .reports import FORMATS
    from .reports.common import load_options

    fmt = args.report_format
    overrides = {}
    for dest, (flag, formats, name) in _REPORT_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        if fmt not in formats:
            raise ValueError(f"{flag} applies to --format {' or '.join(formats)}, not {fmt}")
        if dest == "enabled_metrics":
            value = [m.strip() for m in value.split(",") if m.strip()]
        elif dest == "categorical":
            cats = {}
            for item in value:
                name_, sep, allowed = item.partition("=")
                if not sep or not name_.strip() or not allowed.strip():
                    raise ValueError(f"--categorical wants NAME=V1|V2, got {item!r}")
                if name_.strip().lower() in {c.lower() for c in cats}:
                    raise ValueError(f"--categorical gives section {name_.strip()!r} twice; list all its values "
                                     "in one NAME=V1|V2")
                cats[name_.strip()] = [v.strip() for v in allowed.split("|") if v.strip()]
            value = cats
        overrides[name] = value
    flags = {name: flag for flag, _, name in _REPORT_FLAGS.values()}
    return load_options(FORMATS[fmt][0], args.config, overrides, flags)


def _write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path``: a regular file (or a new one) is replaced atomically through
    a uniquely named temporary file beside it (fsynced before the rename, so a crash leaves the
    old file or the new one, never a part); a link is followed; a device or pipe is written to.

    Raises:
        OSError: the write, fsync or rename failed (``path`` is unchanged, the temporary
            file removed).
    """
    import os
    import tempfile

    real = os.path.realpath(path)
    if os.path.exists(real) and not os.path.isfile(real):  # /dev/stdout, a FIFO ...
        with open(real, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(real) or ".", prefix=f".{os.path.basename(real)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if os.path.exists(real):
            os.chmod(tmp, os.stat(real).st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, real)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _check_writable(path: str) -> None:
    """Raise ValueError when ``path`` cannot be written as a file (a folder, a missing or read-only folder)."""
    import os

    if os.path.isdir(path):
        raise ValueError(f"--output {path!r} is a folder; give a file name")
    path = os.path.realpath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        return  # a device or a pipe: written to as it is
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write --output {path!r}: folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"cannot write --output {path!r}: permission denied")


def _report_input(path: str, report_format: str):
    """The report's records: JSONL or a JSON list (bad lines become error rows), or, for
    summ, a hosted custom-run request body (a .json object with ``evaluations``) as a mapping."""
    from .records import InputFileError, iter_records
    from .reports.common import BadRecord

    if path != "-" and path.endswith(".json"):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None  # iter_records says what is wrong
        if isinstance(data, dict) and "evaluations" in data:
            if report_format != "summ":
                raise InputFileError(f"{path} is a custom-run request body ('evaluations'); it is read by "
                                     f"--format summ, not {report_format}")
            return data
        if isinstance(data, dict):
            keys = ", ".join(map(repr, list(data)[:8])) or "none"
            raise InputFileError(
                f"{path} holds one JSON object (keys {keys}), not a list of records"
                + (" nor a custom-run request body: a body needs 'evaluations', a list of {metrics, data}"
                   if report_format == "summ" else "; put the record(s) in a list, or use .jsonl"))
    return [r.data if r.error is None else BadRecord(r.error) for r in iter_records(path)]


def cmd_report(args: argparse.Namespace) -> int:
    """``unieval-local report``: build rating/summ/autoeval reports.

    Input: ``args`` of the ``report`` parser. Output: the JSON document on ``-o`` (written
    atomically by :func:`_write_text`) or stdout, and a summary on stderr. With ``-o FILE``
    the command holds FILE's lock (:func:`~unieval_local.locks.output_lock`) from before the
    first model load until FILE is written.

    Returns:
        0, 1 (some error rows), 2 (usage, input, option or output error, or another process
        holds the output's lock), 3 (checkpoint) or 4 (writing the output failed). A failing
        score cache only warns.
    """
    import contextlib

    with contextlib.ExitStack() as held:
        return _report(args, held)


def _report(args: argparse.Namespace, held) -> int:
    """The body of :func:`cmd_report`; the output lock enters ``held`` (a
    ``contextlib.ExitStack`` closed by the caller once the output is written)."""
    from .engine import Engine
    from .errors import CheckpointError, CheckpointNotFoundError
    from .locks import OutputLockedError, output_lock
    from .records import InputFileError
    from .reports import make_report

    try:
        options = _report_options(args)
        engine = Engine(model=_model_arg(args.model), device=args.device, dtype=args.dtype,
                        max_length=args.max_length, batch_tokens=args.batch_tokens, offline=args.offline,
                        chunk_words=args.chunk_words, merge_punctuation=args.merge_punctuation, threads=args.threads,
                        cache_dir=args.cache_dir, long_input=args.long_input,
                        progress=False if args.no_progress else None)
        records = _report_input(args.input, args.report_format)
        if not records:
            raise InputFileError(f"{args.input} holds no records")
        if args.output:  # fail before scoring when the output cannot be written, or has another writer
            _check_writable(args.output)
            held.enter_context(output_lock(args.output))
        with warnings.catch_warnings():  # an unchecked checkpoint is one of the report's notes, printed below
            warnings.filterwarnings("ignore", message="checkpoint folder .* unchecked")
            result = make_report(records, args.report_format, engine=engine, options=options, warn=False)
    except (CheckpointNotFoundError, CheckpointError) as exc:
        print(f"unieval-local: error: {exc}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except (InputFileError, ValueError, OSError, OutputLockedError) as exc:
        return _usage_error(exc)
    text = json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False, allow_nan=False)
    if args.output:
        try:
            _write_text(args.output, text + "\n")
        except OSError as exc:
            print(f"unieval-local: error: writing {args.output} failed: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_WRITE
    else:
        print(text)
    agg = ", ".join("{} {}".format(k, "N/A" if v is None else v if isinstance(v, int) else f"{v:.4f}")
                    for k, v in result.aggregate.items())
    print(f"{args.report_format}: {result.n_reported} of {result.n_records} records reported, "
          f"{result.n_errors} errors; {result.n_queries} distinct queries" + (f"; {agg}" if agg else ""),
          file=sys.stderr)
    if args.cache_dir:
        hits, misses = engine.cache_counts()
        broken = engine.cache.disabled if engine.cache is not None else None
        print(f"score cache: {hits} queries reused, {misses} scored"
              + (f"; disabled ({engine.cache.path}: {broken}): scored without it" if broken else ""),
              file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    for row in result.reports:
        where = f"  record {row.index}{f' ({row.id})' if row.id is not None else ''}"
        if row.error is not None:
            print(f"{where}: {row.error.field}: {row.error.message}", file=sys.stderr)
        for note in row.notes:
            print(f"{where}: note: {note}", file=sys.stderr)
    if result.n_truncated:
        from .engine import RunStats, truncation_message

        limits = {n: c.max_length for n, c in result.settings.checkpoints.items() if c.max_length}
        stats = RunStats(n_queries=result.n_queries, n_truncated=result.n_truncated,
                         truncated_fields=result.truncated_fields, truncated_by=result.truncated_by)
        print(f"warning: {truncation_message(stats, limits, args.long_input, cli=True)}", file=sys.stderr)
    return EXIT_ROWS_FAILED if result.n_errors else EXIT_OK


def cmd_tasks(args: argparse.Namespace) -> int:
    """``unieval-local tasks``: print the registry as a table; exit 0 (2 on a bad config)."""
    from .tasks import DEFAULT_REGISTRY

    registry = DEFAULT_REGISTRY
    if args.aspects_config:
        from .aspects_config import load_aspects_config

        try:
            registry = DEFAULT_REGISTRY.with_aspects(load_aspects_config(args.aspects_config, DEFAULT_REGISTRY))
        except ValueError as exc:
            return _usage_error(exc)
    rows = [("task", "aspect", "needs", "granularity", "range", "checkpoint")]
    for task in registry.tasks.values():
        for a in task.aspects.values():
            gran = "whole target" if a.granularity == "output" else f"{a.reduction} over sentences"
            if "references" in a.required_fields:
                gran += ", mean over references"
            rows.append((task.name, a.name, ", ".join(a.required_fields), gran, a.value_range, a.checkpoint))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return EXIT_OK


def cmd_calibration(args: argparse.Namespace) -> int:
    """``unieval-local calibration``: print the calibration card (a table, or ``--json``); exit 0."""
    from .cutpoints import format_card
    from .reports.rating import calibration_card

    card = calibration_card()
    print(json.dumps(card, indent=2) if args.card_json else format_card(card))
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    """``unieval-local verify``: print a report per checkpoint; exit 0 when all pass, else 1."""
    from .checkpoints import verify_checkpoint

    reports = verify_checkpoint(args.dir, args.evaluator)
    for r in reports:
        print(f"{r.folder}: {'OK' if r.ok else 'FAILED'}")
        for m in r.messages:
            print(f"  {m}")
    return EXIT_OK if all(r.ok for r in reports) else 1


class _LogHandler:
    """Routes the library's ``unieval_local`` log records (progress lines, warnings) to stderr
    as ``unieval-local: <message>``, for the duration of one command."""

    def __enter__(self):
        import logging

        self.logger = logging.getLogger("unieval_local")
        self.handler = logging.StreamHandler(sys.stderr)
        self.handler.setFormatter(logging.Formatter("unieval-local: %(message)s"))
        self.level = self.logger.level
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)
        return False


class _WarningLines:
    """Shows the library's warnings (``warnings.warn`` in :mod:`unieval_local`, e.g. an unusable
    score cache, bfloat16 on CPU) as ONE line ``unieval-local: warning: <message>`` on stderr,
    for the duration of one command, instead of Python's ``file:line: Category: message``
    and source line. Other libraries' warnings keep the previous ``warnings.showwarning``.
    Python's warning filters still decide whether a warning is shown at all."""

    def __enter__(self):
        import os
        import warnings

        self.warnings = warnings
        self.previous = warnings.showwarning
        package = os.path.dirname(os.path.abspath(__file__)) + os.sep

        def show(message, category, filename, lineno, file=None, line=None):
            ours = (os.path.abspath(str(filename)).startswith(package)
                    or getattr(category, "__module__", "").startswith("unieval_local"))
            if not ours:
                return self.previous(message, category, filename, lineno, file, line)
            text = " ".join(str(message).split())
            try:
                print(f"unieval-local: warning: {text}", file=file or sys.stderr)
            except (OSError, ValueError):
                pass  # stderr closed: warnings are not worth failing for

        warnings.showwarning = show
        return self

    def __exit__(self, *exc):
        self.warnings.showwarning = self.previous
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``unieval-local`` console script.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status (module docstring). Errors that reach here become one line on stderr:
        another process holding the output's lock (:class:`~unieval_local.locks.OutputLockedError`)
        2, a missing optional extra 2, a closed stdout pipe 0, SIGTERM before any record was
        written (:class:`~unieval_local.errors.Terminated`, e.g. while the model loads) 143,
        Ctrl-C there 130. Library warnings are shown as one ``unieval-local: warning:`` line
        each (:class:`_WarningLines`). Any other exception propagates (a bug: a traceback).
    """
    from .errors import Terminated
    from .locks import OutputLockedError

    args = _build_parser().parse_args(argv)
    handler = {"score": cmd_score, "download": cmd_download, "verify": cmd_verify, "tasks": cmd_tasks,
               "merge": cmd_merge, "meta": cmd_meta, "compare": cmd_compare,
               "report-html": cmd_report_html, "report": cmd_report, "calibration": cmd_calibration}[args.command]
    try:
        with _LogHandler(), _WarningLines():
            return handler(args)
    except OutputLockedError as exc:  # another process writes the same -o (score, report, merge)
        return _usage_error(exc)
    except ImportError as exc:  # MissingExtraError: an optional feature's libraries are not installed
        from .extras import MissingExtraError

        if not isinstance(exc, MissingExtraError):
            raise
        print(f"unieval-local: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `unieval-local meta ... | head`
        sys.stderr.close()
        return EXIT_OK
    except Terminated:  # SIGTERM before a run started writing (loading a model ...): not a Ctrl-C
        print("unieval-local: terminated (SIGTERM) before any record was written", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:  # before a run started writing (loading a model ...)
        print("unieval-local: interrupted before any record was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
