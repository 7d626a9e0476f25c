"""Analysis of results (never of models): meta-evaluation against human scores
(:mod:`.meta`) and binary labels (:mod:`.labels`), bootstrap resampling (:mod:`.bootstrap`), paired significance tests
(:mod:`.significance`), rating cut points (:mod:`.cutpoints`) and the HTML report
(:mod:`.html_report`)."""

__all__: list[str] = []
