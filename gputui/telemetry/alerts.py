"""Alerts: conditions a person watching the monitor should notice, in words.

The engine is fed every snapshot in order (live or replayed) together with the
throttle tracker's ongoing episodes. It keeps one alert per (kind, GPU); an
alert is *raised* once when its condition starts and becomes inactive when the
condition ends. Thresholds have hysteresis so a value hovering at a threshold
does not raise a new alert every tick:

- memory_full raises above 95 % and re-arms only below 93 %;
- near_slowdown raises within 5 °C of the slowdown temperature and re-arms only
  below slowdown − 7 °C;
- throttle follows the tracker's episodes, but an episode that starts again
  within THROTTLE_REARM_S of the last one ending reactivates the old alert
  quietly instead of raising a new one (on/off throttling would otherwise flap);
- ecc stays active for ECC_HOLD_S after the counter last grew (the counter is
  read every few ticks, and one tick of red would be easy to miss);
- lost stays active while the GPU is lost; the GPU's other alerts clear.
- clock_change (NVML's clock-change events, where the GPU reports them) is one alert per
  episode: the first event raises it, later ones only update its words (how many changes,
  the clocks and reasons now) until CLOCK_QUIET_S pass without one; every event stays in
  the snapshot's `events` (JSON, recordings);
- stale raises when a GPU's driver calls have not answered for STALE_ALERT_S (a hung
  or very slow device: its values on screen are old) and clears on its next fresh
  reading; while stale, the GPU's other rules are not applied to the old values.

A value that is unknown this tick (None) leaves the alert as it was: not knowing
is not the same as the condition having ended. Besides its sentence, an alert carries
the figures behind it (`values`: temperature and limit, clocks, XID number ...) and, for
throttling, the reasons' keys, refreshed with the sentence; notifications send them
(gputui.notify.events). No textual here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType

from gputui.telemetry.alert import NO_VALUES, Alert, AlertKind, AlertValue, Severity, alert_key
from gputui.telemetry.job_alerts import JobSlowdowns
from gputui.telemetry.model import GpuSample, Snapshot
from gputui.telemetry.throttle import (
    THROTTLE_MASK,
    ThrottleEpisode,
    explain,
    is_throttling,
    reason_keys,
    state_words,
    throttle_words,
)
from gputui.telemetry.units import fmt_bytes, fmt_mhz

MEM_FULL_PCT = 95.0
MEM_REARM_PCT = 93.0
NEAR_SLOWDOWN_C = 5  # raise at temp ≥ slowdown − 5 °C
NEAR_SLOWDOWN_REARM_C = 7  # clear only below slowdown − 7 °C
THROTTLE_REARM_S = 30.0
ECC_HOLD_S = 60.0
CLOCK_QUIET_S = 30.0  # a clock-change episode ends after this long without a change
MAX_HISTORY = 500
# Seconds without an answer before a GPU counts as hung: longer than one slow read, so
# a device that is merely slow (a reading every other tick) does not flap.
STALE_ALERT_S = 3.0


def _values(**kw: AlertValue) -> Mapping[str, AlertValue]:
    return MappingProxyType(kw)


THERMAL_BITS = 0x20 | 0x40  # SW / HW thermal slowdown (telemetry.throttle.REASONS)
# Raised with (or while) a GPU throttles, these describe the same event as its throttle
# alert: listed on the alerts screen, but not a toast of their own.
SAME_EVENT_AS_THROTTLE = frozenset({"near_slowdown", "mem_hot", "clock_change"})


def toasts(raised: Sequence[Alert], active: Sequence[Alert]) -> list[Alert]:
    """The raised alerts worth a toast: one per event. A GPU that gets hot enough to
    throttle raises `throttle` and `near_slowdown` together; two toasts for it covered
    the process table at 80×24."""
    throttling = {a.gpu_index for a in (*raised, *active)
                  if a.kind == "throttle" and a.active}
    return [a for a in raised
            if not (a.kind in SAME_EVENT_AS_THROTTLE and a.gpu_index in throttling)]


class AlertEngine:
    """Turns snapshots into alerts. Not thread-safe: call from one thread."""

    def __init__(self, *, mem_full_pct: float = MEM_FULL_PCT,
                 mem_rearm_pct: float = MEM_REARM_PCT,
                 near_slowdown_c: int = NEAR_SLOWDOWN_C,
                 near_slowdown_rearm_c: int = NEAR_SLOWDOWN_REARM_C,
                 throttle_rearm_s: float = THROTTLE_REARM_S,
                 ecc_hold_s: float = ECC_HOLD_S) -> None:
        if mem_rearm_pct > mem_full_pct or near_slowdown_rearm_c < near_slowdown_c:
            raise ValueError("re-arm thresholds must sit on the safe side of the alert ones")
        self.mem_full_pct = mem_full_pct
        self.mem_rearm_pct = mem_rearm_pct
        self.near_slowdown_c = near_slowdown_c
        self.near_slowdown_rearm_c = near_slowdown_rearm_c
        self.throttle_rearm_s = throttle_rearm_s
        self.ecc_hold_s = ecc_hold_s
        self._alerts: dict[str, Alert] = {}  # latest state per key, active or not
        self._ecc_last: dict[int, int] = {}
        self._ecc_grew_at: dict[int, datetime] = {}
        self._event_at: dict[str, datetime] = {}  # alert key → last XID/ECC event
        self._clock_changes: dict[int, tuple[int, datetime]] = {}  # GPU → (count, last)
        self._history: list[Alert] = []  # every raise, oldest first (bounded)
        self.last_cleared: list[Alert] = []  # alerts that became inactive on the last update
        self.jobs = JobSlowdowns()  # what a throttle cost the training jobs (job_slowdown)

    # --- queries -------------------------------------------------------------------------

    def active(self) -> list[Alert]:
        """Active alerts, errors first, then by GPU and kind."""
        order = {"lost": 0, "stale": 0, "ecc": 1, "throttle": 2, "near_slowdown": 3,
                 "memory_full": 4}
        act = [a for a in self._alerts.values() if a.active]
        return sorted(act, key=lambda a: (a.severity != "error", a.gpu_index or 0,
                                          order.get(a.kind, 9)))

    def get(self, key: str) -> Alert | None:
        return self._alerts.get(key)

    def history(self) -> list[Alert]:
        """Every alert raised so far (as raised), oldest first; bounded."""
        return list(self._history)

    def reset(self) -> None:
        """Forget everything (a replay seeking backwards starts over)."""
        self._alerts.clear()
        self._ecc_last.clear()
        self._ecc_grew_at.clear()
        self._event_at.clear()
        self._clock_changes.clear()
        self._history.clear()
        self.last_cleared = []
        self.jobs.reset()

    # --- the rules -----------------------------------------------------------------------

    def update(self, snap: Snapshot, ongoing: dict[int, ThrottleEpisode]) -> list[Alert]:
        """Apply one snapshot; returns the alerts newly raised on this tick."""
        raised: list[Alert] = []
        self.last_cleared = []
        now = snap.time
        self._events(raised, snap)
        for g in snap.gpus:
            idx = g.index
            if g.lost:
                self._set(raised, "lost", idx, now, "error",
                          f"GPU {idx}: {g.info.name} is lost (fell off the bus or the driver "
                          "gave up on it); the other GPUs are still monitored",
                          values=_values(name=g.info.name, pci_bus_id=g.info.pci_bus_id))
                for kind in ("throttle", "near_slowdown", "memory_full", "ecc", "gpm_busy",
                             "mem_hot", "row_remap"):
                    self._clear(alert_key(kind, idx), now)
                continue
            self._clear(alert_key("lost", idx), now)
            if g.stale:
                if (g.stale_s or 0.0) >= STALE_ALERT_S:
                    self._set(raised, "stale", idx, now, "error",
                              f"GPU {idx}: not answering for {g.stale_s:.0f} s (driver call "
                              "hung); its values are stale, the other GPUs are still "
                              "monitored", values=_values(stale_s=round(g.stale_s or 0.0, 1)))
                continue
            self._clear(alert_key("stale", idx), now)
            self._throttle(raised, g, ongoing.get(idx), now)
            self._near_slowdown(raised, g, now)
            self._memory(raised, g, now)
            self._ecc(raised, g, now)
            self._gpm_busy(raised, g, now)
            self._mem_temp(raised, g, now)
            self._remap(raised, g, now)
        for alert in self.jobs.update(snap):
            self._job_alert(raised, alert)
        return raised

    def _job_alert(self, raised: list[Alert], alert: Alert) -> None:
        """A job_slowdown as the job rules have it now: raised, refreshed or ended."""
        prev = self._alerts.get(alert.key)
        if not alert.active:
            if prev is not None and prev.active:
                self._alerts[alert.key] = alert
                self.last_cleared.append(alert)
        elif prev is not None and prev.active:
            self._alerts[alert.key] = alert
        else:
            self._raise(raised, alert)

    def _mem_temp(self, raised: list[Alert], g: GpuSample, now: datetime) -> None:
        # Same margins as the GPU temperature, against the memory's own limit.
        limit = g.info.temp_mem_max_c
        if g.mem_temp_c is None or limit is None:
            return
        key = alert_key("mem_hot", g.index)
        prev = self._alerts.get(key)
        if g.mem_temp_c >= limit - self.near_slowdown_c:
            self._set(raised, "mem_hot", g.index, now, "warning",
                      f"GPU {g.index}: memory (HBM) at {g.mem_temp_c} °C, limit {limit} °C; "
                      "the GPU slows down to protect it",
                      values=_values(mem_temp_c=g.mem_temp_c, temp_mem_max_c=limit))
        elif prev is not None and prev.active and g.mem_temp_c < limit - self.near_slowdown_rearm_c:
            self._clear(key, now)

    def _remap(self, raised: list[Alert], g: GpuSample, now: datetime) -> None:
        key = alert_key("row_remap", g.index)
        if g.remap_pending is None and g.remap_failure is None:
            return
        if g.remap_failure:
            self._set(raised, "row_remap", g.index, now, "error",
                      f"GPU {g.index}: a memory row could not be remapped (row remap failure): "
                      "the GPU needs service", values=_remap_values(g))
        elif g.remap_pending:
            self._set(raised, "row_remap", g.index, now, "warning",
                      f"GPU {g.index}: a memory row remap is pending "
                      f"({g.remap_uncorrectable_rows or 0} uncorrectable, "
                      f"{g.remap_correctable_rows or 0} correctable rows remapped); reset the "
                      "GPU when its jobs allow", values=_remap_values(g))
        else:
            self._clear(key, now)

    def _events(self, raised: list[Alert], snap: Snapshot) -> None:
        """Each XID / ECC event NVML reported is news: an alert of its own (in the
        history and as a toast), held active for ECC_HOLD_S after the last one."""
        self._clock_events(raised, snap)
        for e in snap.events:
            if e.kind == "clock_change":
                continue
            if e.kind == "xid":
                kind: AlertKind = "xid"
                text = f"XID {e.xid}: {e.meaning}"
                severity: Severity = "error"
                values = _values(xid=e.xid, meaning=e.meaning)
            else:
                kind, text = "ecc_event", e.meaning
                severity = "error" if e.kind == "ecc_double_bit" else "warning"
                values = _values(ecc=e.kind, meaning=e.meaning)
            self._event_at[alert_key(kind, e.gpu_index)] = snap.time
            self._raise(raised, Alert(alert_key(kind, e.gpu_index), e.gpu_index, kind,
                                      severity, f"GPU {e.gpu_index}: {text}", e.time,
                                      values=values))
        for key, at in list(self._event_at.items()):
            if (snap.time - at).total_seconds() >= self.ecc_hold_s:
                self._clear(key, snap.time)
                del self._event_at[key]

    def _clock_events(self, raised: list[Alert], snap: Snapshot) -> None:
        """Clock-change events: one alert per episode (a flapping clock would otherwise
        raise one a second), worded from the GPU's state in this snapshot."""
        gpus = {g.index: g for g in snap.gpus}
        for e in snap.events:
            if e.kind != "clock_change":
                continue
            count, _last = self._clock_changes.get(e.gpu_index, (0, e.time))
            self._clock_changes[e.gpu_index] = (count + 1, e.time)
        for idx, (count, last) in list(self._clock_changes.items()):
            key = alert_key("clock_change", idx)
            if (snap.time - last).total_seconds() >= CLOCK_QUIET_S:
                self._clear(key, snap.time)
                del self._clock_changes[idx]
                continue
            message = f"GPU {idx}: {_clock_change_words(count, gpus.get(idx))}"
            values = _values(changes=count)
            prev = self._alerts.get(key)
            if prev is not None and prev.active:
                self._alerts[key] = replace(prev, message=message, values=values)
            else:
                self._raise(raised, Alert(key, idx, "clock_change", "warning", message, last,
                                          values=values))

    def _gpm_busy(self, raised: list[Alert], g: GpuSample, now: datetime) -> None:
        # Raised once while another profiler holds the GPM counters (the note's retry
        # time changes each back-off; the alert is not raised again for that).
        if g.gpm_note is not None:
            self._set(raised, "gpm_busy", g.index, now, "warning", f"GPU {g.index}: {g.gpm_note}")
        else:
            self._clear(alert_key("gpm_busy", g.index), now)

    def _throttle(self, raised: list[Alert], g: GpuSample, ep: ThrottleEpisode | None,
                  now: datetime) -> None:
        key = alert_key("throttle", g.index)
        if g.throttle_mask is None:
            return  # unknown this tick
        if not is_throttling(g.throttle_mask):
            self._clear(key, now)
            return
        text = explain(g, base_clock_sm_mhz=ep.clock_sm_before_mhz if ep else None)
        message = f"GPU {g.index}: {text or throttle_words(g.throttle_mask)}"
        reasons = tuple(reason_keys(g.throttle_mask & THROTTLE_MASK))
        values = _values(
            clock_sm_mhz=g.clock_sm_mhz, clock_sm_before_mhz=ep.clock_sm_before_mhz if ep else None,
            clock_sm_max_mhz=g.info.clock_sm_max_mhz, temp_c=g.temp_c,
            temp_slowdown_c=g.info.temp_slowdown_c, power_w=g.power_w,
            power_limit_w=g.power_limit_w)
        prev = self._alerts.get(key)
        if prev is not None and prev.active:
            self._alerts[key] = replace(prev, message=message, reasons=reasons, values=values)
            return
        if (prev is not None and prev.until is not None
                and (now - prev.until).total_seconds() < self.throttle_rearm_s):
            # It stopped only moments ago: the same trouble, not news.
            self._alerts[key] = replace(prev, message=message, active=True, until=None,
                                        reasons=reasons, values=values)
            return
        since = ep.start if ep is not None else now
        self._raise(raised, Alert(key, g.index, "throttle", "warning", message, since,
                                  reasons=reasons, values=values))

    def _near_slowdown(self, raised: list[Alert], g: GpuSample, now: datetime) -> None:
        slowdown = g.info.temp_slowdown_c
        if g.temp_c is None or slowdown is None:
            return
        key = alert_key("near_slowdown", g.index)
        prev = self._alerts.get(key)
        is_active = prev is not None and prev.active
        if g.temp_c >= slowdown - self.near_slowdown_c:
            if g.temp_c >= slowdown:
                words = f"{g.temp_c} °C, at or above its slowdown temperature {slowdown} °C"
            else:
                words = (f"{g.temp_c} °C, within {slowdown - g.temp_c} °C of its slowdown "
                         f"temperature {slowdown} °C")
            # Worded from the state now: once the thermal slowdown holds the clocks down
            # "clocks will drop" would contradict the SM clock on screen.
            thermal = (g.throttle_mask or 0) & THERMAL_BITS
            outlook = ("its clocks are already held down (thermal slowdown)" if thermal
                       else "clocks will drop if it gets hotter")
            self._set(raised, "near_slowdown", g.index, now, "warning",
                      f"GPU {g.index}: {words}; {outlook}",
                      values=_values(temp_c=g.temp_c, temp_slowdown_c=slowdown))
        elif is_active and g.temp_c < slowdown - self.near_slowdown_rearm_c:
            self._clear(key, now)

    def _memory(self, raised: list[Alert], g: GpuSample, now: datetime) -> None:
        pct = g.mem_pct
        if pct is None:
            return
        key = alert_key("memory_full", g.index)
        prev = self._alerts.get(key)
        if pct > self.mem_full_pct:
            total = g.mem_total_bytes or g.info.mem_total_bytes
            self._set(raised, "memory_full", g.index, now, "warning",
                      f"GPU {g.index}: memory {pct:.1f}% full ({fmt_bytes(g.mem_used_bytes)} "
                      f"of {fmt_bytes(total)}); a larger batch or another process may run "
                      "out of memory",
                      values=_values(mem_used_bytes=g.mem_used_bytes, mem_total_bytes=total,
                                     mem_pct=round(pct, 1)))
        elif prev is not None and prev.active and pct < self.mem_rearm_pct:
            self._clear(key, now)

    def _ecc(self, raised: list[Alert], g: GpuSample, now: datetime) -> None:
        key = alert_key("ecc", g.index)
        count = g.ecc_uncorrected
        if count is not None:
            last = self._ecc_last.get(g.index)
            self._ecc_last[g.index] = count
            # The first reading only sets the baseline: errors from before we started
            # are not news. A counter that went down was reset (driver reload).
            if last is not None and count > last:
                self._ecc_grew_at[g.index] = now
                self._set(raised, "ecc", g.index, now, "error",
                          f"GPU {g.index}: {count - last} new uncorrected ECC error"
                          f"{'s' if count - last != 1 else ''} ({count} in total); results "
                          "computed on this GPU may be wrong — check nvidia-smi -q -d ECC",
                          values=_values(new_errors=count - last, ecc_uncorrected=count))
                return
        grew = self._ecc_grew_at.get(g.index)
        if grew is not None and (now - grew).total_seconds() >= self.ecc_hold_s:
            self._clear(key, now)

    # --- bookkeeping ---------------------------------------------------------------------

    def _set(self, raised: list[Alert], kind: AlertKind, idx: int, now: datetime,
             severity: Severity, message: str,
             values: Mapping[str, AlertValue] = NO_VALUES) -> None:
        """Raise the alert, or only refresh its message (and values) if it is already
        active."""
        key = alert_key(kind, idx)
        prev = self._alerts.get(key)
        if prev is not None and prev.active:
            self._alerts[key] = replace(prev, message=message, values=values)
            return
        self._raise(raised, Alert(key, idx, kind, severity, message, now, values=values))

    def _raise(self, raised: list[Alert], alert: Alert) -> None:
        self._alerts[alert.key] = alert
        raised.append(alert)
        self._history.append(alert)
        if len(self._history) > MAX_HISTORY:
            del self._history[: len(self._history) - MAX_HISTORY]

    def _clear(self, key: str, now: datetime) -> None:
        prev = self._alerts.get(key)
        if prev is not None and prev.active:
            done = replace(prev, active=False, until=now)
            self._alerts[key] = done
            self.last_cleared.append(done)


def _remap_values(g: GpuSample) -> Mapping[str, AlertValue]:
    return _values(remap_pending=g.remap_pending, remap_failure=g.remap_failure,
                   remap_uncorrectable_rows=g.remap_uncorrectable_rows,
                   remap_correctable_rows=g.remap_correctable_rows)


def _clock_change_words(count: int, g: GpuSample | None) -> str:
    """"clocks changed 3 times; now SM 945MHz of max 1980MHz, clock events: HW thermal
    slowdown" — the clocks and reasons as they are now, not as the event (which carries
    no data) found them."""
    times = "once" if count == 1 else f"{count} times"
    words = f"clocks changed {times}"
    if g is None or g.stale or g.lost:
        return words
    sm = fmt_mhz(g.clock_sm_mhz)
    if g.clock_sm_mhz is not None and g.info.clock_sm_max_mhz is not None:
        sm += f" of max {fmt_mhz(g.info.clock_sm_max_mhz)}"
    return f"{words}; now SM {sm}, clock events: {state_words(g.throttle_mask)}"
