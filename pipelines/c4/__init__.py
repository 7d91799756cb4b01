"""The C4 job (T5 paper; docs/c4.md): ``job`` (its declaration, ``plan``, inputs, resources and summary), ``options``
(its command line, read without Beam) and ``pages`` (what its steps share on every worker)."""
