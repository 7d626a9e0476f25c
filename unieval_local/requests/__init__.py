"""Two-phase requests (:mod:`.base`: a Request yields the jobs of a stage and returns its
answer), the Scheduler that advances many requests with one engine pass per stage
(:mod:`.scheduler`), and the score requests of the API, the service and batch runs
(:mod:`.score`)."""

__all__: list[str] = []
