"""The Hugging Face ``evaluate`` module folder (``evaluate.load(evaluate_path())``).

``evaluate`` loads ``unieval_metric.py`` from this folder by path; this file only makes the
folder a package, so wheels carry it. It imports nothing (``evaluate`` stays optional).
"""

__all__: list[str] = []
