"""A small text file the user named (config.toml, a webhook file), read without surprises.

The path can be anything: `/dev/zero` (endless), a FIFO (blocks until a writer comes), a
directory, a file of gigabytes. The file is opened without blocking, checked on its open
descriptor (no race between the check and the read) to be a regular file under a size
cap, and read up to that cap only, so none of those can grow gputui's memory or hang it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UserFileError(Exception):
    """Why the file cannot be used, in words without the path (the caller names it)."""


def read_text(path: Path, max_bytes: int, *, private: bool = False) -> str:
    """The file's text (UTF-8). Raises FileNotFoundError when there is none, UserFileError
    otherwise. `private`: refuse a file other users can read or change, or that belongs to
    another user (as ssh refuses a private key), for files that hold secrets."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UserFileError(f"cannot read it: {_words(exc)}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UserFileError("is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise UserFileError("not a regular file")
        if st.st_size > max_bytes:
            raise UserFileError(f"larger than {_size(max_bytes)}")
        if private:
            if st.st_uid not in (os.getuid(), 0):
                raise UserFileError("belongs to another user")
            if st.st_mode & 0o077:
                raise UserFileError("other users can read or change it (chmod 600 it)")
        chunks: list[bytes] = []
        left = max_bytes + 1  # the file may have grown since fstat
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise UserFileError(f"larger than {_size(max_bytes)}")
    except OSError as exc:
        raise UserFileError(f"cannot read it: {_words(exc)}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise UserFileError("not UTF-8 text") from None


def _words(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"
