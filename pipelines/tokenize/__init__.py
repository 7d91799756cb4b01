"""The tokenize job (docs/training.md): ``job`` (byte-level BPE and llm.c token shards on Beam), ``options`` (its
command line) and ``shards`` (what its steps share on every engine)."""
