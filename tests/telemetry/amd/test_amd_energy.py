"""AMD GPUs take the same energy path as NVIDIA's: an MI300X's energy accumulator over one
second, shared by two fdinfo clients' GPU % (amdgpu's busy ns), on a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.telemetry.amd import AmdSource
from gputui.telemetry.amd.gpu_metrics import ENERGY_UNIT_J
from gputui.telemetry.sampler import Sampler
from tests.telemetry.amd.fake_tree import FakeHost, mi300x

PDEV = "0000:c1:00.0"
START = 3_276_800_000  # the fake MI300X's accumulator: 50,000 J


def test_two_fdinfo_clients_share_an_mi300x_by_their_gpu_percent(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0, PDEV)
    host.drm_client(4242, fd=5, pdev=PDEV, client_id=7, vram="1024 KiB", compute_ns=0)
    host.drm_client(4343, fd=6, pdev=PDEV, client_id=8, vram="1024 KiB", compute_ns=0)
    now = [100.0]
    src = AmdSource(host.sys, host.proc, process_every=1, slow_every=1000,
                    clock=lambda: now[0])
    src.open_system()
    sampler = Sampler(interval=1.0, source=src, idle_w=12.0, clock=lambda: now[0])
    try:
        sampler.tick()
        now[0] += 1.0  # one second: 612 J, 60 % and 20 % of the GPU's time
        card.set_metrics(energy_accumulator=START + round(612 / ENERGY_UNIT_J))
        host.drm_client(4242, fd=5, pdev=PDEV, client_id=7, vram="1024 KiB", compute_ns=600_000_000)
        host.drm_client(4343, fd=6, pdev=PDEV, client_id=8, vram="1024 KiB", compute_ns=200_000_000)
        snap = sampler.tick()
    finally:
        sampler.close()
    procs = {p.pid: p for p in snap.processes}
    assert (procs[4242].sm_util_pct, procs[4343].sm_util_pct) == (60, 20)
    (g,) = snap.gpu_energy
    assert g.energy_seen_j == pytest.approx(612.0)
    assert procs[4242].energy_j == pytest.approx(600 * 0.75)
    assert procs[4343].energy_j == pytest.approx(600 * 0.25)
    assert procs[4242].energy_method == "sm_share" and procs[4242].energy_estimate
