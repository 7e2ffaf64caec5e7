"""Processes on AMD GPUs: DRM clients from fdinfo, ROCm processes from KFD, with the
clock injected (GPU % is busy time over wall time between two readings)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gputui.telemetry.amd import AmdSource
from gputui.telemetry.amd.processes import DrmClient, parse_fdinfo
from gputui.telemetry.model import GpuProcess
from tests.telemetry.amd.fake_tree import FakeHost, GiB, deny, mi300x, rx7900xtx

MI300X_PDEV, RX_PDEV = "0000:c1:00.0", "0000:03:00.0"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    h = FakeHost(tmp_path)
    rx7900xtx(h, 0, RX_PDEV)  # GPU 0
    mi300x(h, 1, MI300X_PDEV)  # GPU 1
    return h


def source(host: FakeHost, clock: Clock) -> AmdSource:
    src = AmdSource(host.sys, host.proc, clock=clock)
    src.open()
    return src


def procs(src: AmdSource, index: int) -> tuple[GpuProcess, ...]:
    _, out = src.read_device(index, slow=False, processes=True)
    assert out is not None
    return out


def test_fdinfo_as_amdgpu_writes_it() -> None:
    text = ("pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1123\ndrm-driver:\tamdgpu\n"
            "drm-client-id:\t14\ndrm-pdev:\t0000:03:00.0\npasid:\t32770\n"
            "drm-memory-vram:\t65536 KiB\ndrm-memory-gtt: \t2048 KiB\n"
            "drm-engine-gfx:\t1203400000 ns\ndrm-engine-compute:\t5000000 ns\n")
    assert parse_fdinfo(text) == DrmClient("0000:03:00.0", 14, 64 << 20, 1203400000, 5000000)
    newer = text + "drm-total-vram:\t70000000\ndrm-resident-vram:\t60 MiB\n"
    assert parse_fdinfo(newer).vram_bytes == 60 << 20  # type: ignore[union-attr]
    assert parse_fdinfo(text.replace("amdgpu", "i915")) is None
    assert parse_fdinfo("drm-driver:\tamdgpu\ndrm-client-id:\t1\n") is None  # which GPU?


def test_vram_and_gpu_share_from_two_readings(host: FakeHost) -> None:
    clock = Clock()
    src = source(host, clock)
    host.drm_client(4242, fd=5, pdev=RX_PDEV, client_id=7, vram="1048576 KiB",
                    gfx_ns=10_000_000_000)
    host.drm_client(5151, fd=9, pdev=RX_PDEV, client_id=8, vram="512 MiB",
                    vram_key="drm-resident-vram", gfx_ns=0, compute_ns=3_000_000_000)
    first = procs(src, 0)
    assert [(p.pid, p.gpu_mem_bytes, p.sm_util_pct, p.kind, p.gpu_index) for p in first] == [
        (4242, 1 * GiB, None, "graphics", 0), (5151, 512 << 20, None, "compute", 0)]
    clock.now += 2.0
    host.drm_client(4242, fd=5, pdev=RX_PDEV, client_id=7, vram="1048576 KiB",
                    gfx_ns=11_500_000_000)  # 1.5 s busy in 2 s: 75 %
    host.drm_client(5151, fd=9, pdev=RX_PDEV, client_id=8, vram="512 MiB",
                    vram_key="drm-resident-vram", gfx_ns=100_000_000,
                    compute_ns=3_300_000_000)  # 0.1 + 0.3 s in 2 s: 20 %
    second = procs(src, 0)
    assert [(p.pid, p.sm_util_pct, p.kind) for p in second] == [
        (4242, 75, "graphics"), (5151, 20, "compute+graphics")]
    assert procs(src, 1) == ()  # nothing on the MI300X


def test_each_client_once_and_on_its_own_gpu(host: FakeHost) -> None:
    clock = Clock()
    src = source(host, clock)
    # One client open on two fds, and again in a forked child: counted once, for the
    # lowest pid.
    for pid, fd in ((300, 5), (300, 6), (301, 5)):
        host.drm_client(pid, fd=fd, pdev=MI300X_PDEV, client_id=42, vram="4 MiB",
                        gfx_ns=0)
    host.drm_client(300, fd=7, pdev=RX_PDEV, client_id=42, vram="8 MiB")  # another GPU's
    host.drm_client(300, fd=8, pdev=MI300X_PDEV, client_id=43, vram="2 MiB")
    host.drm_client(302, fd=3, pdev=MI300X_PDEV, client_id=44, vram="1 MiB", driver="i915")
    assert [(p.pid, p.gpu_mem_bytes) for p in procs(src, 1)] == [(300, 6 << 20)]
    assert [(p.pid, p.gpu_mem_bytes) for p in procs(src, 0)] == [(300, 8 << 20)]


def test_only_gpu_fds_fdinfo_is_read(host: FakeHost) -> None:
    src = source(host, Clock())
    host.other_file(400, fd=3)
    # An fdinfo that says amdgpu but belongs to a file that is not a render node: a scan
    # that read every fdinfo would count it.
    (host.proc / "400" / "fdinfo").mkdir()
    (host.proc / "400" / "fdinfo" / "3").write_text(
        "drm-driver:\tamdgpu\ndrm-pdev:\t0000:c1:00.0\ndrm-client-id:\t9\n")
    assert procs(src, 1) == ()


def test_processes_are_read_only_when_asked_and_once_a_round(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    src = source(host, clock)
    host.drm_client(4242, fd=5, pdev=RX_PDEV, client_id=7, vram="1 MiB", gfx_ns=0)
    passes = []
    real = os.listdir

    def counting(path: object = ".") -> list[str]:
        if os.fspath(path) == str(host.proc):  # type: ignore[call-overload]
            passes.append(clock.now)
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "listdir", counting)
    assert src.read_device(0, slow=False, processes=False)[1] is None
    assert passes == []
    procs(src, 0)
    procs(src, 1)  # the same round: the same pass
    assert len(passes) == 1
    clock.now += 5
    procs(src, 1)
    procs(src, 0)
    assert len(passes) == 2
    clock.now += 0.5
    procs(src, 0)  # GPU 0 asks again: a new round
    assert len(passes) == 3


def test_rocm_processes_from_kfd(host: FakeHost) -> None:
    clock = Clock()
    src = source(host, clock)
    host.kfd_cpu_node(0)
    host.kfd_node(1, gpu_id=53017, pci=MI300X_PDEV)
    host.kfd_node(2, gpu_id=3001, pci=RX_PDEV)
    # A HIP job fdinfo does not see at all, on both GPUs.
    host.kfd_process(777, {53017: 96 * GiB, 3001: 1 * GiB})
    # A PyTorch job with a render-node fd too: fdinfo counts 100 MiB and no busy time.
    host.kfd_process(888, {53017: 40 * GiB})
    host.drm_client(888, fd=4, pdev=MI300X_PDEV, client_id=3, vram="100 MiB", gfx_ns=0,
                    compute_ns=0)
    got = [(p.pid, p.gpu_mem_bytes, p.sm_util_pct, p.kind) for p in procs(src, 1)]
    assert got == [(777, 96 * GiB, None, "compute"), (888, 40 * GiB, None, "compute")]
    clock.now += 1
    host.drm_client(888, fd=4, pdev=MI300X_PDEV, client_id=3, vram="100 MiB", gfx_ns=0,
                    compute_ns=0)
    # Its kernels run on KFD queues fdinfo does not time: unchanged time is no 0 %.
    assert [p.sm_util_pct for p in procs(src, 1)] == [None, None]
    assert [(p.pid, p.gpu_mem_bytes) for p in procs(src, 0)] == [(777, 1 * GiB)]


def test_other_users_and_exiting_processes_are_skipped(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    src = source(host, clock)
    host.drm_client(500, fd=5, pdev=MI300X_PDEV, client_id=1, vram="1 MiB")
    host.drm_client(501, fd=5, pdev=MI300X_PDEV, client_id=2, vram="2 MiB")
    host.drm_client(502, fd=5, pdev=MI300X_PDEV, client_id=3, vram="3 MiB")
    (host.proc / "502" / "fdinfo" / "5").unlink()  # exited between listing and reading
    (host.proc / "503" / "fd").mkdir(parents=True)
    os.symlink("/dev/dri/renderD129", host.proc / "503" / "fd" / "1")
    deny(monkeypatch, host.proc / "501" / "fd")  # another user's: EACCES
    deny(monkeypatch, host.proc / "503" / "fdinfo" / "1", err=errno.EPERM)
    assert [p.pid for p in procs(src, 1)] == [500]
    host.end_process(500)
    clock.now += 1
    assert procs(src, 1) == ()


def test_a_lost_gpu_has_no_processes(host: FakeHost) -> None:
    src = source(host, Clock())
    host.drm_client(600, fd=5, pdev=MI300X_PDEV, client_id=1, vram="1 MiB")
    host.cards[1].remove()
    sample, out = src.read_device(1, slow=False, processes=True)
    assert sample.lost and out == ()
