"""`gputui export` against dcgm-exporter's defaults: every default counter served, the host
label named `hostname` as dcgm-exporter names it since May 2026 (or `Hostname` for older
dashboards), and alerts sent from the exporter's own sampler."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from gputui.fleet.page import Series
from gputui.fleet.scrape import parse_metrics
from tests.fleet.conftest import ExporterFactory, http_get, parse_page, wait_for

H100 = {"gpu": "0", "UUID": "GPU-aaaaaaaa-0000-0000-0000-000000000001",
        "DCGM_FI_DRIVER_VERSION": "550.54.15"}
# dcgm-exporter's etc/default-counters.csv (May 2026), less DCGM_FI_DEV_VGPU_LICENSE_STATUS
# (vGPU guests only). DCGM_FI_DRIVER_VERSION is a label there: on every series.
DEFAULT_COUNTERS = (
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
)


def _served(s: Series, name: str, **labels: str) -> bool:
    return any(n in (name, f"{name}_total") and all((k, v) in ls for k, v in labels.items())
               for n, ls in s)


def _full_page(url: str) -> str:
    def page() -> str | None:  # GPM values come from the second tick on
        text = http_get(url)
        return text if "DCGM_FI_PROF_DRAM_ACTIVE{" in text else None

    return wait_for(page, 15, "the profiling fields on the page")


def test_all_of_dcgm_exporters_default_counters(start_exporter: ExporterFactory) -> None:
    exp = start_exporter("gpm", hostname="node-h", interval=0.2)
    s = parse_page(_full_page(exp.url))
    assert len(DEFAULT_COUNTERS) + 1 == 25  # and the driver version label
    missing = [n for n in DEFAULT_COUNTERS if not _served(s, n, hostname="node-h", **H100)]
    assert missing == []
    exp.stop(signal.SIGTERM)


def test_hostname_label_new_and_legacy(start_exporter: ExporterFactory) -> None:
    new = start_exporter("two_gpus", hostname="node-n", interval=0.2)
    old = start_exporter("two_gpus", hostname="node-o", interval=0.2,
                         extra=("--legacy-hostname-label",))
    page_new, page_old = http_get(new.url), http_get(old.url)
    s_new, s_old = parse_page(page_new), parse_page(page_old)
    assert _served(s_new, "DCGM_FI_DEV_GPU_UTIL", gpu="0", hostname="node-n")
    assert _served(s_new, "gputui_host_memory_total_bytes", hostname="node-n")
    assert not any(k == "Hostname" for _n, ls in s_new for k, _v in ls)
    assert _served(s_old, "DCGM_FI_DEV_GPU_UTIL", gpu="0", Hostname="node-o")
    assert _served(s_old, "gputui_throttle_episodes_total", gpu="1", Hostname="node-o")
    assert _served(s_old, "gputui_host_memory_total_bytes", Hostname="node-o")
    assert not any(k == "hostname" for _n, ls in s_old for k, _v in ls)
    # The fleet names a host by either.
    assert parse_metrics(page_new).hostname == "node-n"
    assert parse_metrics(page_old).hostname == "node-o"
    new.stop(signal.SIGTERM)
    old.stop(signal.SIGTERM)


def test_export_sends_alert_events(start_exporter: ExporterFactory, tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    exp = start_exporter({"device_count": 2, "gpu.1.throttle_from_s": 1.0,
                          "gpu.1.throttle_until_s": 2.0, "gpu.1.during.throttle_reasons": 0x40},
                         hostname="node-e", interval=0.2,
                         extra=("--notify-command", f"cat >> {out}"))

    def ended() -> list[dict[str, object]] | None:
        events = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
        return events if len(events) >= 2 else None

    events = wait_for(ended, 20, "the throttle episode's two events")
    assert [(e["event"], e["kind"], e["gpu"]) for e in events] == [
        ("started", "throttle", 1), ("ended", "throttle", 1)]
    assert exp.stop(signal.SIGTERM) == 0
