"""The two ways reading a fleet can fail: a target the user mistyped, and a host that failed."""

from __future__ import annotations


class TargetError(ValueError):
    """Not HOST:PORT or an http(s) URL (a usage error)."""


class ScrapeError(Exception):
    """One host (or the Prometheus server) could not be read; the message says why."""

    def __init__(self, message: str, *, down: bool) -> None:
        super().__init__(message)
        self.down = down  # True: no answer at all; False: answered with something unusable
