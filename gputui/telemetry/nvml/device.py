"""DeviceReader: one GPU — its handle, static facts, the query that remembers what it
lacks, and everything read from it each tick (the sampler runs each on its own thread)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pynvml

from gputui.telemetry import gpm
from gputui.telemetry.model import DeviceInfo, GpuProcess, GpuSample
from gputui.telemetry.nvml import counters
from gputui.telemetry.nvml.errors import text
from gputui.telemetry.nvml.gpm_session import GpmSession, gpm_available
from gputui.telemetry.nvml.mig_reader import MigReader
from gputui.telemetry.nvml.processes import ProcessReader
from gputui.telemetry.nvml.query import NvmlQuery
from gputui.telemetry.units import kbps_to_bps, mj_to_j, mw_to_w


@dataclass
class ReadSettings:
    """What to read and how often, shared by a source's devices (changed by the source:
    `link_rates_wanted` while a view shows per-link rates, the GPM clock in tests)."""

    fields: frozenset[str]
    slow_every: int
    process_every: int
    link_rates_wanted: bool
    gpm_clock: Callable[[], float]
    gpm_min_gap_s: float


def pending_info(index: int) -> DeviceInfo:
    """What is known of a device before its static facts could be read."""
    return DeviceInfo(index=index, name="(not answering)", uuid="", pci_bus_id="")


class DeviceReader:
    """One GPU. `open` and `read` run on the device's reader thread; `lock` keeps other
    callers (health, energy) from interleaving with them."""

    def __init__(self, index: int, settings: ReadSettings) -> None:
        self.index = index
        self.settings = settings
        self.q = NvmlQuery()
        self.handle: Any = None
        self.info = pending_info(index)
        self.pending = True  # not opened yet
        self.error: str | None = None  # the handle could not be obtained
        self.lock = threading.Lock()
        fields = settings.fields
        # Slow fields (GpuSample field → value), carried between slow ticks.
        self._slow: dict[str, Any] = {}
        self._violation = (counters.Violation(pynvml.NVML_PERF_POLICY_POWER),
                           counters.Violation(pynvml.NVML_PERF_POLICY_THERMAL))
        self._links = counters.NvLinks()
        # The driver's sub-second samples, each read while its field is in the settings
        # (the GPU detail screen turns "util_samples" on while it is open).
        self._ranges: tuple[tuple[str, str, counters.SampleRange], ...] = (
            ("power_samples", "power_w", counters.SampleRange(
                pynvml.NVML_TOTAL_POWER_SAMPLES, "samples_power")),
            ("util_samples", "util_gpu_pct", counters.SampleRange(
                pynvml.NVML_GPU_UTILIZATION_SAMPLES, "samples_util")),
            ("util_samples", "clock_sm_mhz", counters.SampleRange(
                pynvml.NVML_PROCESSOR_CLK_SAMPLES, "samples_clock")))
        self._gpm: GpmSession | None = None
        self._gpm_links = 0  # NVLink links whose per-link rates the session can ask for
        self._gpm_backoff = gpm.GpmBackoff()
        self._link_rates: gpm.LinkMiBps | None = None  # the last metrics' per-link rates
        self._processes = ProcessReader(index, "process_util" in fields)
        self._mig: MigReader | None = None

    @property
    def lost(self) -> bool:
        return self.q.lost

    # --- opening -------------------------------------------------------------------------

    def open(self) -> DeviceInfo:
        """Get the handle and the static facts."""
        with self.lock:
            self._open()
            self.pending = False
            return self.info

    def _open(self) -> None:
        q, i = self.q, self.index
        h = q(pynvml.nvmlDeviceGetHandleByIndex, i)
        if h is None:
            self.info = DeviceInfo(index=i, name="(unavailable)", uuid="", pci_bus_id="")
            self.error = "GPU is lost" if q.lost else (q.last_error_text
                                                       or "the device could not be opened")
            return
        self.handle = h
        pci = q(pynvml.nvmlDeviceGetPciInfo, h)
        mem = self._memory()
        th = pynvml.nvmlDeviceGetTemperatureThreshold
        clock = pynvml.nvmlDeviceGetMaxClockInfo
        self.info = DeviceInfo(
            index=i,
            name=text(q(pynvml.nvmlDeviceGetName, h) or "(unknown)"),
            uuid=text(q(pynvml.nvmlDeviceGetUUID, h) or ""),
            pci_bus_id=text(pci.busId) if pci is not None else "",
            mem_total_bytes=mem[1] if mem else None,
            temp_slowdown_c=q(th, h, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
                              key="temp_slowdown"),
            temp_shutdown_c=q(th, h, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
                              key="temp_shutdown"),
            clock_sm_max_mhz=q(clock, h, pynvml.NVML_CLOCK_SM, key="clock_sm_max"),
            clock_mem_max_mhz=q(clock, h, pynvml.NVML_CLOCK_MEM, key="clock_mem_max"),
            pcie_gen_max=q(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
            pcie_width_max=q(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
            temp_mem_max_c=q(th, h, pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX,
                             key="temp_mem_max"),
        )
        s = self.settings
        self._mig = MigReader(
            q, h, slow_every=s.slow_every, process_every=s.process_every,
            with_gpm="gpm" in s.fields, clock=lambda: self.settings.gpm_clock(),
            min_gap_s=lambda: self.settings.gpm_min_gap_s)

    # --- a tick --------------------------------------------------------------------------

    def read(self, *, slow: bool, processes: bool,
             ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        """This tick's sample, and the processes when `processes` (else None)."""
        with self.lock:
            sample = self._read(slow)
            procs = None
            if processes:
                procs = (tuple(self._processes.read(self.q, self.handle))
                         if self.handle is not None and not self.lost else ())
            if self.lost:
                sample = self._lost()
            return sample, procs

    def _lost(self) -> GpuSample:
        return GpuSample(info=self.info, lost=True, error="GPU is lost")

    def _read(self, slow: bool) -> GpuSample:
        if self.pending:
            return GpuSample(info=self.info, error="not opened yet")
        if self.lost:
            return self._lost()
        if self.handle is None:
            return GpuSample(info=self.info, error=self.error)
        q, h, fields = self.q, self.handle, self.settings.fields
        util = q(pynvml.nvmlDeviceGetUtilizationRates, h)
        mem = self._memory()
        temp = q.newer_or_older(
            "temperature", (pynvml.nvmlDeviceGetTemperatureV, h, pynvml.NVML_TEMPERATURE_GPU),
            (pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU))
        mask = q.newer_or_older("throttle", (pynvml.nvmlDeviceGetCurrentClocksEventReasons, h),
                                (pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, h))
        clock = pynvml.nvmlDeviceGetClockInfo
        if slow:
            self._read_slow()
        energy = (q(pynvml.nvmlDeviceGetTotalEnergyConsumption, h)
                  if "energy" in fields else None)
        rx = tx = None
        if "pcie_throughput" in fields:
            tput = pynvml.nvmlDeviceGetPcieThroughput
            rx = q(tput, h, pynvml.NVML_PCIE_UTIL_RX_BYTES, key="pcie_rx")
            tx = q(tput, h, pynvml.NVML_PCIE_UTIL_TX_BYTES, key="pcie_tx")
        return GpuSample(
            info=self.info,
            util_gpu_pct=util.gpu if util is not None else None,
            util_mem_pct=util.memory if util is not None else None,
            mem_used_bytes=mem[0] if mem else None,
            mem_total_bytes=mem[1] if mem else self.info.mem_total_bytes,
            power_w=mw_to_w(q(pynvml.nvmlDeviceGetPowerUsage, h)),
            temp_c=temp,
            fan_pct=q(pynvml.nvmlDeviceGetFanSpeed, h),
            clock_sm_mhz=q(clock, h, pynvml.NVML_CLOCK_SM, key="clock_sm"),
            clock_mem_mhz=(q(clock, h, pynvml.NVML_CLOCK_MEM, key="clock_mem")
                           if "clock_mem" in fields else None),
            pstate=q(pynvml.nvmlDeviceGetPerformanceState, h),
            energy_j=mj_to_j(energy),
            pcie_rx_bps=kbps_to_bps(rx),
            pcie_tx_bps=kbps_to_bps(tx),
            throttle_mask=mask,
            mem_reserved_bytes=mem[2] if mem else None,
            **self._slow,
            **(self._read_gpm() if "gpm" in fields else {}),
            **self._read_extras(),
            mig_devices=self._mig.read() if "mig" in fields and self._mig else (),
        )

    def _memory(self) -> tuple[int, int, int | None] | None:
        """(used, total, reserved by the driver or None) bytes."""
        h = self.handle
        m = self.q.newer_or_older(
            "memory", (pynvml.nvmlDeviceGetMemoryInfo, h, pynvml.nvmlMemory_v2),
            (pynvml.nvmlDeviceGetMemoryInfo, h))
        if m is None:
            return None
        reserved = getattr(m, "reserved", None)
        return int(m.used), int(m.total), None if reserved is None else int(reserved)

    def _read_slow(self) -> None:
        """Fields that change rarely, read every `slow_every` ticks."""
        q, h, fields = self.q, self.handle, self.settings.fields
        out = self._slow
        out["power_limit_w"] = mw_to_w(q(pynvml.nvmlDeviceGetEnforcedPowerLimit, h))
        if "ecc" in fields:
            out["ecc_uncorrected"] = q(
                pynvml.nvmlDeviceGetTotalEccErrors, h,
                pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
        if "pcie_link" in fields:
            out["pcie_gen"] = q(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h)
            out["pcie_width"] = q(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h)
        if "violation" in fields:
            out["violation_power_frac"] = self._violation[0].read(q, h)
            out["violation_thermal_frac"] = self._violation[1].read(q, h)
        if "pcie_replay" in fields:
            out["pcie_replay_count"] = q(pynvml.nvmlDeviceGetPcieReplayCounter, h)
        if "remap" in fields:
            rows = q(pynvml.nvmlDeviceGetRemappedRows, h)
            if rows is not None:
                (out["remap_correctable_rows"], out["remap_uncorrectable_rows"],
                 out["remap_pending"], out["remap_failure"]) = (
                    int(rows[0]), int(rows[1]), bool(rows[2]), bool(rows[3]))
            pages = pynvml.nvmlDeviceGetRetiredPages
            sbe = q(pages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                    key="retired_pages")
            dbe = q(pages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
                    key="retired_pages")
            pending = q(pynvml.nvmlDeviceGetRetiredPagesPendingStatus, h,
                        key="retired_pages")
            if sbe is not None and dbe is not None and pending is not None:
                out["retired_pages_sbe"], out["retired_pages_dbe"] = len(sbe), len(dbe)
                out["retired_pages_pending"] = pending == pynvml.NVML_FEATURE_ENABLED
        if "nvlink" in fields:
            states = self._links.read_states(q, h)
            out["nvlink_bytes_total"] = counters.nvlink_bytes_total(q, h) if states else None

    def _read_extras(self) -> dict[str, Any]:
        """dcgm-exporter's default counters beyond the core: memory temperature, encoder
        and decoder load, the NVLink links and the driver's sub-second samples."""
        q, h, fields = self.q, self.handle, self.settings.fields
        out: dict[str, Any] = {}
        if "mem_temp" in fields:
            out["mem_temp_c"] = counters.mem_temp_c(q, h)
        if "codec" in fields:
            enc = q(pynvml.nvmlDeviceGetEncoderUtilization, h)
            dec = q(pynvml.nvmlDeviceGetDecoderUtilization, h)
            out["enc_util_pct"] = None if enc is None else int(enc[0])
            out["dec_util_pct"] = None if dec is None else int(dec[0])
        links = self._links.records(self._link_rates)
        if links is not None:
            out["nvlink_links"] = links
        for field, name, samples in self._ranges:
            if field not in fields:
                continue
            got = samples.read(q, h)
            if got is None:
                continue
            lo, hi = got
            if name == "power_w":
                out["power_w_min"], out["power_w_max"] = mw_to_w(lo), mw_to_w(hi)
            else:
                out[f"{name}_min"], out[f"{name}_max"] = int(lo), int(hi)
        return out

    # --- GPM profiling counters (gputui.telemetry.gpm) ----------------------------------

    def _read_gpm(self) -> Mapping[str, Any]:
        """This tick's GPM metrics (from the previous sample and this one), {} when the
        device has none; `gpm_note` while another profiler holds the counters."""
        q, h, s = self.q, self.handle, self.settings
        if "gpm" in q.unsupported:
            return {}
        session = self._gpm
        if session is None:
            ok = gpm_available(q, h)
            if not ok:
                if ok is False:
                    q.unsupported.add("gpm")
                return {}
            # The links are known from the first (slow) tick, read before GPM.
            self._gpm_links = len(self._links.states or ())
            session = GpmSession(q, gpm.request_ids(self._gpm_links),
                                 lambda buf: q(pynvml.nvmlGpmSampleGet, h, buf, key="gpm"))
            if not session.ok:
                return {}
            self._gpm = session
        now = s.gpm_clock()
        backoff = self._gpm_backoff
        if not backoff.due(now):
            return {"gpm_note": backoff.note}
        if session.too_soon(now, s.gpm_min_gap_s):
            return session.last
        # The per-link metrics follow the fixed ones in the request: asked for only while
        # wanted (36 of 48 metrics on an 18-link GPU).
        links = self._gpm_links if s.link_rates_wanted else 0
        raw = session.step(now, len(gpm.METRIC_IDS) + 2 * links)
        if session.sample_failed:
            if "gpm" in q.unsupported:
                self.free_gpm()
            elif q.last_error in gpm.BUSY_CODES:
                backoff.busy(now)
                return {"gpm_note": backoff.note}
            return {}  # transient: N/A this tick, a fresh pair from the next
        backoff.ok()
        if raw is None:
            return {}
        session.last, rates = gpm.parse_buffer(raw, links)
        self._link_rates = rates if links else None
        return session.last

    def free_gpm(self) -> None:
        session, self._gpm = self._gpm, None
        self._link_rates = None
        if session is not None:
            session.free()

    # --- other readers ------------------------------------------------------------------

    def read_energy_mj(self) -> int | None:
        """Total energy counter in mJ (for benchmark windows)."""
        with self.lock:
            if self.handle is None or self.lost:
                return None
            return self.q(pynvml.nvmlDeviceGetTotalEnergyConsumption, self.handle)

    def close(self) -> None:
        """Give back the GPM buffers (NVML is shut down by the source)."""
        self.free_gpm()
        if self._mig is not None:
            self._mig.free()
