"""The example task's hooks: UniEval aspects (scored in one batch per aspect) beside ROUGE-L.

lm-eval's ``!function unieval_hooks.NAME`` loads this file from beside the YAML. The model:
``$UNIEVAL_LOCAL_MODEL`` (a checkpoint folder), else ``$UNIEVAL_LOCAL_HOME/unieval-sum``; never
downloaded.
"""

from rouge_score import rouge_scorer

from unieval_local.integrations.lm_eval import UniEvalHooks

__all__ = ["aggregate", "aggregate_stderr", "hooks", "process_results"]

hooks = UniEvalHooks(task="summarization", aspects=("coherence", "consistency", "fluency"),
                     source_field="document", references_field="summary", stderr=True, on_invalid="skip")
aggregate, aggregate_stderr = hooks.aggregate, hooks.aggregate_stderr
_ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def process_results(doc, results):
    """UniEval items per aspect, and this document's ROUGE-L F1 against its reference summary."""
    out = hooks.process_results(doc, results)
    out["rougeL"] = _ROUGE.score(doc["summary"], results[0])["rougeL"].fmeasure
    return out
