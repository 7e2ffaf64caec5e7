"""NvmlSource: static facts once per device, cheap fields every tick, the process list
and slow counters every few ticks. A field that answers NOT_SUPPORTED is never asked again;
a function missing from an older driver falls back; a lost GPU is marked lost and the
others go on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pynvml

from gputui.telemetry import gpm
from gputui.telemetry.model import (
    DeviceInfo,
    GpuEvent,
    GpuProcess,
    GpuSample,
    SystemInfo,
    new_gpu_sample,
)
from gputui.telemetry.nvml.common import (
    ALL_FIELDS,
    DETAIL_FIELDS,
    NvmlUnavailable,
    T,
    _Device,
    _err_text,
    _text,
    describe_init_error,
    pending_info,
)
from gputui.telemetry.nvml.events import MONITOR_EVENTS, XidWatcher
from gputui.telemetry.nvml.extras import ExtraReads
from gputui.telemetry.nvml.mig_reads import MigReads
from gputui.telemetry.nvml.prepared import TickCalls
from gputui.telemetry.nvml.process_reads import ProcessReads
from gputui.telemetry.units import cuda_version_str, kbps_to_bps, mj_to_j, mw_to_w

# The fields of NvmlSource._core's tuple, and those a device may lack for good (read
# around by TickCalls.core).
_CORE_NAMES = ("util", "util", "memory", "memory", "temperature", "throttle", "power", "fan",
               "clock_sm", "clock_mem", "pstate")
_SKIPPABLE = frozenset({"power", "fan", "clock_sm", "clock_mem", "pstate"})


class NvmlSource(ExtraReads, MigReads, ProcessReads):
    """Reads NVIDIA GPUs through NVML. Call from one thread (the sampler's)."""

    # The clock of the GPM back-off (a test replaces it to step over the wait).
    gpm_clock: Callable[[], float] = staticmethod(time.monotonic)
    gpm_min_gap_s: float = gpm.MIN_SAMPLE_GAP_S

    def __init__(self, *, process_every: int = 5, slow_every: int = 10,
                 fields: Iterable[str] = ALL_FIELDS) -> None:
        self.process_every = max(1, process_every)
        self.slow_every = max(1, slow_every)
        self.fields = self._asked_fields = frozenset(fields)
        self.system = SystemInfo()
        self.error: str | None = None
        self._devs: list[_Device] = []
        self._fallback: set[str] = set()  # functions this driver lacks
        self._tick = 0
        self._procs: tuple[GpuProcess, ...] = ()
        self.events: XidWatcher | None = None  # with "events" in fields, once open
        # Per-link NVLink rates: always with "link_rates" in fields, else while a view
        # that shows them asks (want_link_rates); read by the reader threads each tick.
        self.link_rates_wanted = "link_rates" in self.fields
        self._open = False
        self._lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------

    def open(self) -> None:
        """Initialise NVML and read static facts. Raises NvmlUnavailable with the reason."""
        self.open_system()
        for i in range(len(self._devs)):
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
        self.system = SystemInfo(
            driver_version=self._opt(lambda: _text(pynvml.nvmlSystemGetDriverVersion())),
            nvml_version=self._opt(lambda: _text(pynvml.nvmlSystemGetNVMLVersion())),
            cuda_driver_version=cuda_version_str(
                self._opt(pynvml.nvmlSystemGetCudaDriverVersion)),
        )
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            self.close()
            self.error = f"NVML could not count GPUs: {_err_text(exc)}"
            raise NvmlUnavailable(self.error) from exc
        self._devs = [_Device(i, None, pending_info(i), pending=True) for i in range(count)]
        if "events" in self.fields and self.events is None:
            # One listener for the session; devices join as they open (open_device).
            self.events = XidWatcher(self, mask=MONITOR_EVENTS)
            self.events.start(register=False)

    def open_device(self, index: int) -> DeviceInfo:
        """Get the handle and static facts of one device (safe beside other devices'
        calls: each device's state is touched by one thread only)."""
        dev = self._open_device(index)
        self._devs[index] = dev
        if self.events is not None:
            self.events.register(index)
        return dev.info

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
        self.link_rates_wanted = on or "link_rates" in self.fields

    def want_detail_fields(self, on: bool) -> None:
        """Read DETAIL_FIELDS too from the next tick on (or stop): the monitor asks while
        its GPU detail screen is open. The readers see one field set or the other."""
        self.fields = self._asked_fields | DETAIL_FIELDS if on else self._asked_fields
        self.want_link_rates(on)

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        return tuple(d.info for d in self._devs)

    @property
    def count(self) -> int:
        return len(self._devs)

    def close(self) -> None:
        if self._open:
            self._open = False
            for dev in self._devs:
                self._gpm_free(dev)
                self._mig_free(dev)
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

    @staticmethod
    def _opt(fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except pynvml.NVMLError:
            return None

    def _open_device(self, index: int) -> _Device:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as exc:
            info = DeviceInfo(index=index, name="(unavailable)", uuid="", pci_bus_id="")
            lost = isinstance(exc, pynvml.NVMLError_GpuIsLost)
            return _Device(index, None, info, lost=lost, error=_err_text(exc))
        dev = _Device(index, handle, DeviceInfo(index=index, name="", uuid="", pci_bus_id=""))
        dev.calls = TickCalls(handle)
        try:
            name = self._field(dev, "name", lambda: _text(pynvml.nvmlDeviceGetName(handle)))
            uuid = self._field(dev, "uuid", lambda: _text(pynvml.nvmlDeviceGetUUID(handle)))
            pci = self._field(dev, "pci",
                              lambda: _text(pynvml.nvmlDeviceGetPciInfo(handle).busId))
            mem = self._memory(dev)
            th = pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            sd = pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
            dev.info = DeviceInfo(
                index=index,
                name=name or "(unknown)",
                uuid=uuid or "",
                pci_bus_id=pci or "",
                mem_total_bytes=mem[1] if mem else None,
                temp_slowdown_c=self._field(
                    dev, "temp_slowdown",
                    lambda: pynvml.nvmlDeviceGetTemperatureThreshold(handle, th)),
                temp_shutdown_c=self._field(
                    dev, "temp_shutdown",
                    lambda: pynvml.nvmlDeviceGetTemperatureThreshold(handle, sd)),
                clock_sm_max_mhz=self._field(
                    dev, "clock_sm_max",
                    lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                clock_mem_max_mhz=self._field(
                    dev, "clock_mem_max",
                    lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
                pcie_gen_max=self._field(
                    dev, "pcie_gen_max",
                    lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
                pcie_width_max=self._field(
                    dev, "pcie_width_max",
                    lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
                temp_mem_max_c=self._field(
                    dev, "temp_mem_max",
                    lambda: pynvml.nvmlDeviceGetTemperatureThreshold(
                        handle, pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX)),
            )
        except pynvml.NVMLError_GpuIsLost:
            dev.lost = True
        return dev

    # --- per-field calls ---------------------------------------------------------------

    def _field(self, dev: _Device, name: str, fn: Callable[..., T], *args: Any,
               newer_call: bool = False) -> T | None:
        """One NVML read, `fn(*args)`. NOT_SUPPORTED is remembered; GpuIsLost propagates.

        With `newer_call`, a function this driver lacks propagates too, so that
        `_fallback_call` can switch to the older form.
        """
        if name in dev.unsupported:
            return None
        try:
            return fn(*args)
        except (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLError_ArgumentVersionMismatch):
            if newer_call:
                raise
            dev.unsupported.add(name)
            return None
        except pynvml.NVMLError_NotSupported:
            dev.unsupported.add(name)
            return None
        except pynvml.NVMLError_GpuIsLost:
            raise
        except pynvml.NVMLError:
            # Transient (timeout, unknown, no data): N/A this tick, ask again next tick.
            return None

    def _memory(self, dev: _Device) -> tuple[int, int] | None:
        calls = dev.calls

        def v2() -> tuple[int, int]:
            used, total, dev.mem_reserved_bytes = calls.memory_v2()
            return used, total

        return self._fallback_call(dev, "memory", v2, calls.memory_v1)

    def _fallback_call(self, dev: _Device, name: str, new: Callable[[], T],
                       old: Callable[[], T]) -> T | None:
        """Try the newer NVML call; on a driver that lacks it, use the older one from now on."""
        if name not in self._fallback:
            try:
                return self._field(dev, name, new, newer_call=True)
            except (pynvml.NVMLError_FunctionNotFound,
                    pynvml.NVMLError_ArgumentVersionMismatch):
                self._fallback.add(name)
        return self._field(dev, name, old)

    # --- sampling ----------------------------------------------------------------------

    def read(self) -> tuple[tuple[GpuSample, ...], tuple[GpuProcess, ...]]:
        """Sample every device once, in turn. Processes are refreshed every
        `process_every` calls. (The sampler reads devices in parallel instead, with
        `read_device`, so that one hung device cannot stop the others.)"""
        with self._lock:
            slow = self._tick % self.slow_every == 0
            procs_due = self._tick % self.process_every == 0
            self._tick += 1
            samples = tuple(self._read_device(d, slow) for d in self._devs)
            if procs_due:
                self._procs = tuple(p for d in self._devs for p in self._read_processes(d))
            return samples, self._procs

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        """One device's sample, and its processes when `processes` (else None).

        Touches only this device's state, so readers of different devices can run at
        the same time on their own threads."""
        dev = self._devs[index]
        sample = self._read_device(dev, slow)
        procs = tuple(self._read_processes(dev)) if processes else None
        return sample, procs

    def _read_device(self, dev: _Device, slow: bool) -> GpuSample:
        if dev.pending:
            return GpuSample(info=dev.info, error="not opened yet")
        if dev.lost:
            return GpuSample(info=dev.info, lost=True, error="GPU is lost")
        if dev.handle is None:
            return GpuSample(info=dev.info, error=dev.error)
        try:
            return self._read_fields(dev, slow)
        except pynvml.NVMLError_GpuIsLost:
            dev.lost = True
            return GpuSample(info=dev.info, lost=True, error="GPU is lost")

    def _core(self, dev: _Device) -> tuple[Any, ...]:
        """The every-tick reads: (GPU %, memory-controller %, used bytes, total bytes,
        temperature, clocks event reasons, power mW, fan %, SM MHz, memory MHz, P-state),
        None for each that did not answer.

        A device whose reads all answered last time is read in one straight run
        (TickCalls.core); should one raise, it is read field by field, with each field's
        own NOT_SUPPORTED, transient and older-driver handling, until all answer again."""
        calls = dev.calls
        clock_mem = "clock_mem" in self.fields
        if dev.plain:
            try:
                got = calls.core(clock_mem, dev.core_skip)
            except pynvml.NVMLError_GpuIsLost:
                raise
            except pynvml.NVMLError:
                dev.plain = False
            else:
                dev.mem_reserved_bytes = got[4]
                return got[:4] + got[5:]
        f = self._field
        util = f(dev, "util", calls.utilization)
        mem = self._memory(dev)
        got = (
            *(util or (None, None)), *(mem or (None, None)),
            self._fallback_call(dev, "temperature", calls.temperature_v, calls.temperature),
            self._fallback_call(dev, "throttle", calls.clocks_event_reasons,
                                calls.clocks_throttle_reasons),
            f(dev, "power", calls.power_mw), f(dev, "fan", calls.fan_pct),
            f(dev, "clock_sm", calls.clock_sm_mhz),
            f(dev, "clock_mem", calls.clock_mem_mhz) if clock_mem else None,
            f(dev, "pstate", calls.pstate))
        # Read in one run from the next tick on if every field the device has answered
        # with the current calls (fields it lacks, NOT_SUPPORTED, are left out of the run).
        dev.core_skip = frozenset(_SKIPPABLE & dev.unsupported)
        dev.plain = (not self._fallback & {"memory", "temperature", "throttle"}
                     and not {"util", "memory", "temperature", "throttle"} & dev.unsupported
                     and dev.mem_reserved_bytes is not None
                     and all(v is not None for name, v in zip(_CORE_NAMES, got, strict=True)
                             if name not in dev.core_skip
                             and (name != "clock_mem" or clock_mem)))
        return got

    def _read_fields(self, dev: _Device, slow: bool) -> GpuSample:
        h = dev.handle
        f = self._field
        fields = self.fields
        (util_gpu, util_mem, used, total, temp, mask, power_mw, fan, clock_sm, clock_mem,
         pstate) = self._core(dev)
        if slow:
            self._read_slow(dev)
        energy = (f(dev, "energy", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
                  if "energy" in fields else None)
        rx = tx = None
        if "pcie_throughput" in fields:
            rx = f(dev, "pcie_throughput", lambda: pynvml.nvmlDeviceGetPcieThroughput(
                h, pynvml.NVML_PCIE_UTIL_RX_BYTES))
            tx = f(dev, "pcie_throughput", lambda: pynvml.nvmlDeviceGetPcieThroughput(
                h, pynvml.NVML_PCIE_UTIL_TX_BYTES))
        return new_gpu_sample(
            info=dev.info,
            util_gpu_pct=util_gpu,
            util_mem_pct=util_mem,
            mem_used_bytes=used,
            mem_total_bytes=total if total is not None else dev.info.mem_total_bytes,
            power_w=mw_to_w(power_mw),
            power_limit_w=dev.power_limit_w,
            temp_c=temp,
            fan_pct=fan,
            clock_sm_mhz=clock_sm,
            clock_mem_mhz=clock_mem,
            pstate=pstate,
            energy_j=mj_to_j(energy),
            pcie_gen=dev.pcie_gen,
            pcie_width=dev.pcie_width,
            pcie_rx_bps=kbps_to_bps(rx),
            pcie_tx_bps=kbps_to_bps(tx),
            ecc_uncorrected=dev.ecc_uncorrected,
            throttle_mask=mask,
            violation_power_frac=dev.violation_power_frac,
            violation_thermal_frac=dev.violation_thermal_frac,
            **(self._read_gpm(dev) if "gpm" in fields else {}),
            **self._read_extras(dev),
            mig_devices=self._read_mig(dev) if "mig" in fields else (),
        )

    def _read_slow(self, dev: _Device) -> None:
        """Fields that change rarely, read every `slow_every` ticks."""
        h = dev.handle
        f = self._field
        dev.power_limit_w = mw_to_w(
            f(dev, "power_limit", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h)))
        if "ecc" in self.fields:
            dev.ecc_uncorrected = f(dev, "ecc", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
                h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))
        if "pcie_link" in self.fields:
            dev.pcie_gen = f(dev, "pcie_gen",
                             lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h))
            dev.pcie_width = f(dev, "pcie_width",
                               lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(h))
        if "violation" in self.fields:
            dev.violation_power_frac = self._violation(dev, pynvml.NVML_PERF_POLICY_POWER)
            dev.violation_thermal_frac = self._violation(dev, pynvml.NVML_PERF_POLICY_THERMAL)
        if "pcie_replay" in self.fields:
            dev.pcie_replay_count = f(dev, "pcie_replay",
                                      lambda: pynvml.nvmlDeviceGetPcieReplayCounter(h))
        if "remap" in self.fields:
            rows = f(dev, "remapped_rows", lambda: pynvml.nvmlDeviceGetRemappedRows(h))
            dev.remap = None if rows is None else (
                int(rows[0]), int(rows[1]), bool(rows[2]), bool(rows[3]))
            cause = (pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                     pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
            dev.retired = f(dev, "retired_pages", lambda: (
                len(pynvml.nvmlDeviceGetRetiredPages(h, cause[0])),
                len(pynvml.nvmlDeviceGetRetiredPages(h, cause[1])),
                pynvml.nvmlDeviceGetRetiredPagesPendingStatus(h) == pynvml.NVML_FEATURE_ENABLED))
        if "nvlink" in self.fields:
            dev.nvlink_states = self._nvlink_states(dev)
            dev.nvlink_bytes_total = self._nvlink_total(dev) if dev.nvlink_states else None

    def _violation(self, dev: _Device, policy: int) -> float | None:
        """Fraction of time throttled since the previous slow tick (NVML counts ns)."""
        v = self._field(dev, "violation",
                        lambda: pynvml.nvmlDeviceGetViolationStatus(dev.handle, policy))
        if v is None:
            return None
        ref_us, viol_ns = int(v.referenceTime), int(v.violationTime)
        prev = dev.last_violation.get(policy)
        dev.last_violation[policy] = (ref_us, viol_ns)
        if prev is None or ref_us <= prev[0]:
            return None
        frac = (viol_ns - prev[1]) / ((ref_us - prev[0]) * 1000.0)
        return min(1.0, max(0.0, frac))

    # --- helpers for other layers --------------------------------------------------------

    def index_of_uuid(self, uuid: str) -> int | None:
        want = uuid.lower().removeprefix("gpu-")
        for d in self.devices:
            if d.uuid.lower().removeprefix("gpu-") == want:
                return d.index
        return None

    def read_energy_mj(self, index: int) -> int | None:
        """Total energy counter of one device in mJ (for benchmark windows)."""
        with self._lock:
            dev = self._devs[index]
            if dev.lost or dev.handle is None:
                return None
            try:
                return self._field(
                    dev, "energy", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(dev.handle))
            except pynvml.NVMLError_GpuIsLost:
                dev.lost = True
                return None

