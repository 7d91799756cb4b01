"""A small disk for the tests of what a write does when the space runs out.

As root, a tmpfs of the given size is mounted on a folder (writes past it fail with
ENOSPC, as on a full disk); elsewhere the command runs with RLIMIT_FSIZE at that size
(a file growing past it fails with EFBIG, SIGXFSZ ignored). ``Disk.kind`` says which.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Disk:
    folder: Path
    kind: str  # "tmpfs" (ENOSPC) or "rlimit" (EFBIG)
    size: int

    @property
    def reason(self) -> str:
        return "no space left on the device" if self.kind == "tmpfs" else "file too large for the file-size limit"

    def preexec(self):
        if self.kind == "tmpfs":
            return None
        size = self.size

        def limit():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

        return limit

    def grow(self, size: int) -> None:
        """Make the disk ``size`` bytes (a remount of the tmpfs, or a larger limit): the space
        a user frees before running a failed job again."""
        if self.kind == "tmpfs":
            subprocess.run(["mount", "-o", f"remount,size={size}", str(self.folder)], check=True, capture_output=True)
        self.size = size

    def run(self, command: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, preexec_fn=self.preexec(), timeout=600, **kwargs)


@contextlib.contextmanager
def small_disk(folder: Path, size: int):
    folder.mkdir(parents=True, exist_ok=True)
    mounted = False
    if os.geteuid() == 0 and not os.environ.get("CORPUSFORGE_TEST_RLIMIT_DISK"):
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                                 capture_output=True).returncode == 0
    try:
        yield Disk(folder, "tmpfs" if mounted else "rlimit", size)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " ERROR " in line]
