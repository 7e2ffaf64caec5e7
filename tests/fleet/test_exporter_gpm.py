"""DCGM profiling fields: `gputui export` serves GPM metrics under
DCGM_FI_PROF_* names in DCGM's units (ratios 0..1, bytes/s), and the fleet reads them back
from gputui and dcgm-exporter pages alike and shows SM active per GPU."""

from __future__ import annotations

import signal
from datetime import UTC, datetime

from gputui.fleet.model import FleetHost, FleetSnapshot, HostState
from gputui.fleet.scrape import parse_metrics
from gputui.fleet.view import host_rows
from tests.fleet.conftest import ExporterFactory, http_get, parse_page, value, wait_for

MIB = 1024 * 1024
H100 = {"gpu": "0", "UUID": "GPU-aaaaaaaa-0000-0000-0000-000000000001",
        "modelName": "NVIDIA H100 80GB HBM3", "hostname": "node-h"}
A100 = {"gpu": "1", "UUID": "GPU-bbbbbbbb-0000-0000-0000-000000000002"}
PROF = {  # gpm.conf's GPU 0 in DCGM's units
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.975,
    "DCGM_FI_PROF_SM_ACTIVE": 0.225,
    "DCGM_FI_PROF_SM_OCCUPANCY": 0.1225,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.005,
    "DCGM_FI_PROF_DRAM_ACTIVE": 0.315,
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": 0.0,
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": 0.185,
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": 0.025,
    "DCGM_FI_PROF_PCIE_TX_BYTES": 150 * MIB,
    "DCGM_FI_PROF_PCIE_RX_BYTES": 1200 * MIB,
    "DCGM_FI_PROF_NVLINK_TX_BYTES": 4096 * MIB,
    "DCGM_FI_PROF_NVLINK_RX_BYTES": 2048 * MIB,
}


def _page_with_prof(url: str) -> str:
    def page() -> str | None:
        text = http_get(url)
        return text if "DCGM_FI_PROF_SM_ACTIVE{" in text else None

    return wait_for(page, 10, "DCGM_FI_PROF_SM_ACTIVE on the page")


def test_exporter_serves_dcgm_profiling_fields_in_dcgm_units(
        start_exporter: ExporterFactory) -> None:
    exp = start_exporter("gpm", hostname="node-h", interval=0.2)
    # GPM needs two samples: the PROF series appear from the second tick.
    page = _page_with_prof(exp.url)
    s = parse_page(page)
    for name, want in PROF.items():
        assert value(s, name, **H100) == want, name
        assert f"# TYPE {name} gauge\n" in page
        # The A100 has no GPM: its PROF series are absent, never 0.
        assert not any(n == name and ("gpu", "1") in ls for n, ls in s)
    assert value(s, "DCGM_FI_DEV_GPU_UTIL", **H100) == 98
    assert exp.stop(signal.SIGTERM) == 0


def test_fleet_shows_sm_active_from_a_gputui_exporter(start_exporter: ExporterFactory) -> None:
    exp = start_exporter("gpm", hostname="node-h", interval=0.2)
    page = _page_with_prof(exp.url)
    reading = parse_metrics(page)
    h100, a100 = reading.gpus
    assert (h100.util_pct, h100.sm_active_pct, h100.tensor_active_pct) == (98, 22.5, 0.5)
    assert a100.sm_active_pct is None
    snap = FleetSnapshot(time=datetime.now(UTC), source="targets", hosts=(
        FleetHost(target="node-h:9400", url=None, state=HostState.UP, reading=reading),))
    rows = host_rows(snap)
    assert rows[0].cells[3:5] == ("98%", "22%")  # util, SM active
    assert rows[1].cells[3:5] == ("40%", "N/A")
    g = snap.to_dict()["hosts"][0]["gpus"][0]
    assert (g["sm_active_pct"], g["tensor_active_pct"]) == (22.5, 0.5)
    exp.stop(signal.SIGTERM)


# A dcgm-exporter page as it serves profiling fields (labels in its order, extra labels).
DCGM_EXPORTER_PAGE = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",device="nvidia0",\
modelName="NVIDIA H100 80GB HBM3",hostname="dgx1",DCGM_FI_DRIVER_VERSION="550.54.15"} 100
# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",device="nvidia0",\
modelName="NVIDIA H100 80GB HBM3",hostname="dgx1",DCGM_FI_DRIVER_VERSION="550.54.15"} 0.871
# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.
# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",\
device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="dgx1",\
DCGM_FI_DRIVER_VERSION="550.54.15"} 0.43
"""


def test_fleet_reads_sm_active_from_a_dcgm_exporter_page() -> None:
    reading = parse_metrics(DCGM_EXPORTER_PAGE)
    (g,) = reading.gpus
    assert reading.exporter == "dcgm-exporter"
    assert (g.util_pct, g.sm_active_pct, g.tensor_active_pct) == (100, 87.1, 43.0)



def test_exporter_serves_the_rest_of_dcgm_exporters_default_counters(
        start_exporter: ExporterFactory) -> None:
    exp = start_exporter("gpm", hostname="node-h", interval=0.2)
    page = _page_with_prof(exp.url)
    s = parse_page(page)
    want = {
        "DCGM_FI_DEV_MEMORY_TEMP": 71,
        "DCGM_FI_DEV_ENC_UTIL": 12,
        "DCGM_FI_DEV_DEC_UTIL": 34,
        "DCGM_FI_DEV_FB_RESERVED": 512,  # MiB
        "DCGM_FI_DEV_FB_USED": 10240,
        "DCGM_FI_DEV_FB_FREE": 81920 - 10240 - 512,  # neither used nor reserved
        # counters: prometheus_client's parser names their samples NAME_total
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total": 7,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS_total": 2,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS_total": 1,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
        "gputui_row_remap_pending": 1,
        "DCGM_FI_DEV_RETIRED_SBE_total": 3,
        "DCGM_FI_DEV_RETIRED_DBE_total": 1,
        "DCGM_FI_DEV_RETIRED_PENDING_total": 1,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL_total": 123456 + 654321,  # KiB, TX + RX
    }
    for name, v in want.items():
        assert value(s, name, **H100) == v, name
    for name in ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                 "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"):
        assert f"# TYPE {name} counter\n" in page
    # The A100 reports none of them: absent, never 0.
    for name in ("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_ENC_UTIL",
                 "DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                 "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL_total"):
        assert not any(n == name and ("gpu", "1") in ls for n, ls in s), name
    # The driver version as dcgm-exporter labels every GPU series.
    assert value(s, "DCGM_FI_DEV_GPU_UTIL", DCGM_FI_DRIVER_VERSION="550.54.15", **H100) == 98
    assert value(s, "gputui_gpu_stale", DCGM_FI_DRIVER_VERSION="550.54.15", **A100) == 0
    exp.stop(signal.SIGTERM)


def test_exporter_counts_xid_events(start_exporter: ExporterFactory) -> None:
    exp = start_exporter({"device_count": 2, "gpu.1.xid": 79, "gpu.1.xid_at_s": 1.0},
                         hostname="node-x", interval=0.2)

    def page() -> str | None:
        text = http_get(exp.url)
        return text if 'xid="79"' in text else None

    s = parse_page(wait_for(page, 15, "the XID on the page"))
    assert value(s, "DCGM_FI_DEV_XID_ERRORS", gpu="1") == 79
    assert value(s, "DCGM_FI_DEV_XID_ERRORS", gpu="0") == 0  # none yet
    assert value(s, "gputui_xid_events_total", gpu="1", xid="79") == 1
    assert not any(n == "gputui_xid_events_total" and ("gpu", "0") in ls for n, ls in s)
    exp.stop(signal.SIGTERM)
