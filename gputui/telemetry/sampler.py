"""Sampler: one background thread reads the sources at a fixed interval.

Each tick becomes an immutable Snapshot handed to snapshot subscribers (the
recorder, the exporter) and, with the throttle episodes and alerts of that tick,
an immutable Frame handed to frame subscribers (the TUI, which posts it to its
event loop and never calls back). Each GPU is read on its own reader thread
(gputui.telemetry.readers) with a deadline per tick, so one hung device is marked
stale and never holds up the others, the tick, or a signal handler. Sparkline
history is the view's business (gputui.telemetry.history); the sampler keeps none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.energy import Attributed, EnergyAccounts
from gputui.telemetry.frame import Frame, frozen_map
from gputui.telemetry.host import HostSource
from gputui.telemetry.jobs import JobSource
from gputui.telemetry.limits import MIN_INTERVAL_S
from gputui.telemetry.model import GpuProcess, GpuSample, JobReading, Snapshot, SystemInfo
from gputui.telemetry.readers import ReaderThreads
from gputui.telemetry.source import GpuSource, Sources, SourceUnavailable
from gputui.telemetry.throttle import ThrottleEpisode, ThrottleTracker

if TYPE_CHECKING:
    from gputui.telemetry.nvml import NvmlSource

# How long NVML may take to initialise and count the GPUs before the sampler gives up
# on it and goes on host-only (a driver hung at start must not hang the command).
OPEN_TIMEOUT_S = 10.0
# NVML field profiles (what each consumer shows; PCIe throughput costs ~20 ms of driver
# time per GPU per call, so only "full" asks for it). Resolved in nvml.py's terms here,
# so that a consumer names a profile and never imports the NVML module.
PROFILES = ("monitor", "record", "full")

Listener = Callable[[Snapshot], None]
FrameListener = Callable[[Frame], None]


def open_amd(sysfs: Path, procfs: Path, process_every: int,
             slow_every: int) -> GpuSource | None:
    """amdgpu's GPUs under `sysfs`, or None where there are none (on an NVIDIA box, the
    usual case: nothing to say about it). The reader's modules are imported only where a
    card says it is AMD's: the monitor's start pays nothing for them elsewhere."""
    if not any(_is_amd(card) for card in (sysfs / "class" / "drm").glob("card*")):
        return None
    from gputui.telemetry.amd import AmdSource

    src = AmdSource(sysfs, procfs, process_every=process_every, slow_every=slow_every)
    try:
        src.open_system()
    except SourceUnavailable:
        return None
    return src


def _is_amd(card: Path) -> bool:
    try:
        return (card / "device" / "vendor").read_text().strip().lower() == "0x1002"
    except (OSError, UnicodeDecodeError):
        return False


def read_timeout(interval: float) -> float:
    """How long a tick waits for the devices: most of the interval, so a slow device is
    marked stale and the others are still shown on time."""
    return max(0.05, 0.75 * interval)


class Sampler:
    """Owns the sources, the throttle tracker and (optionally) the alert engine.

    `source` is what it reads the GPUs from (gputui.telemetry.source: NVML, amdgpu's files,
    or both); `nvml` is the NVIDIA source when there is one (None when NVML is unavailable,
    with `nvml_error` saying why), for the reads only NVML has (a benchmark's health and
    topology). Given only `nvml`, the sampler reads it. Listeners are called on whichever
    thread ingests a snapshot and must not block (a UI posts the frame to its own loop).
    """

    def __init__(self, *, interval: float = 1.0, source: GpuSource | None = None,
                 nvml: NvmlSource | None = None,
                 nvml_error: str | None = None, host: HostSource | None = None,
                 alerts: bool = False, read_timeout_s: float | None = None,
                 jobs: JobSource | None = None, idle_w: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[threading.Event, float], object] = threading.Event.wait,
                 ) -> None:
        if not interval >= MIN_INTERVAL_S:
            raise ValueError(f"interval must be at least {MIN_INTERVAL_S} s")
        self.interval = interval
        self.source: GpuSource | None = source if source is not None else nvml
        self.nvml = nvml
        self.nvml_error = nvml_error
        self.host = host or HostSource()
        # Training jobs reporting with gputui.track (this user's; a few small files).
        self.jobs = jobs if jobs is not None else JobSource()
        # Energy per process, GPU and job (`idle_w`: config.toml's idle draw, else each
        # GPU's lowest seen with no compute process): computed here, once per tick.
        self.energy = EnergyAccounts(idle_w)
        self.tracker = ThrottleTracker()
        self.alerts = AlertEngine() if alerts else None
        self.read_timeout_s = read_timeout_s or read_timeout(interval)
        self.skipped_ticks = 0
        self._seq = 0
        self._tick_no = 0
        self._latest: Snapshot | None = None
        self._listeners: list[Listener] = []
        self._frame_listeners: list[FrameListener] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._readers: ReaderThreads | None = None
        # The last process records read from NVML, and the same with host facts added.
        self._described: tuple[tuple[GpuProcess, ...], tuple[GpuProcess, ...]] = ((), ())
        # The monotonic clock of the snapshots, the jobs' rates and the tick schedule, and
        # how the thread waits for its next tick (on the stop event): tests pass a fake
        # clock and a wait that moves it, so that time is not slept.
        self._clock = clock
        self._wait = wait

    @classmethod
    def open(cls, *, interval: float = 1.0, process_every: int | None = None,
             slow_every: int | None = None, profile: str = "full", alerts: bool = False,
             read_timeout_s: float | None = None, open_timeout_s: float = OPEN_TIMEOUT_S,
             cancel: threading.Event | None = None, sysfs: Path = Path("/sys"),
             procfs: Path = Path("/proc"), rootfs: Path = Path("/"),
             idle_w: float | None = None) -> Sampler:
        """Open NVML and amdgpu's files where they are; a machine with neither (or with an
        NVIDIA driver that does not answer within `open_timeout_s`) gets a host-only
        sampler saying why. AMD GPUs are read under `sysfs` and `procfs` (another root:
        a container with the host's mounted elsewhere), pod and container names under
        `rootfs`; `idle_w` is every GPU's idle draw for the energy shares (None: each
        GPU's lowest seen with no compute process).

        NVML is opened on a daemon thread: the caller waits in short, interruptible
        steps, so Ctrl-C works even while the driver is stuck, and setting `cancel`
        (from a signal handler) gives up at once (host-only)."""
        # Process lists are expensive on real drivers (and serialise in the kernel
        # driver): refresh them about every 3 s, not every tick.
        every = process_every or max(1, round(3.0 / interval))
        slow = slow_every or max(1, round(10.0 / interval))
        nvml, why = cls._open_nvml(every, slow, profile, open_timeout_s, cancel)
        amd = open_amd(sysfs, procfs, every, slow)
        found: list[GpuSource] = [s for s in (nvml, amd) if s is not None]
        source = found[0] if len(found) == 1 else Sources(found) if found else None
        return cls(interval=interval, source=source, nvml=nvml, nvml_error=why, alerts=alerts,
                   read_timeout_s=read_timeout_s, idle_w=idle_w,
                   host=HostSource(procfs=procfs, rootfs=rootfs))

    @staticmethod
    def _open_nvml(every: int, slow: int, profile: str, open_timeout_s: float,
                   cancel: threading.Event | None) -> tuple[NvmlSource | None, str | None]:
        """NVML opened, or None and why not."""
        from gputui.telemetry.nvml import NvmlSource, NvmlUnavailable, profile_fields

        src = NvmlSource(process_every=every, slow_every=slow, fields=profile_fields(profile))
        done = threading.Event()
        failure: list[BaseException] = []

        def opener() -> None:
            try:
                src.open_system()
            except BaseException as exc:
                failure.append(exc)
            done.set()

        threading.Thread(target=opener, name="gputui-nvml-open", daemon=True).start()
        deadline = time.monotonic() + open_timeout_s
        while not done.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
            if cancel is not None and cancel.is_set():
                return None, "cancelled while NVML was opening"
            if time.monotonic() >= deadline:
                return None, (f"NVML did not answer within {open_timeout_s:g} s "
                              "(the driver may be hung)")
        if failure:
            exc = failure[0]
            if isinstance(exc, NvmlUnavailable):
                return None, str(exc)
            raise exc
        return src, None

    def enable_alerts(self) -> None:
        """Evaluate the alert rules on this sampler's side, for the frames (a view that
        was handed a sampler asks for this before it starts)."""
        with self._lock:
            if self.alerts is None:
                self.alerts = AlertEngine()

    def want_detail_fields(self, on: bool) -> None:
        """The GPU detail screen's extra fields (energy, in-tick min/max, PCIe throughput,
        per-link NVLink rates) from the next tick on, or not: asked while it is open."""
        if self.source is not None:
            self.source.want_detail_fields(on)

    @property
    def system(self) -> SystemInfo:
        return self.source.system if self.source is not None else SystemInfo()

    def subscribe(self, fn: Listener) -> None:
        with self._lock:
            self._listeners.append(fn)

    def unsubscribe(self, fn: Listener) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def subscribe_frames(self, fn: FrameListener) -> None:
        with self._lock:
            self._frame_listeners.append(fn)

    def unsubscribe_frames(self, fn: FrameListener) -> None:
        with self._lock:
            if fn in self._frame_listeners:
                self._frame_listeners.remove(fn)

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    def episodes(self) -> tuple[ThrottleEpisode, ...]:
        with self._lock:
            return self.tracker.episodes()

    def ongoing(self) -> dict[int, ThrottleEpisode]:
        with self._lock:
            return self.tracker.ongoing()

    def _read_gpus(self) -> tuple[tuple[GpuSample, ...], tuple[GpuProcess, ...]]:
        source = self.source
        if source is None:
            return (), ()
        if self._readers is None:
            self._readers = ReaderThreads(source)
        tick = self._tick_no
        self._tick_no += 1
        slow = tick % max(1, source.slow_every) == 0
        procs = tick % max(1, source.process_every) == 0
        return self._readers.read(slow=slow, processes=procs, timeout_s=self.read_timeout_s)

    def read(self) -> Snapshot:
        """Read the sources once and build a Snapshot (does not record it)."""
        gpus, procs = self._read_gpus()
        if procs:
            procs = self._describe(procs)
        host = self.host.read()
        mono = self._clock()
        jobs = self._read_jobs(gpus, procs, mono)
        shared = self._attribute(gpus, procs, jobs, mono)
        with self._lock:
            self._seq += 1
            seq = self._seq
        return Snapshot(time=datetime.now(UTC), mono=mono, system=self.system,
                        host=host, gpus=gpus, processes=shared.processes,
                        nvml_error=self.nvml_error, seq=seq,
                        skipped_ticks=self.skipped_ticks, jobs=shared.jobs,
                        jobs_ended=shared.jobs_ended, gpu_energy=shared.gpu_energy,
                        events=self.source.take_events() if self.source is not None else ())

    def _attribute(self, gpus: tuple[GpuSample, ...], procs: tuple[GpuProcess, ...],
                   jobs: tuple[JobReading, ...], mono: float) -> Attributed:
        """Each process's, GPU's and job's energy (gputui.telemetry.energy)."""
        try:
            return self.energy.update(gpus, procs, jobs, mono)
        except Exception:  # a figure no check foresaw must not cost the GPUs their tick
            logging.getLogger("gputui").exception("sharing out GPU energy failed")
            return Attributed(procs, jobs)

    def _read_jobs(self, gpus: tuple[GpuSample, ...], procs: tuple[GpuProcess, ...],
                   mono: float) -> tuple[JobReading, ...]:
        try:
            return self.jobs.read(gpus, procs, now_mono=mono)
        except Exception:  # a damaged job file must not cost the GPUs their tick
            logging.getLogger("gputui").exception("reading training jobs failed")
            return ()

    def _describe(self, procs: tuple[GpuProcess, ...]) -> tuple[GpuProcess, ...]:
        """User, command, CPU % and RSS of the GPU processes, read from /proc when NVML's
        process list was (every `process_every` ticks: the readers hand the same records
        on in between), so a process's CPU % covers the same window as its GPU figures.
        Every tick would cost ~50 µs of /proc reads per process (8 training processes:
        ~0.4 ms a tick) for figures no fresher than the list beside them."""
        raw, described = self._described
        if len(procs) == len(raw) and all(a is b for a, b in zip(procs, raw, strict=True)):
            return described
        described = self.host.describe(procs)
        self._described = (procs, described)
        return described

    def ingest(self, snap: Snapshot, *, reset: bool = False,
               catch_up: tuple[Snapshot, ...] = ()) -> list[ThrottleEpisode]:
        """Record a snapshot (live or replayed): throttle episodes, alerts, listeners."""
        with self._lock:
            started = self.tracker.update(snap.gpus, snap.time, snap.mono)
            ongoing = self.tracker.ongoing()
            raised: list = []
            active: list = []
            cleared: tuple = ()
            if self.alerts is not None:
                raised = self.alerts.update(snap, ongoing)
                active = self.alerts.active()
                cleared = tuple(self.alerts.last_cleared)
            self._latest = snap
            listeners = list(self._listeners)
            frame_listeners = list(self._frame_listeners)
            jobs = self.alerts.jobs if self.alerts is not None else None
            frame = Frame(snap, frozen_map(ongoing), self.tracker.episodes(), tuple(active),
                          tuple(raised), reset, catch_up, cleared=cleared,
                          jobs=jobs.states() if jobs is not None else (),
                          job_slowdowns=jobs.log() if jobs is not None else (),
                          ) if frame_listeners else None
        for fn in listeners:
            self._call(fn, snap)
        for fl in frame_listeners:
            self._call(fl, frame)
        return started

    @staticmethod
    def _call(fn: Callable[[object], object], arg: object) -> None:
        try:
            fn(arg)
        except Exception:  # a broken consumer must not stop sampling for the others
            logging.getLogger("gputui").exception("snapshot listener failed")

    def tick(self) -> Snapshot:
        snap = self.read()
        self.ingest(snap)
        return snap

    def reset(self) -> None:
        """Forget episodes and alerts (replay seeks backwards with this)."""
        with self._lock:
            self.tracker = ThrottleTracker()
            if self.alerts is not None:
                self.alerts.reset()
            self._latest = None

    def rebuild(self, before: Sequence[Snapshot], snap: Snapshot) -> None:
        """Start over from `before` (quietly: episodes and alerts only), then announce
        `snap` with a frame that tells views to rebuild their history from `before`."""
        self.reset()
        with self._lock:
            for s in before:
                self.tracker.update(s.gpus, s.time, s.mono)
                if self.alerts is not None:
                    self.alerts.update(s, self.tracker.ongoing())
        self.ingest(snap, reset=True, catch_up=tuple(before))

    # --- the thread ----------------------------------------------------------------------

    def start(self, first_in: float = 0.0) -> None:
        """Tick on a thread of its own: the first tick `first_in` seconds from now (one
        interval when the caller has just taken a reading itself), then every interval."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(first_in,),
                                        name="gputui-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            # Bounded: a tick waits for the devices at most read_timeout_s.
            self._thread.join(min(timeout, self.read_timeout_s + 1.0))
            self._thread = None

    def close(self) -> None:
        """Stop and release NVML without ever blocking on a hung driver call."""
        self.stop()
        self.jobs.close()
        hung = False
        if self._readers is not None:
            hung = self._readers.hung
            self._readers.close()
        if self.source is None:
            return
        close = self.source.close
        if not hung:
            close()
            return
        # A device is stuck inside the driver: shutting NVML down could wait behind it.
        t = threading.Thread(target=close, name="gputui-nvml-close", daemon=True)
        t.start()
        t.join(0.5)

    def _run(self, first_in: float = 0.0) -> None:
        next_at = self._clock() + first_in
        if first_in > 0:
            self._wait(self._stop, first_in)
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:
                logging.getLogger("gputui").exception("sampler tick failed")
            next_at += self.interval
            now = self._clock()
            if now > next_at:
                # Slow reads made us late: skip the missed ticks instead of firing them
                # back to back, and count them so the UI can say so.
                missed = int((now - next_at) // self.interval) + 1
                self.skipped_ticks += missed
                next_at += missed * self.interval
            self._wait(self._stop, max(0.0, next_at - self._clock()))
