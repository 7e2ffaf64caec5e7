"""GPM fields where users read them: `snapshot --json`, `watch` CSV columns and
recordings, from the real CLI against the fake libnvidia-ml.so.1 (scenario gpm.conf)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gputui.telemetry import gpm
from gputui.telemetry.record import Recorder, load_recording
from gputui.telemetry.schema import snapshot_from_dict
from tests.cli import CliResult
from tests.fakenvml.harness import FakeNvmlLib, scenario_path
from tests.telemetry.nvml.test_gpm import H100_EXPECTED

Run = Callable[..., CliResult]
GPM_COLUMNS = ["sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct",
               "fp64_active_pct", "fp32_active_pct", "fp16_active_pct", "gpm_pcie_tx_bps",
               "gpm_pcie_rx_bps", "nvlink_tx_bps", "nvlink_rx_bps"]


@pytest.fixture
def run(cli_env: Run) -> Run:
    """``run(args, env)``: the CLI in-process, as a subprocess with that environment."""
    return cli_env


def test_snapshot_json_has_every_gpm_field_exactly(fake_nvml_lib: FakeNvmlLib,
                                                   run: Run) -> None:
    proc = run(["snapshot", "--json"], fake_nvml_lib.env(scenario_path("gpm")))
    assert proc.returncode == 0, proc.stderr
    g0, g1 = json.loads(proc.stdout)["gpus"]
    assert {k: g0[k] for k in H100_EXPECTED} == H100_EXPECTED
    assert g0["gpm_note"] is None
    # The A100 has no GPM: null, not 0.
    assert all(g1[f] is None for f in gpm.FIELDS)
    assert g1["util_gpu_pct"] == 40


def test_watch_csv_appends_the_gpm_columns(fake_nvml_lib: FakeNvmlLib, run: Run) -> None:
    proc = run(["watch", "--count", "2", "--interval", "0.2", "--format", "csv"],
               fake_nvml_lib.env(scenario_path("gpm")))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    header = rows[0]
    # Appended after every column that was there before (and before any added later):
    # old parsers keep working.
    assert header[:3] == ["time", "gpu", "name"]
    at = header.index("stale_s") + 1
    assert header[at:at + len(GPM_COLUMNS)] == GPM_COLUMNS
    last_h100 = [dict(zip(header, r, strict=True)) for r in rows[1:] if r[1] == "0"][-1]
    assert {c: float(last_h100[c]) for c in GPM_COLUMNS} == {
        c: float(H100_EXPECTED[c]) for c in GPM_COLUMNS}
    last_a100 = [dict(zip(header, r, strict=True)) for r in rows[1:] if r[1] == "1"][-1]
    assert all(last_a100[c] == "" for c in GPM_COLUMNS)


def test_recordings_carry_gpm_fields(fake_nvml_lib: FakeNvmlLib, tmp_path: Path,
                                     run: Run) -> None:
    proc = run(["snapshot", "--json"], fake_nvml_lib.env(scenario_path("gpm")))
    snap = snapshot_from_dict(json.loads(proc.stdout))
    path = tmp_path / "run.jsonl"
    rec = Recorder(path)
    rec.write(snap)
    rec.close()
    line = json.loads(path.read_text().splitlines()[-1])
    assert {k: line["gpus"][0][k] for k in H100_EXPECTED} == H100_EXPECTED
    replayed = load_recording(path).snapshots[-1].gpus
    assert {f: getattr(replayed[0], f) for f in H100_EXPECTED} == H100_EXPECTED
    assert all(getattr(replayed[1], f) is None for f in gpm.FIELDS)
