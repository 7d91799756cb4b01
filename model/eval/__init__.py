"""Evaluation: the harness behind ``corpusforge eval`` (``harness``), scoring and metrics, decoding for
generative tasks, detokenizers, the clean/contaminated split and the reports (docs/evaluation.md)."""
