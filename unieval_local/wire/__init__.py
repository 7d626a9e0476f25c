"""External shapes, one module each: the hosted metric's config, result and error
(:mod:`.hosted`), the custom-run request body (:mod:`.custom_run`), the rating evaluator's
input and answer (:mod:`.rating_evaluator`) and the autoeval evaluator's report
(:mod:`.autoeval`). Field aliases are one table in :mod:`unieval_local.fields` (a leaf, so
validation deep in the pipeline reads the same table)."""

__all__: list[str] = []
