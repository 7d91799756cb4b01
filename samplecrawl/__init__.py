"""The seeded sample crawl shipped with the demo (a fixture generator, not part of any job)."""
