"""Peak host memory (RSS) over one measured interval, for CPU runs.

`ru_maxrss` is the peak over the whole process lifetime: once one batch-finder probe or
sweep point has used a lot of memory, every later one would report at least as much. So
each interval starts with a reset:

- Linux: write "5" to /proc/self/clear_refs, which resets the kernel's high-water mark
  (VmHWM) to the current RSS; the interval's peak is VmHWM read from /proc/self/status.
- Elsewhere (or when clear_refs is not writable): a daemon thread samples the current RSS
  (psutil) every few milliseconds between reset() and peak(); a short spike between two
  samples can be missed, so this is a lower bound.
- Without psutil either: `ru_maxrss` (process-lifetime peak), and `method` says so.

No torch here: the module is imported by tests and by DDP ranks alike.
"""

from __future__ import annotations

import re
import resource
import sys
import threading

CLEAR_REFS = "/proc/self/clear_refs"
STATUS = "/proc/self/status"
_HWM = re.compile(r"^VmHWM:\s+(\d+)\s*kB", re.MULTILINE)
_RSS = re.compile(r"^VmRSS:\s+(\d+)\s*kB", re.MULTILINE)

METHOD_TEXT = {
    "vmhwm": "peak RSS of the measured interval (VmHWM after resetting it through "
             "/proc/self/clear_refs); includes the Python runtime and the model",
    "sampled": "peak RSS of the measured interval, sampled every 5 ms (a lower bound); "
               "includes the Python runtime and the model",
    "ru_maxrss": "process-lifetime peak RSS (ru_maxrss): not reset between intervals",
}


def _status_kib(pattern: re.Pattern[str]) -> int | None:
    try:
        with open(STATUS, encoding="ascii") as f:
            m = pattern.search(f.read())
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def _clear_refs() -> bool:
    try:
        with open(CLEAR_REFS, "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return _status_kib(_HWM) is not None


def lifetime_peak_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return int(rss if sys.platform == "darwin" else rss * 1024)


def current_rss_bytes() -> int | None:
    rss = _status_kib(_RSS)
    if rss is not None:
        return rss
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


class PeakRss:
    """`reset()` at the start of an interval, `peak()` (bytes) at its end."""

    def __init__(self, sample_s: float = 0.005) -> None:
        self.sample_s = sample_s
        self.method: str | None = None
        self._peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        self._stop_sampler()
        if _clear_refs():
            self.method = "vmhwm"
            return
        now = current_rss_bytes()
        if now is None:
            self.method = "ru_maxrss"
            return
        self.method = "sampled"
        self._peak = now
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="gputui-rss-peak",
                                        daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self.sample_s):
            now = current_rss_bytes()
            if now is not None and now > self._peak:
                self._peak = now

    def _stop_sampler(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(1.0)
            self._thread = None

    def peak(self) -> int:
        """Peak since the last reset (lifetime peak if never reset or nothing else works)."""
        if self.method == "vmhwm":
            hwm = _status_kib(_HWM)
            if hwm is not None:
                return hwm
        if self.method == "sampled":
            self._stop_sampler()
            now = current_rss_bytes()
            return max(self._peak, now or 0)
        return lifetime_peak_bytes()

    @property
    def description(self) -> str:
        return METHOD_TEXT[self.method or "ru_maxrss"]
