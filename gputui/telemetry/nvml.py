"""NvmlSource: the only module that imports pynvml.

Static facts are read once per device; cheap dynamic fields every tick; the
process list (milliseconds on real drivers, serialised in the kernel) and slow
counters every few ticks. A field that answers NOT_SUPPORTED is never asked
again; a function missing from an older driver falls back to its older form; a
lost GPU is marked lost and the others go on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pynvml

from gputui.telemetry.model import DeviceInfo, GpuProcess, GpuSample, SystemInfo
from gputui.telemetry.units import cuda_version_str, kbps_to_bps, mj_to_j, mw_to_w

T = TypeVar("T")

# Fields a consumer may ask for beyond the always-read core, so that a consumer
# pays only for what it shows. PCIe throughput is the expensive one (NVML samples
# the link for ~20 ms per call).
ALL_FIELDS = frozenset({"pcie_throughput", "violation", "ecc", "pcie_link", "energy",
                        "clock_mem"})
# What the live monitor draws (ECC feeds its alerts).
MONITOR_FIELDS = frozenset({"ecc"})


class NvmlUnavailable(Exception):
    """NVML cannot be used at all; str() is the one line shown to the user."""


def describe_init_error(exc: BaseException) -> str:
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return "NVML library not found — is the NVIDIA driver installed?"
    if isinstance(exc, pynvml.NVMLError_DriverNotLoaded):
        return "NVIDIA driver not loaded — is the nvidia kernel module loaded?"
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return ("NVML/driver version mismatch — the driver was updated; reload the nvidia "
                "kernel module or reboot")
    if isinstance(exc, pynvml.NVMLError_NoPermission):
        return "no permission to access the GPUs (NVML: Insufficient Permissions)"
    return f"NVML failed to initialise: {_err_text(exc)}"


def _err_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # pynvml's __str__ itself calls into the library
        return type(exc).__name__


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


@dataclass
class _Device:
    index: int
    handle: Any
    info: DeviceInfo
    unsupported: set[str] = field(default_factory=set)
    lost: bool = False
    error: str | None = None  # handle could not be obtained
    # Slow fields carried between slow ticks.
    power_limit_w: float | None = None
    ecc_uncorrected: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    violation_power_frac: float | None = None
    violation_thermal_frac: float | None = None
    last_violation: dict[int, tuple[int, int]] = field(default_factory=dict)


class NvmlSource:
    """Reads NVIDIA GPUs through NVML. Call from one thread (the sampler's)."""

    def __init__(self, *, process_every: int = 5, slow_every: int = 10,
                 fields: Iterable[str] = ALL_FIELDS) -> None:
        self.process_every = max(1, process_every)
        self.slow_every = max(1, slow_every)
        self.fields = frozenset(fields)
        self.system = SystemInfo()
        self.devices: tuple[DeviceInfo, ...] = ()
        self.error: str | None = None
        self._devs: list[_Device] = []
        self._fallback: set[str] = set()  # functions this driver lacks
        self._tick = 0
        self._procs: tuple[GpuProcess, ...] = ()
        self._open = False
        self._lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------

    def open(self) -> None:
        """Initialise NVML and read static facts. Raises NvmlUnavailable with the reason."""
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
        self._devs = [self._open_device(i) for i in range(count)]
        self.devices = tuple(d.info for d in self._devs)

    def close(self) -> None:
        if self._open:
            self._open = False
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
            )
        except pynvml.NVMLError_GpuIsLost:
            dev.lost = True
        return dev

    # --- per-field calls ---------------------------------------------------------------

    def _field(self, dev: _Device, name: str, fn: Callable[[], T], *,
               newer_call: bool = False) -> T | None:
        """One NVML read. NOT_SUPPORTED is remembered; GpuIsLost propagates.

        With `newer_call`, a function this driver lacks propagates too, so that
        `_fallback_call` can switch to the older form.
        """
        if name in dev.unsupported:
            return None
        try:
            return fn()
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
        h = dev.handle

        def v2() -> tuple[int, int]:
            m = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            return int(m.used), int(m.total)

        def v1() -> tuple[int, int]:
            m = pynvml.nvmlDeviceGetMemoryInfo(h)
            return int(m.used), int(m.total)

        return self._fallback_call(dev, "memory", v2, v1)

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
        """Sample every device once. Processes are refreshed every `process_every` calls."""
        with self._lock:
            slow = self._tick % self.slow_every == 0
            procs_due = self._tick % self.process_every == 0
            self._tick += 1
            samples = tuple(self._read_device(d, slow) for d in self._devs)
            if procs_due:
                self._procs = tuple(p for d in self._devs for p in self._read_processes(d))
            return samples, self._procs

    def _read_device(self, dev: _Device, slow: bool) -> GpuSample:
        if dev.lost:
            return GpuSample(info=dev.info, lost=True, error="GPU is lost")
        if dev.handle is None:
            return GpuSample(info=dev.info, error=dev.error)
        try:
            return self._read_fields(dev, slow)
        except pynvml.NVMLError_GpuIsLost:
            dev.lost = True
            return GpuSample(info=dev.info, lost=True, error="GPU is lost")

    def _read_fields(self, dev: _Device, slow: bool) -> GpuSample:
        h = dev.handle
        f = self._field
        util = f(dev, "util", lambda: pynvml.nvmlDeviceGetUtilizationRates(h))
        mem = self._memory(dev)
        temp = self._fallback_call(
            dev, "temperature",
            lambda: pynvml.nvmlDeviceGetTemperatureV(h, pynvml.NVML_TEMPERATURE_GPU),
            lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
        mask = self._fallback_call(
            dev, "throttle",
            lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
            lambda: pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
        if slow:
            self._read_slow(dev)
        energy = (f(dev, "energy", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
                  if "energy" in self.fields else None)
        rx = tx = None
        if "pcie_throughput" in self.fields:
            rx = f(dev, "pcie_throughput", lambda: pynvml.nvmlDeviceGetPcieThroughput(
                h, pynvml.NVML_PCIE_UTIL_RX_BYTES))
            tx = f(dev, "pcie_throughput", lambda: pynvml.nvmlDeviceGetPcieThroughput(
                h, pynvml.NVML_PCIE_UTIL_TX_BYTES))
        return GpuSample(
            info=dev.info,
            util_gpu_pct=int(util.gpu) if util is not None else None,
            util_mem_pct=int(util.memory) if util is not None else None,
            mem_used_bytes=mem[0] if mem else None,
            mem_total_bytes=mem[1] if mem else dev.info.mem_total_bytes,
            power_w=mw_to_w(f(dev, "power", lambda: pynvml.nvmlDeviceGetPowerUsage(h))),
            power_limit_w=dev.power_limit_w,
            temp_c=temp,
            fan_pct=f(dev, "fan", lambda: pynvml.nvmlDeviceGetFanSpeed(h)),
            clock_sm_mhz=f(dev, "clock_sm",
                           lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            clock_mem_mhz=(f(dev, "clock_mem",
                             lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM))
                           if "clock_mem" in self.fields else None),
            pstate=f(dev, "pstate", lambda: pynvml.nvmlDeviceGetPerformanceState(h)),
            energy_j=mj_to_j(energy),
            pcie_gen=dev.pcie_gen,
            pcie_width=dev.pcie_width,
            pcie_rx_bps=kbps_to_bps(rx),
            pcie_tx_bps=kbps_to_bps(tx),
            ecc_uncorrected=dev.ecc_uncorrected,
            throttle_mask=mask,
            violation_power_frac=dev.violation_power_frac,
            violation_thermal_frac=dev.violation_thermal_frac,
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

    def _read_processes(self, dev: _Device) -> list[GpuProcess]:
        if dev.lost or dev.handle is None:
            return []
        h = dev.handle
        out: dict[int, GpuProcess] = {}
        try:
            for kind, fn in (("compute", pynvml.nvmlDeviceGetComputeRunningProcesses),
                             ("graphics", pynvml.nvmlDeviceGetGraphicsRunningProcesses)):
                plist = self._field(dev, f"processes_{kind}", lambda fn=fn: fn(h)) or []
                for p in plist:
                    pid = int(p.pid)
                    mem = p.usedGpuMemory
                    if pid in out:
                        # A process that is both compute and graphics (e.g. a viewer): keep
                        # the larger memory figure, as nvidia-smi does.
                        old = out[pid]
                        if mem is not None and (old.gpu_mem_bytes or 0) < mem:
                            out[pid] = GpuProcess(dev.index, pid, int(mem), "compute+graphics")
                        continue
                    out[pid] = GpuProcess(dev.index, pid, None if mem is None else int(mem),
                                          kind)
        except pynvml.NVMLError_GpuIsLost:
            dev.lost = True
            return []
        return list(out.values())

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
