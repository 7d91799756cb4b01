"""The WebText job (GPT-2 paper; docs/webtext.md): ``job`` (links, pages, text, dedup, shards on Beam), ``options``
(its command line) and ``rows`` (what its steps share on every engine)."""
