"""NvmlSource: NVML for a session — initialise, count the GPUs, one DeviceReader per GPU
(gputui.telemetry.nvml.device), the XID/ECC event listener, shut down."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pynvml

from gputui.telemetry import gpm
from gputui.telemetry.model import DeviceInfo, GpuEvent, GpuProcess, GpuSample, SystemInfo
from gputui.telemetry.nvml.device import DeviceReader, ReadSettings
from gputui.telemetry.nvml.errors import NvmlUnavailable, describe_init_error, text
from gputui.telemetry.nvml.events import MONITOR_EVENTS, MONITOR_POLL_MS, XidWatcher
from gputui.telemetry.nvml.profiles import ALL_FIELDS, DETAIL_FIELDS
from gputui.telemetry.nvml.query import NvmlQuery
from gputui.telemetry.units import cuda_version_str


class NvmlSource:
    """Reads NVIDIA GPUs through NVML. `read` reads them in turn; the sampler instead
    reads each device on its own thread (`open_device`, `read_device`)."""

    def __init__(self, *, process_every: int = 5, slow_every: int = 10,
                 fields: Iterable[str] = ALL_FIELDS) -> None:
        fields = frozenset(fields)
        self.settings = ReadSettings(
            fields=fields, slow_every=max(1, slow_every), process_every=max(1, process_every),
            # Per-link NVLink rates: always with "link_rates" in fields, else while a view
            # that shows them asks (want_link_rates).
            link_rates_wanted="link_rates" in fields,
            gpm_clock=time.monotonic, gpm_min_gap_s=gpm.MIN_SAMPLE_GAP_S)
        self._asked_fields = fields
        self.system = SystemInfo()
        self.error: str | None = None
        self.readers: list[DeviceReader] = []
        self.events: XidWatcher | None = None  # with "events" in fields, once open
        self._tick = 0
        self._procs: tuple[GpuProcess, ...] = ()
        self._open = False

    @property
    def fields(self) -> frozenset[str]:
        return self.settings.fields

    @property
    def process_every(self) -> int:
        return self.settings.process_every

    @property
    def slow_every(self) -> int:
        return self.settings.slow_every

    # The clock of the GPM back-off and sample gap (a test replaces it to step over them).
    @property
    def gpm_clock(self) -> Callable[[], float]:
        return self.settings.gpm_clock

    @gpm_clock.setter
    def gpm_clock(self, clock: Callable[[], float]) -> None:
        self.settings.gpm_clock = clock

    @property
    def gpm_min_gap_s(self) -> float:
        return self.settings.gpm_min_gap_s

    @gpm_min_gap_s.setter
    def gpm_min_gap_s(self, gap: float) -> None:
        self.settings.gpm_min_gap_s = gap

    @property
    def link_rates_wanted(self) -> bool:
        return self.settings.link_rates_wanted

    # --- lifecycle ---------------------------------------------------------------------

    def open(self) -> None:
        """Initialise NVML and read static facts. Raises NvmlUnavailable with the reason."""
        self.open_system()
        for i in range(self.count):
            self.open_device(i)

    def open_system(self) -> None:
        """Initialise NVML, read the driver facts and count the GPUs; devices are opened
        one by one with `open_device` (each on its own reader thread in the sampler, so
        a device that hangs while opening does not hold up the others)."""
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            self.error = describe_init_error(exc)
            raise NvmlUnavailable(self.error) from exc
        except OSError as exc:  # a broken library file
            self.error = f"NVML library could not be loaded: {exc}"
            raise NvmlUnavailable(self.error) from exc
        self._open = True
        q = NvmlQuery()
        driver = q(pynvml.nvmlSystemGetDriverVersion)
        nvml_version = q(pynvml.nvmlSystemGetNVMLVersion)
        self.system = SystemInfo(
            driver_version=text(driver) if driver is not None else None,
            nvml_version=text(nvml_version) if nvml_version is not None else None,
            cuda_driver_version=cuda_version_str(q(pynvml.nvmlSystemGetCudaDriverVersion)),
        )
        count = q(pynvml.nvmlDeviceGetCount)
        if count is None:
            self.close()
            self.error = f"NVML could not count GPUs: {q.last_error_text or 'not supported'}"
            raise NvmlUnavailable(self.error)
        self.readers = [DeviceReader(i, self.settings) for i in range(count)]
        if "events" in self.fields and self.events is None:
            # One listener for the session; devices join as they open (open_device).
            self.events = XidWatcher(self, mask=MONITOR_EVENTS, poll_ms=MONITOR_POLL_MS)
            self.events.start(register=False)

    def open_device(self, index: int) -> DeviceInfo:
        """Get the handle and static facts of one device (safe beside other devices'
        calls: each device's state is touched by its own reader only)."""
        info = self.readers[index].open()
        if self.events is not None:
            self.events.register(index)
        return info

    def take_events(self) -> tuple[GpuEvent, ...]:
        """XID and ECC events NVML reported since the last call (with "events" in fields)."""
        if self.events is None:
            return ()
        now_wall, now_mono = datetime.now(UTC), time.monotonic()
        return tuple(
            GpuEvent(gpu_index=e.gpu, kind=e.kind, xid=e.xid if e.kind == "xid" else None,
                     meaning=e.meaning,
                     time=now_wall - timedelta(seconds=max(0.0, now_mono - e.at_s)))
            for e in self.events.take())

    def want_link_rates(self, on: bool) -> None:
        """Read per-link NVLink rates from the next tick on (or stop), whatever the fields
        say: the monitor asks while its GPU detail screen is open."""
        self.settings.link_rates_wanted = on or "link_rates" in self.fields

    def want_detail_fields(self, on: bool) -> None:
        """Read DETAIL_FIELDS too from the next tick on (or stop): the monitor asks while
        its GPU detail screen is open. The readers see one field set or the other."""
        self.settings.fields = self._asked_fields | DETAIL_FIELDS if on else self._asked_fields
        self.want_link_rates(on)

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        return tuple(r.info for r in self.readers)

    @property
    def count(self) -> int:
        return len(self.readers)

    def handle(self, index: int) -> Any | None:
        """The NVML handle of an opened device that is not lost, else None."""
        r = self.readers[index]
        return None if r.pending or r.lost else r.handle

    def query(self, index: int) -> NvmlQuery:
        """The device's NvmlQuery: every call about it goes through this one."""
        return self.readers[index].q

    def close(self) -> None:
        if self._open:
            self._open = False
            for r in self.readers:
                r.close()
            if self.events is not None:
                # Bounded: a monitor's exit must not wait long on a stuck event wait.
                self.events.stop(timeout_s=1.0)
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    def __enter__(self) -> NvmlSource:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sampling ----------------------------------------------------------------------

    def read(self) -> tuple[tuple[GpuSample, ...], tuple[GpuProcess, ...]]:
        """Sample every device once, in turn. Processes are refreshed every
        `process_every` calls."""
        slow = self._tick % self.slow_every == 0
        procs_due = self._tick % self.process_every == 0
        self._tick += 1
        readings = [r.read(slow=slow, processes=procs_due) for r in self.readers]
        if procs_due:
            self._procs = tuple(p for _, procs in readings for p in procs or ())
        return tuple(s for s, _ in readings), self._procs

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        """One device's sample, and its processes when `processes` (else None)."""
        return self.readers[index].read(slow=slow, processes=processes)

    # --- helpers for other layers --------------------------------------------------------

    def index_of_uuid(self, uuid: str) -> int | None:
        want = uuid.lower().removeprefix("gpu-")
        for d in self.devices:
            if d.uuid.lower().removeprefix("gpu-") == want:
                return d.index
        return None

    def read_energy_mj(self, index: int) -> int | None:
        """Total energy counter of one device in mJ (for benchmark windows)."""
        return self.readers[index].read_energy_mj()



