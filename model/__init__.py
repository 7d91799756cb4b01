"""corpusforge: model."""
