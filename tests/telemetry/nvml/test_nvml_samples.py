"""Sub-second spikes: nvmlDeviceGetSamples gives the driver's own ~100 ms
samples, so a power spike between two 1 s ticks shows as that tick's power_w_max."""

from __future__ import annotations

import json

from gputui.telemetry.nvml import ALL_FIELDS, NvmlSource
from tests.cli import CliEnv
from tests.fakenvml.harness import FakeNvml, FakeNvmlLib, scenario_path

SPIKE = {"device_count": 1, "gpu.0.power_mw": 250000, "gpu.0.power_spike_mw": 690000,
         "gpu.0.power_spike_from_s": 1.3, "gpu.0.power_spike_until_s": 1.4,
         "gpu.0.util_gpu": 80, "gpu.0.clock_sm_mhz": 1410}


def test_a_spike_between_ticks_is_that_ticks_max(fake_nvml: FakeNvml) -> None:
    fake_nvml.use(SPIKE, frozen_time=1.0)
    src = NvmlSource(fields=ALL_FIELDS)
    src.open()
    seen = []
    for t in (1.0, 2.0, 3.0):
        fake_nvml.set_time(t)
        (g,), _ = src.read()
        seen.append((g.power_w, g.power_w_min, g.power_w_max))
    # The 1 s readings never see the 100 ms spike; the samples do, in the tick after it.
    assert seen == [(250.0, 250.0, 250.0), (250.0, 250.0, 690.0), (250.0, 250.0, 250.0)]
    assert (g.util_gpu_pct_min, g.util_gpu_pct_max) == (80, 80)
    assert (g.clock_sm_mhz_min, g.clock_sm_mhz_max) == (1410, 1410)
    src.close()


def test_no_new_samples_is_null_not_a_repeat(fake_nvml: FakeNvml) -> None:
    fake_nvml.use(SPIKE, frozen_time=2.0)
    src = NvmlSource(fields=ALL_FIELDS)
    src.open()
    (g,), _ = src.read()
    assert g.power_w_max == 690.0
    (g,), _ = src.read()  # the clock did not move: the driver has nothing newer
    assert g.power_w_min is None and g.power_w_max is None
    assert g.power_w == 250.0
    src.close()


def test_unsupported_samples_are_null_and_not_asked_again(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1, "gpu.0.unsupported": ["samples"]}, frozen_time=1.0)
    src = NvmlSource(fields=ALL_FIELDS)
    src.open()
    for t in (1.0, 2.0, 3.0):
        fake_nvml.set_time(t)
        (g,), _ = src.read()
        assert g.power_w_max is None and g.util_gpu_pct_max is None
    assert fake_nvml.count_for("nvmlDeviceGetSamples") == 3  # one per kind, then never
    src.close()


def test_snapshot_json_has_power_min_and_max(fake_nvml_lib: FakeNvmlLib, cli_env: CliEnv) -> None:
    proc = cli_env(["snapshot", "--json"], fake_nvml_lib.env(scenario_path("gpm")))
    assert proc.returncode == 0, proc.stderr
    g0 = json.loads(proc.stdout)["gpus"][0]
    assert (g0["power_w_min"], g0["power_w_max"]) == (250.0, 250.0)
    assert g0["util_gpu_pct_max"] == 98
