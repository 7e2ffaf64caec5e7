"""HTTP basic auth against bcrypt hashes, for the exporter's event loop.

bcrypt is slow on purpose (~60 ms a check at cost 10 here, seconds at high costs), and a
scrape every few seconds must not pay that each time, nor wait behind a client trying
passwords. So, as exporter-toolkit does, a (user, password) pair that passed is
remembered in memory (as a keyed digest, never the password) and later scrapes with it
are answered at once, without touching bcrypt. Checks that must run go to one thread of
their own (bcrypt releases the GIL, so the event loop keeps serving while it works), at
most one at a time (one core at most, however many clients try), and at most
`max_waiting` are queued: past that a client is told to come back (503) instead of
being queued without bound. A wrong password is never remembered, so a flood of them
cannot push a good pair out. A user name that does not exist is checked against a real
hash all the same, so the answer's timing does not tell which names exist.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import enum
import hmac
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

MAX_WAITING = 8  # bcrypt checks queued at once; at cost 10, about half a second of work
MAX_REMEMBERED = 256  # good pairs kept; one per user in practice


class Verdict(enum.Enum):
    OK = "ok"
    DENIED = "denied"  # no, malformed or wrong credentials: 401
    BUSY = "busy"  # too many checks waiting: 503, try again


def credentials(header: str | None) -> tuple[str, bytes] | None:
    """(user, password) from an `Authorization: Basic …` value, or None."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        raw = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = raw.partition(b":")
    if not sep:
        return None
    try:
        return user.decode("utf-8"), password
    except UnicodeDecodeError:
        return None


def _checkpw(password: bytes, hashed: bytes) -> bool:
    import bcrypt  # the exporter's alone: the monitor never loads it

    try:
        return bool(bcrypt.checkpw(password, hashed))
    except ValueError:  # over 72 bytes or a NUL: bcrypt refuses, so it cannot match
        return False


class BasicAuth:
    """`await check(header)` → Verdict. Used from one event loop's thread."""

    def __init__(self, users: Mapping[str, bytes], *, max_waiting: int = MAX_WAITING) -> None:
        if not users:
            raise ValueError("no users")
        self._users = dict(users)
        # The hash an unknown user is checked against: a real one, so it costs the same.
        self._decoy = next(iter(self._users.values()))
        self._key = os.urandom(32)
        self._good: set[bytes] = set()
        self._max_waiting = max_waiting
        self._waiting = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="gputui-bcrypt")
        self.checks = 0  # bcrypt checks run (the figure the cache keeps low)

    def _digest(self, user: str, password: bytes) -> bytes:
        name = user.encode("utf-8")
        return hmac.digest(self._key, len(name).to_bytes(4, "big") + name + password, "sha256")

    async def check(self, header: str | None) -> Verdict:
        creds = credentials(header)
        if creds is None:
            return Verdict.DENIED
        user, password = creds
        hashed = self._users.get(user)
        digest = self._digest(user, password)
        if hashed is not None and digest in self._good:
            return Verdict.OK
        if self._waiting >= self._max_waiting:
            return Verdict.BUSY
        self._waiting += 1
        try:
            loop = asyncio.get_running_loop()
            self.checks += 1
            ok = await loop.run_in_executor(self._pool, _checkpw, password,
                                            hashed if hashed is not None else self._decoy)
        finally:
            self._waiting -= 1
        if hashed is None or not ok:
            return Verdict.DENIED
        if len(self._good) >= MAX_REMEMBERED:
            self._good.clear()
        self._good.add(digest)
        return Verdict.OK

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
