"""corpusforge: dedup."""
