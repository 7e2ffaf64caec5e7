"""The fake's nvitop-support block: the reads nvitop 1.7 makes that gputui does not,
answered as a Linux driver answers them (benchmarks/tui_perf.py --compare nvitop)."""

from __future__ import annotations

import pynvml
import pytest

from tests.fakenvml.harness import scenario_path


def test_display_inactive_and_windows_driver_model_not_supported(fake_nvml) -> None:  # type: ignore[no-untyped-def]
    fake_nvml.use(scenario_path("eight_gpus"))
    pynvml.nvmlInit()
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(8)]
        assert [pynvml.nvmlDeviceGetDisplayActive(h) for h in handles] == [0] * 8
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetDriverModel_v2(handles[0])
        # No confidential-computing API: nvitop would then assume the 32-byte v3
        # process struct (see the block's comment) and misread the process list.
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            pynvml.nvmlDeviceGetConfComputeMemSizeInfo(handles[0])
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handles[3])
        assert [p.pid for p in procs] == [10003]
    finally:
        pynvml.nvmlShutdown()
