"""The read job (docs/reading.md): ``job`` (WARC/WET records into document shards, declared once) and ``options``."""
