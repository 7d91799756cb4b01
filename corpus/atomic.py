"""Atomic writes: a file appears under its final name complete, or not at all.

Every writer in corpusforge writes under a hidden temporary name in the same folder
(``.<name>.tmp-<pid>``, which shard and input listings skip) and renames when done; on
an error the temporary is removed, and whatever stood under the final name is untouched.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator


def temporary_path(final_path: str | os.PathLike) -> str:
    directory, base = os.path.split(os.fspath(final_path))
    return os.path.join(directory, f".{base}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_path(final_path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path to write; rename it to ``final_path`` when the block succeeds."""
    final_path = os.fspath(final_path)
    temporary = temporary_path(final_path)
    try:
        yield temporary
        os.replace(temporary, final_path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def write_atomically(path: str | os.PathLike, data: bytes | str) -> None:
    with atomic_path(path) as temporary:
        with open(temporary, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
