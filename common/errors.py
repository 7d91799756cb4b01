"""The project's own error types: a mistake in what the user gave, not a bug.

``corpusforge`` (``pipelines.cli``) turns an ``InputError`` into one line on stderr and
exit 2, before or instead of any work; every other exception is a bug and keeps its
traceback (exit 1). A module that refuses an input raises ``InputError`` or a subclass
that names the input (``model.checkpoint.CheckpointError``, ``dedup.bloom.BloomFileError``,
``common.storage.StoreError``...); a bare ``ValueError`` from a library is never taken for
one. Both are ``ValueError`` subclasses, so callers that catch ``ValueError`` still do.
"""

from __future__ import annotations


class InputError(ValueError):
    """An input that names nothing readable or holds what cannot be used; the message says
    what was looked for, in one line."""


class UsageError(InputError):
    """A combination of options that the job's parser cannot express (one of two options is
    required, a value out of range for this mode): reported like argparse's own errors, the
    command's usage line and ``corpusforge NAME: error: ...``, exit 2."""
