"""The reference figures shipped with gputui: one device per class and suite version,
each with where its figures came from. Scores of a class without one need --baseline.

Only what was measured is here. The cpu and cuda classes have no shipped reference: no GPU
was at hand when suite version 1 was made, no cpu-class run was measured, and no published
figure is for exactly the same workload; such runs are scored against a saved run
(`--baseline ID|FILE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gputui.bench.suite_score import SuiteReference

# The median of three `gputui bench suite run --quick` runs on gputui's development VM, which
# other jobs shared at the time (load average 6-9 on its 2 cores): the runs' figures spread
# up to 50-fold on the shortest tests (LLM decode, attention), which is why cpu-quick is a
# functional class, not a way to rank CPUs (use the cpu class for that).
_DEV_VM = SuiteReference(
    device="Intel(R) Xeon(R) Processor, 2 vCPUs (KVM; AVX-512, AMX), 24 GiB",
    device_class="cpu-quick", suite_version=1,
    source="gputui's development VM: median of 3 --quick runs, 2026-11-29",
    note="gputui bench suite run --quick three times, 2026-11-29 02:59-03:07 UTC (suite "
         "runs 20261129-025941-446-768509, 20261129-030309-443-67e7ea, "
         "20261129-030531-441-367b4f), torch 2.14.1 on 2 threads; /proc/cpuinfo names the "
         "CPU 'Intel(R) Xeon(R) Processor' (family 6 model 167, AVX-512 and AMX); the VM "
         "was shared with other jobs (load average 6-9)",
    figures=MappingProxyType({
        "cnn-infer": 6.51,  # images/s; runs: 6.51, 11.49, 3.241
        "cnn-train": 5.898,  # images/s; runs: 5.898, 1.312, 11.66
        "vit-infer": 53.51,  # images/s; runs: 11.46, 53.51, 58.93
        "vit-train": 1.302,  # images/s; runs: 1.302, 0.673, 3.81
        "seg-infer": 2.982,  # images/s; runs: 1.477, 5.811, 2.982
        "seg-train": 1.838,  # images/s; runs: 0.3703, 2.757, 1.838
        "lstm-infer": 8988.0,  # tokens/s; runs: 567.7, 3.332e+04, 8988
        "lstm-train": 2379.0,  # tokens/s; runs: 3111, 1482, 2379
        "gpt-train": 859.6,  # tokens/s; runs: 99.2, 1748, 859.6
        "llm-prefill": 92.87,  # tokens/s; runs: 56.41, 92.87, 1428
        "llm-decode": 7.838,  # tokens/s; runs: 6.88, 7.838, 355.5
        "attention-fwd": 0.02475,  # TFLOP/s; runs: 0.0007293, 0.02475, 0.04401
        "attention-train": 0.03026,  # TFLOP/s; runs: 0.0008691, 0.04127, 0.03026
        "matmul": 0.01987,  # TFLOP/s; runs: 0.01987, 0.06015, 0.01978
        "membw": 6.63,  # GB/s; runs: 7.506, 6.63, 6.084
    }),
)

SHIPPED: tuple[SuiteReference, ...] = (_DEV_VM,)


def default_for(device_class: str, version: int) -> SuiteReference | None:
    """The class's shipped reference (its first), or None."""
    return next((r for r in SHIPPED
                 if r.device_class == device_class and r.suite_version == version), None)


def by_label(label: Mapping[str, Any]) -> SuiteReference | None:
    """The shipped reference a score's `reference` names (its source, else its device,
    class and version)."""
    return next((r for r in SHIPPED if r.source == label.get("source")), None) or next(
        (r for r in SHIPPED if r.device == label.get("device")
         and r.device_class == label.get("device_class")
         and r.suite_version == label.get("suite_version")), None)
