"""Opening the live sampler off the event loop, from as early as the command starts.

NVML init can take seconds on a big machine (and forever on a hung driver): it runs on
a daemon thread, started by `gputui` before Textual is even imported, so the two
overlap. (Not the first reading: a tick on this thread competes with Textual's start
for the interpreter, and measured ~60 ms later to the first GPU line; the sampler's
own first tick runs as soon as the monitor takes it.) The monitor's feed
(telemetry/feed.py) takes the sampler when its screen is built if it is open by then
(`take_if_open`), else asks for it once the screen is mounted (`deliver_to`); the
callback runs on whichever thread comes second and never waits for the event loop.
Nothing at exit waits for this thread: `cancel` closes a sampler nobody took.

No textual here: the CLI imports this module before the UI.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from gputui.telemetry.kernel_paths import KernelPaths
from gputui.telemetry.sampler import Sampler

Deliver = Callable[[Sampler], bool]  # True: taken; False: the receiver is gone


class SamplerOpener:
    def __init__(self, *, interval: float, profile: str,
                 paths: KernelPaths | None = None, idle_w: float | None = None) -> None:
        self.interval = interval
        self.profile = profile
        self.paths = paths or KernelPaths()
        self.idle_w = idle_w
        self._lock = threading.Lock()
        self._opened: Sampler | None = None  # opened, not yet handed over
        self._handed: Sampler | None = None  # handed over, not yet confirmed taken
        self._deliver: Deliver | None = None
        self._cancelled = False
        self._thread: threading.Thread | None = None

    def start(self) -> SamplerOpener:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gputui-nvml-open",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        sampler = Sampler.open(interval=self.interval, profile=self.profile, alerts=True,
                               sysfs=self.paths.sysfs, procfs=self.paths.procfs,
                               rootfs=self.paths.rootfs, idle_w=self.idle_w)
        with self._lock:
            if self._cancelled:
                deliver = None
            elif self._deliver is None:
                self._opened = sampler
                return
            else:
                deliver, self._handed = self._deliver, sampler
        if deliver is None or not deliver(sampler):
            self._close_handed(sampler)

    def deliver_to(self, deliver: Deliver) -> None:
        """Hand the sampler to `deliver` once it is open (at once if it already is)."""
        self.start()
        with self._lock:
            sampler, self._opened = self._opened, None
            if sampler is None:
                self._deliver = deliver
                return
            self._handed = sampler
        if not deliver(sampler):
            self._close_handed(sampler)

    def take_if_open(self) -> Sampler | None:
        """The sampler if it is open already (never waits); the caller owns it then."""
        with self._lock:
            sampler, self._opened = self._opened, None
        return sampler

    def taken(self, sampler: Sampler) -> None:
        """The receiver holds `sampler` now: closing it is its job."""
        with self._lock:
            if self._handed is sampler:
                self._handed = None

    def cancel(self) -> None:
        """Nobody will take the sampler: close it if it is open, or once it opens."""
        with self._lock:
            self._cancelled = True
            self._deliver = None
            pending = [s for s in (self._opened, self._handed) if s is not None]
            self._opened = self._handed = None
        for sampler in pending:
            sampler.close()

    def _close_handed(self, sampler: Sampler) -> None:
        with self._lock:
            if self._handed is sampler:
                self._handed = None
        sampler.close()
