"""Runs the doctor's stages against NVML and reports each check as it finishes.

Callers (the CLI, the TUI's worker thread) pass `on_check` and `on_stage`; both are
called on the thread that runs `run_doctor`. `cancel` stops between checks: the report
then carries what was checked and `interrupted=True`.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.doctor import checks, perf, probes
from gputui.doctor.model import Check, GpuIdent, Report, Stage, Status
from gputui.doctor.probes import ProbePlan
from gputui.errors import GputuiError, UsageError
from gputui.telemetry.health import DeviceHealth

if TYPE_CHECKING:
    from gputui.telemetry import nvml

# How often the idle observation reads throttle reasons and temperature.
OBSERVE_EVERY_S = 0.5


class DoctorUnavailable(GputuiError):
    """NVML cannot be used: there is nothing to check."""


@dataclass(frozen=True, slots=True)
class Options:
    quick: bool = True
    gpus: tuple[int, ...] | None = None  # None: every GPU
    observe_s: float = 0.0  # keep watching at idle (XIDs, throttling) this long
    # How the performance probes run (ignored with `quick`).
    probes: ProbePlan = field(default_factory=ProbePlan)


@dataclass(frozen=True, slots=True)
class StageProgress:
    stage: Stage
    done: int
    total: int


OnCheck = Callable[[Check], None]
OnStage = Callable[[StageProgress], None]


def parse_gpu_list(text: str) -> tuple[int, ...]:
    """"0,2,4-7" → (0, 2, 4, 5, 6, 7). Raises UsageError on anything else."""
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise UsageError(f"--gpus: not a GPU index or range: {part!r}") from None
        if first < 0 or last < first:
            raise UsageError(f"--gpus: bad range: {part!r}")
        out.extend(i for i in range(first, last + 1) if i not in out)
    return tuple(out)


def run_doctor(options: Options, *, on_check: OnCheck | None = None,
               on_stage: OnStage | None = None,
               cancel: threading.Event | None = None,
               sysfs: Path = Path("/sys"), procfs: Path = Path("/proc")) -> Report:
    """NVIDIA GPUs (NVML) first, then AMD ones (amdgpu's files under `sysfs`/`procfs`),
    numbered as every gputui view numbers them."""
    from gputui.telemetry import nvml  # late: importing the doctor must not load pynvml
    from gputui.telemetry.sampler import open_amd
    cancel = cancel or threading.Event()
    source: nvml.NvmlSource | None = nvml.NvmlSource(process_every=1_000_000,
                                                      slow_every=1_000_000)
    why_not = ""
    try:
        source.open()  # type: ignore[union-attr]
    except nvml.NvmlUnavailable as exc:
        source, why_not = None, str(exc)
    amd = open_amd(sysfs, procfs, 1_000_000, 1_000_000)
    if source is None and amd is None:
        raise DoctorUnavailable(f"doctor needs NVML or an AMD GPU: {why_not}")
    base = source.count if source is not None else 0
    try:
        gpus = _select(options.gpus, base + (amd.count if amd is not None else 0))
        done: list[Check] = []

        def emit(check: Check) -> None:
            done.append(check)
            if on_check is not None:
                on_check(check)

        idents: list[GpuIdent] = []
        if source is not None:
            mine = [g for g in gpus if g < base]
            idents += [GpuIdent(d.index, d.name, d.uuid) for d in source.devices
                       if d.index in mine]
            _Run(source, mine, options, emit, on_stage, cancel).all()
        theirs = [g for g in gpus if g >= base]
        if amd is not None and theirs and not cancel.is_set():
            from gputui.doctor.amd import amd_checks

            amd_checks(amd, theirs, base, cancel, emit)
            idents += [GpuIdent(base + d.index, d.name, d.uuid) for d in amd.devices
                       if base + d.index in theirs]
        system = source.system if source is not None else amd.system  # type: ignore[union-attr]
        return Report(checks=tuple(done), gpus=tuple(idents),
                      driver_version=system.driver_version,
                      cuda_driver_version=system.cuda_driver_version,
                      interrupted=cancel.is_set())
    finally:
        if source is not None:
            source.close()
        if amd is not None:
            amd.close()


def _select(wanted: tuple[int, ...] | None, count: int) -> tuple[int, ...]:
    if wanted is None:
        return tuple(range(count))
    missing = [i for i in wanted if i >= count]
    if missing:
        raise UsageError(f"--gpus: no GPU {missing[0]} (this machine has {count}: "
                         f"0-{count - 1})" if count else "--gpus: this machine has no GPU")
    return wanted


class _Run:
    def __init__(self, source: nvml.NvmlSource, gpus: Sequence[int], options: Options,
                 on_check: OnCheck | None, on_stage: OnStage | None,
                 cancel: threading.Event) -> None:
        self.source, self.gpus, self.options = source, gpus, options
        self.on_check, self.on_stage, self.cancel = on_check, on_stage, cancel
        self.done: list[Check] = []
        self.reachable: list[int] = []  # GPUs whose health could be read

    def emit(self, check: Check) -> None:
        self.done.append(check)
        if self.on_check is not None:
            self.on_check(check)

    def stage(self, stage: Stage, done: int, total: int) -> None:
        if self.on_stage is not None:
            self.on_stage(StageProgress(stage, done, total))

    def all(self) -> list[Check]:
        from gputui.telemetry import nvml
        watcher = nvml.XidWatcher(self.source)
        watcher.start()
        started = time.monotonic()
        try:
            healths = self.configuration()
            if not self.cancel.is_set():
                self.health(healths)
            if not self.options.quick and not self.cancel.is_set():
                self.performance(healths)
        finally:
            events = watcher.stop()
        if not self.cancel.is_set():
            watched = time.monotonic() - started
            self.stage(Stage.EVENTS, 0, 1)
            for c in checks.xid_checks(self.reachable, events, watcher.unsupported,
                                       watched, watcher.error):
                self.emit(c)
            self.stage(Stage.EVENTS, 1, 1)
        return self.done

    def configuration(self) -> list[DeviceHealth]:
        from gputui.telemetry.nvml.health_reads import read_health
        total = len(self.gpus) + 1
        self.stage(Stage.CONFIG, 0, total)
        self.emit(checks.driver_check(self.source.system))
        healths: list[DeviceHealth] = []
        for n, gpu in enumerate(self.gpus, 1):
            if self.cancel.is_set():
                return healths
            h = read_health(self.source, gpu)
            healths.append(h)
            if h.error is None:
                self.reachable.append(gpu)
            if h.error is not None:
                self.emit(checks.unreachable(h))
            else:
                for c in checks.config_checks(h, gen=self.options.quick):
                    self.emit(c)
            self.stage(Stage.CONFIG, n, total)
        for c in checks.vbios_checks([h for h in healths if h.error is None]):
            self.emit(c)
        self.stage(Stage.CONFIG, total, total)
        return healths

    def health(self, healths: list[DeviceHealth]) -> None:
        from gputui.telemetry.nvml.health_reads import read_health
        live = [h for h in healths if h.error is None]
        masks = {h.index: h.throttle_mask for h in live}
        temps = {h.index: h.temp_c for h in live}
        steps = max(1, round(self.options.observe_s / OBSERVE_EVERY_S))
        total = steps + 1 if self.options.observe_s > 0 else 1
        self.stage(Stage.HEALTH, 0, total)
        if self.options.observe_s > 0:
            end = time.monotonic() + self.options.observe_s
            for n in range(1, steps + 1):
                if self.cancel.wait(max(0.0, min(OBSERVE_EVERY_S, end - time.monotonic()))):
                    return
                for h in live:
                    again = read_health(self.source, h.index)
                    masks[h.index] = _or(masks[h.index], again.throttle_mask)
                    temps[h.index] = _max(temps[h.index], again.temp_c)
                self.stage(Stage.HEALTH, n, total)
        for h in live:
            # The throttle reasons seen at any point of the observation count.
            h = replace(h, throttle_mask=masks[h.index])
            for c in checks.health_checks(h, idle_mask=masks[h.index],
                                          idle_temp_c=temps[h.index]):
                self.emit(c)
        self.stage(Stage.HEALTH, total, total)


    def performance(self, healths: list[DeviceHealth]) -> None:
        """Probes on each GPU in turn (in the benchmark worker), the PCIe generation
        read while they load it, then every probe figure judged against the peak table
        and the box's median."""
        from gputui.telemetry.nvml.health_reads import p2p_link, read_health
        live = [h for h in healths if h.error is None]
        self.stage(Stage.PERFORMANCE, 0, max(1, len(live)))
        if importlib.util.find_spec("torch") is None:
            from gputui.install_hint import bench_install_hint

            self.emit(Check("performance", None, Status.SKIP, None, None, None,
                            perf.WHY_PERF, f"the probes need torch: {bench_install_hint()}"
                            " (or run with --quick)", Stage.PERFORMANCE))
            self.stage(Stage.PERFORMANCE, 1, 1)
            return
        figures: list[perf.ProbeFigure] = []
        for n, h in enumerate(live, 1):
            if self.cancel.is_set():
                return
            # Read while the probes load the GPU: link generation, throttling, heat.
            under: list[DeviceHealth] = []

            def tick(h: DeviceHealth = h, under: list[DeviceHealth] = under) -> int | None:
                under.append(read_health(self.source, h.index))
                return under[-1].throttle_mask

            link_peak = perf.pcie_peak_gbps(h.pcie_gen_max, h.pcie_width_max)
            figures += [replace(f, peak=link_peak, peak_what="the PCIe link's raw bandwidth")
                        if f.probe in ("h2d", "d2h") else f
                        for f in probes.probe_gpu(h.index, h.uuid, self.options.probes,
                                                  self.cancel, on_tick=tick)]
            if self.cancel.is_set():
                return
            gens = [u.pcie_gen for u in under if u.pcie_gen is not None]
            loaded = replace(h, pcie_gen=max(gens)) if gens else h
            self.emit(checks.pcie_gen(loaded, loaded=bool(gens)))
            mask = temp = None
            for u in under:
                mask, temp = _or(mask, u.throttle_mask), _max(temp, u.temp_c)
            self.emit(checks.throttle_load(h, mask))
            self.emit(checks.temp_headroom_load(h, temp))
            self.stage(Stage.PERFORMANCE, n, len(live))
        if len(live) >= 2 and self.options.probes.device is None:
            # Pairs and the collective need CUDA and several GPUs in one worker.
            figures += probes.probe_interconnect(
                [(h.index, h.uuid) for h in live], self.options.probes, self.cancel,
                lambda a, b: p2p_link(self.source, a, b))
        if self.cancel.is_set():
            return
        for c in perf.perf_checks(figures):
            self.emit(c)


def _or(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a | b


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
