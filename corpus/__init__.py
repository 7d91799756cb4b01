"""corpusforge: corpus."""
