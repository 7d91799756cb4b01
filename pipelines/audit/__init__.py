"""The audit and decontaminate jobs (GPT-2 paper, section 4; docs/audit.md): ``job`` (the Bloom filter, the exact
index, the reports, decontamination on Beam), ``options``, ``shards`` (what their steps share on every engine) and
``decontaminate`` (the decontaminate command's entry)."""
