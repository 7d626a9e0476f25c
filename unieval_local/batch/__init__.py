"""Offline batch runs that never lose work: the one pipeline behind ``unieval-local score``.

Modules: :mod:`.run` (the run), :mod:`.survey` (the first pass over the input),
:mod:`.engines` (local and Ray), :mod:`.output` (the output and sidecar files), :mod:`.resume`
(shards and run identity), :mod:`.merge` (joining shards), :mod:`.summary` (the summary and
progress).

Input records are streamed (JSONL) and sent in requests of at most 250; after each
request the output records are appended to OUT, flushed and fsynced, and a sidecar
``OUT.meta.json`` records the run signature, the input fingerprint and the progress.

- ``resume=True`` skips records whose key is already in OUT, repairs a torn last line
  left by a kill, and refuses to go on when the signature or the input differ.
- ``shard=(K, N)`` keeps the records whose key hashes to K modulo N, so N array jobs
  cover the input exactly once; :func:`merge_outputs` joins and checks them.
- ``engine`` names a batch engine of :data:`BATCH_ENGINES`: ``local`` (this process)
  or ``ray`` (one Ray Data pipeline over the whole run: a pool of actors, each loading
  the model once); the driver still reads the input and writes OUT itself, so resume,
  error records and repair are this same code.
- ``output_format="hosted"`` writes one line per request instead of one per record, in
  the hosted UniEval metric's result schema (:func:`~unieval_local.wire.hosted.hosted_line`), for one aspect; the
  requests are scored by the same code. Such an output has no sidecar and no resume; a refused
  request's error line goes to ``OUT.errors.jsonl`` (:func:`errors_path`), so every line of OUT
  is a result.

Keys: the record's ``id`` when present, else its 0-based record index in INPUT.

INPUT is any input spec of :mod:`unieval_local.records` (``.jsonl``, ``.json``, ``.csv``,
``.tsv``, ``-`` for JSONL on stdin, or line-aligned text files, :class:`~unieval_local.records.AlignedInput`);
its fingerprint for ``--resume`` and ``merge`` is :func:`~unieval_local.records.input_fingerprint`.
"""

from ..errors import MergeError, NothingToScoreError, OutputWriteError, ResumeError, RunInterrupted
from ..requests.score import ChunkResult
from .engines import BATCH_ENGINES, BatchEngine, LocalBatchEngine, RayBatchEngine, make_batch_engine
from .merge import merge_outputs
from .output import OutputWriter, errors_path, read_output, sidecar_path
from .resume import comparable_run, parse_shard, run_differences, shard_of
from .run import OUTPUT_FORMATS, request_stop, run_batch
from .summary import BatchSummary, Progress, format_summary, summarize
from .survey import Survey, nothing_to_score_message, survey_input

__all__ = ["BATCH_ENGINES", "OUTPUT_FORMATS", "BatchEngine", "BatchSummary", "ChunkResult", "LocalBatchEngine",
           "MergeError", "NothingToScoreError", "OutputWriteError", "OutputWriter", "Progress", "RayBatchEngine",
           "ResumeError", "RunInterrupted", "Survey", "comparable_run", "errors_path", "format_summary", "make_batch_engine",
           "merge_outputs", "nothing_to_score_message", "parse_shard", "read_output", "request_stop", "run_batch",
           "run_differences", "shard_of", "sidecar_path", "summarize", "survey_input"]
