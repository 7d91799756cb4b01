"""The demo (README): ``job`` (the sample crawl through every job) and ``options``."""
