"""`--profile`: a short extra pass under torch.profiler after the timed run.

The profiler adds overhead of its own, so it never wraps the timed loop: its numbers explain
where time goes, the timed loop says how much there is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from gputui.bench.extras import Profile, ProfiledOp
from gputui.bench.worker.timing import sync


def profile_steps(
    step: Callable[[int], None], device: torch.device, *, steps: int, out_dir: str | None,
    name: str, top: int = 15,
) -> Profile:
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    sync(device)
    with profile(activities=activities, record_shapes=False) as prof:
        for i in range(steps):
            step(i)
        sync(device)
    trace_path: str | None = None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        trace_path = os.path.abspath(os.path.join(out_dir, f"{name}-{stamp}-{os.getpid()}.json"))
        prof.export_chrome_trace(trace_path)
    cuda = device.type == "cuda"
    rows = []
    for ev in prof.key_averages():
        dev_self = getattr(ev, "self_device_time_total", None)
        if dev_self is None:
            dev_self = getattr(ev, "self_cuda_time_total", 0)
        rows.append(ProfiledOp(
            name=ev.key, count=int(ev.count), self_cpu_ms=ev.self_cpu_time_total / 1000.0,
            cpu_total_ms=ev.cpu_time_total / 1000.0,
            self_device_ms=(dev_self / 1000.0) if cuda else None))
    rows.sort(key=lambda r: (r.self_device_ms if cuda else r.self_cpu_ms) or 0.0, reverse=True)
    return Profile(steps=steps, activities=tuple(a.name for a in activities),
                   top_ops=tuple(rows[:top]), trace_path=trace_path)
