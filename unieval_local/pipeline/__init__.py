"""From examples to prompts and back, without a model: validation (:mod:`.validate`), the
fan-out of aspects into queries with long-input planning (:mod:`.planning`), the fan-in of
query scores into example scores (:mod:`.fold`), per-example evidence (:mod:`.evidence`), and
what a pass is made of (:mod:`.jobs`: Job, JobResult, RunStats)."""

__all__: list[str] = []
