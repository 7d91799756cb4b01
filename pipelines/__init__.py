"""corpusforge: pipelines."""
