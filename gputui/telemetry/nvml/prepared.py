"""The per-tick NVML calls of one device, prepared once.

pynvml looks the C function up, allocates a fresh ctypes output and returns a struct whose
every attribute read goes through Python-level `__getattribute__` (~0.8 µs each), for
each call. The monitor makes ~12 such calls per GPU and tick, so those wrappers cost more
than the driver's answers. Here each device keeps its output buffers, with the argument
references made once, and the same plain ctypes layouts as pynvml's structs: a tick's
read is one foreign call and one field read each.

Failures raise pynvml's own exceptions (`pynvml.NVMLError(code)` is the class of that
code; a function the library lacks raises NVMLError_FunctionNotFound, found through
pynvml's own lookup), so the source's handling of NOT_SUPPORTED, lost GPUs and older
drivers is the same as with pynvml's wrappers.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import pynvml

from gputui.telemetry.nvml.common import _FIELD_VALUE_GETTERS


class _Utilization(ctypes.Structure):
    _fields_ = pynvml.c_nvmlUtilization_t._fields_


class _MemoryV1(ctypes.Structure):
    _fields_ = pynvml.c_nvmlMemory_t._fields_


class _MemoryV2(ctypes.Structure):
    _fields_ = pynvml.c_nvmlMemory_v2_t._fields_


class _TemperatureV1(ctypes.Structure):
    _fields_ = pynvml.c_nvmlTemperature_v1_t._fields_


class _FieldValue(ctypes.Structure):
    _fields_ = pynvml.c_nvmlFieldValue_t._fields_


class _Sample(ctypes.Structure):
    _fields_ = pynvml.c_nvmlSample_t._fields_


class _ProcessInfo(ctypes.Structure):
    _fields_ = pynvml.c_nvmlProcessInfo_v3_t._fields_


class _ProcessUtil(ctypes.Structure):
    _fields_ = pynvml.c_nvmlProcessUtilizationInfo_v1_t._fields_


class _ProcessesUtil(ctypes.Structure):
    _fields_ = [(name, ctypes.POINTER(_ProcessUtil) if name == "procUtilArray" else kind)
                for name, kind in pynvml.c_nvmlProcessesUtilizationInfo_v1_t._fields_]


# Room for the processes of one GPU (and their utilization samples) in one call; more
# than this get INSUFFICIENT_SIZE and are read through pynvml, which sizes the array.
PROCESS_CAPACITY = 64
# NVML's "not available" memory figure (Windows WDDM); pynvml turns it into None.
_NOT_AVAILABLE = ctypes.c_ulonglong(-1).value
# Room for the driver's sub-second samples newer than the last read: it keeps ~120 per
# kind. A full buffer may mean more were waiting, and is read again the long way.
SAMPLE_CAPACITY = 256



# The C functions by name, as pynvml resolves them (NVMLError_FunctionNotFound when the
# library lacks one): looked up once per process, like pynvml's own cache.
_FUNCTIONS: dict[str, Any] = {}


def _function(name: str) -> Any:
    fn = _FUNCTIONS.get(name)
    if fn is None:
        fn = _FUNCTIONS[name] = pynvml._nvmlGetFunctionPointer(name)
    return fn


# The prepared calls: attribute → (C function, its arguments after the device handle:
# a buffer's name in TickCalls._refs, or a constant).
_BOUND: dict[str, tuple[str, tuple[Any, ...]]] = {
    "_c_util": ("nvmlDeviceGetUtilizationRates", ("util",)),
    "_c_mem2": ("nvmlDeviceGetMemoryInfo_v2", ("mem2",)),
    "_c_mem1": ("nvmlDeviceGetMemoryInfo", ("mem1",)),
    "_c_temp_v": ("nvmlDeviceGetTemperatureV", ("temp",)),
    "_c_temp": ("nvmlDeviceGetTemperature", (pynvml.NVML_TEMPERATURE_GPU, "uint")),
    "_c_reasons": ("nvmlDeviceGetCurrentClocksEventReasons", ("ull",)),
    "_c_throttle": ("nvmlDeviceGetCurrentClocksThrottleReasons", ("ull",)),
    "_c_power": ("nvmlDeviceGetPowerUsage", ("uint",)),
    "_c_fan": ("nvmlDeviceGetFanSpeed", ("uint",)),
    "_c_clock_sm": ("nvmlDeviceGetClockInfo", (pynvml.NVML_CLOCK_SM, "uint")),
    "_c_clock_mem": ("nvmlDeviceGetClockInfo", (pynvml.NVML_CLOCK_MEM, "uint")),
    "_c_pstate": ("nvmlDeviceGetPerformanceState", ("int",)),
    "_c_field": ("nvmlDeviceGetFieldValues", (1, "field")),
}


def gpm_metrics_get(request_ref: Any) -> None:
    """nvmlGpmMetricsGet on a request the caller keeps (and its byref made once)."""
    if rc := (_FUNCTIONS.get("nvmlGpmMetricsGet") or _function("nvmlGpmMetricsGet"))(
            request_ref):
        raise pynvml.NVMLError(rc)


class TickCalls:
    """One device's every-tick reads. Used by the one thread that reads this device.

    Each read is a `functools.partial` of the C function over the handle and the
    buffer's reference, made on first use (so a function an older driver lacks raises
    NVMLError_FunctionNotFound when asked for, as with pynvml): calling it is one C-level
    call, with no Python frame between the source and the foreign function."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._util = _Utilization()
        self._mem1 = _MemoryV1()
        self._mem2 = _MemoryV2()
        self._mem2.version = pynvml.nvmlMemory_v2
        self._temp = _TemperatureV1()
        self._temp.version = pynvml.nvmlTemperature_v1
        self._temp.sensorType = pynvml.NVML_TEMPERATURE_GPU
        self._uint = ctypes.c_uint()
        self._int = ctypes.c_int()
        self._ull = ctypes.c_ulonglong()
        self._field = _FieldValue()
        self._samples = (_Sample * SAMPLE_CAPACITY)()
        self._procs = (_ProcessInfo * PROCESS_CAPACITY)()
        self._proc_utils = (_ProcessUtil * PROCESS_CAPACITY)()
        self._proc_util = _ProcessesUtil()
        self._proc_util.version = pynvml.ProcessesUtilizationInfo_v1
        self._proc_util.procUtilArray = self._proc_utils
        self._link_calls: list[Any] | None = None  # nvlink_states' bound calls
        self._sample_type = ctypes.c_int()
        self._sample_count = ctypes.c_uint()
        r = ctypes.byref
        self._refs = {
            "util": r(self._util), "mem1": r(self._mem1), "mem2": r(self._mem2),
            "temp": r(self._temp), "uint": r(self._uint), "int": r(self._int),
            "ull": r(self._ull), "field": r(self._field),
            "sample_type": r(self._sample_type), "sample_count": r(self._sample_count),
            "proc_util": r(self._proc_util),
        }

    def __getattr__(self, attr: str) -> Any:
        """A prepared call's first use: bind it (only for attributes not yet set)."""
        spec = _BOUND.get(attr)
        if spec is None or attr == "_refs":
            raise AttributeError(attr)
        name, args = spec
        bound = functools.partial(_function(name), self.handle,
                                  *(self._refs[a] if isinstance(a, str) else a for a in args))
        setattr(self, attr, bound)
        return bound

    def _call(self, name: str, *args: Any) -> None:
        fn = _FUNCTIONS.get(name) or _function(name)
        rc = fn(self.handle, *args)
        if rc:
            raise pynvml.NVMLError(rc)

    def utilization(self) -> tuple[int, int]:
        """(GPU %, memory-controller %)."""
        if rc := self._c_util():
            raise pynvml.NVMLError(rc)
        return self._util.gpu, self._util.memory

    def memory_v2(self) -> tuple[int, int, int]:
        """(used, total, reserved) bytes."""
        if rc := self._c_mem2():
            raise pynvml.NVMLError(rc)
        m = self._mem2
        return m.used, m.total, m.reserved

    def memory_v1(self) -> tuple[int, int]:
        """(used, total) bytes, from drivers without the v2 call."""
        if rc := self._c_mem1():
            raise pynvml.NVMLError(rc)
        return self._mem1.used, self._mem1.total

    def temperature_v(self) -> int:
        if rc := self._c_temp_v():
            raise pynvml.NVMLError(rc)
        return int(self._temp.temperature)

    def temperature(self) -> int:
        if rc := self._c_temp():
            raise pynvml.NVMLError(rc)
        return self._uint.value

    def clocks_event_reasons(self) -> int:
        if rc := self._c_reasons():
            raise pynvml.NVMLError(rc)
        return self._ull.value

    def clocks_throttle_reasons(self) -> int:
        if rc := self._c_throttle():
            raise pynvml.NVMLError(rc)
        return self._ull.value

    def power_mw(self) -> int:
        if rc := self._c_power():
            raise pynvml.NVMLError(rc)
        return self._uint.value

    def fan_pct(self) -> int:
        if rc := self._c_fan():
            raise pynvml.NVMLError(rc)
        return self._uint.value

    def clock_sm_mhz(self) -> int:
        if rc := self._c_clock_sm():
            raise pynvml.NVMLError(rc)
        return self._uint.value

    def clock_mem_mhz(self) -> int:
        if rc := self._c_clock_mem():
            raise pynvml.NVMLError(rc)
        return self._uint.value

    def pstate(self) -> int:
        if rc := self._c_pstate():
            raise pynvml.NVMLError(rc)
        return self._int.value

    def field_value(self, field_id: int) -> tuple[int, float | None]:
        """One nvmlDeviceGetFieldValues field: (its own return code, its value, None
        unless that code is NVML_SUCCESS)."""
        f = self._field
        f.fieldId, f.scopeId = field_id, 0
        if rc := self._c_field():
            raise pynvml.NVMLError(rc)
        if f.nvmlReturn != pynvml.NVML_SUCCESS:
            return int(f.nvmlReturn), None
        read = _FIELD_VALUE_GETTERS.get(
            f.valueType, _FIELD_VALUE_GETTERS[pynvml.NVML_VALUE_TYPE_UNSIGNED_INT])
        return pynvml.NVML_SUCCESS, read(f.value)

    def core(self, clock_mem: bool, skip: frozenset[str]) -> tuple[Any, ...]:
        """The every-tick reads in one go, for a device whose calls all answered last
        time (the source reads field by field when one raises): (GPU %, memory-controller
        %, used, total, reserved bytes, temperature, clocks event reasons, power mW, fan
        %, SM MHz, memory MHz, P-state). The fields in `skip` (the device has none: a
        data-center GPU's fan) and the memory clock unless `clock_mem` are None."""
        util, mem = self.utilization(), self.memory_v2()
        return (*util, *mem, self.temperature_v(), self.clocks_event_reasons(),
                None if "power" in skip else self.power_mw(),
                None if "fan" in skip else self.fan_pct(),
                None if "clock_sm" in skip else self.clock_sm_mhz(),
                self.clock_mem_mhz() if clock_mem and "clock_mem" not in skip else None,
                None if "pstate" in skip else self.pstate())

    def processes(self, kind: str) -> list[tuple[int, int | None]] | None:
        """(pid, used GPU memory bytes or None) of the "compute" or "graphics" processes,
        in one call; None when more than PROCESS_CAPACITY run (read through pynvml)."""
        count = self._uint
        count.value = PROCESS_CAPACITY
        name = ("nvmlDeviceGetComputeRunningProcesses_v3" if kind == "compute"
                else "nvmlDeviceGetGraphicsRunningProcesses_v3")
        rc = _function(name)(self.handle, self._refs["uint"], self._procs)
        if rc == pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
            return None
        if rc:
            raise pynvml.NVMLError(rc)
        return [(p.pid, None if p.usedGpuMemory == _NOT_AVAILABLE else p.usedGpuMemory)
                for p in self._procs[:count.value]]

    def process_utilization(self, last_seen_us: int,
                            ) -> list[tuple[int, int, int, int, int, int]] | None:
        """(pid, time µs, SM, memory, encoder, decoder %) of the per-process samples newer
        than `last_seen_us`, in one call; None when more than PROCESS_CAPACITY came."""
        info = self._proc_util
        info.processSamplesCount = PROCESS_CAPACITY
        info.lastSeenTimeStamp = last_seen_us
        rc = _function("nvmlDeviceGetProcessesUtilizationInfo")(self.handle,
                                                               self._refs["proc_util"])
        if rc == pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
            return None
        if rc:
            raise pynvml.NVMLError(rc)
        return [(u.pid, u.timeStamp, u.smUtil, u.memUtil, u.encUtil, u.decUtil)
                for u in self._proc_utils[:info.processSamplesCount]]

    def gpm_sample(self, sample: Any) -> None:
        """nvmlGpmSampleGet into one of the device's two GPM sample buffers."""
        self._call("nvmlGpmSampleGet", sample)

    def nvlink_states(self, links: int) -> tuple[list[bool], int]:
        """Whether each of links 0 .. links-1 is up, until one does not answer: (the
        states read, that link's return code or 0). One bound call per link, made once."""
        calls = self._link_calls
        if calls is None:
            fn = _function("nvmlDeviceGetNvLinkState")
            calls = self._link_calls = [
                functools.partial(fn, self.handle, link, self._refs["uint"])
                for link in range(pynvml.NVML_NVLINK_MAX_LINKS)]
        state = self._uint
        out: list[bool] = []
        for call in calls[:links]:
            if rc := call():
                return out, rc
            out.append(bool(state.value))
        return out, 0

    def samples(self, kind: int, last_seen_us: int) -> tuple[int, bytes] | None:
        """The driver's samples of `kind` newer than `last_seen_us`: (value type, the raw
        nvmlSample_t array), in one call where pynvml makes two; None when the buffer came
        back full (more may be waiting: the caller reads them through pynvml)."""
        self._sample_count.value = SAMPLE_CAPACITY
        self._call("nvmlDeviceGetSamples", kind, ctypes.c_ulonglong(last_seen_us),
                   self._refs["sample_type"], self._refs["sample_count"], self._samples)
        n = self._sample_count.value
        if n >= SAMPLE_CAPACITY:
            return None
        return self._sample_type.value, ctypes.string_at(self._samples,
                                                         n * ctypes.sizeof(_Sample))
