"""A run request: one benchmark with its settings, typed, checked against the catalog.

The CLI (`gputui bench run`) and the TUI's form build one with `make_request`; the run
queue and the runner carry it; the runner serialises it once (`to_json`, the worker's
`--spec-json`) and the worker decodes it once (`from_json`) into the same class, fills
the device-dependent defaults (`resolved`) and hands it to the benchmark kind.

The fields are the run spec's keys (`run_spec.SPEC_DEFAULTS`, in that order) plus
`params`, the benchmark-specific numbers (matmul size, vocab, …). `to_dict` gives the JSON
object the worker, the `started` event and a result's `settings` have always carried.
Torch-free: the parent imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gputui.bench.run_spec import SPEC_DEFAULTS, resolve_spec, validate_spec
from gputui.errors import UsageError

Shape = tuple[int, int, int]


@dataclass(frozen=True)
class RunRequest:
    benchmark: str
    model: str | None = None
    device: str = "auto"
    precision: str = "fp32"  # or "auto" (lm-*, attention): the device's, by `resolved`
    batch_size: int | None = None
    steps: int | None = None
    duration_s: float | None = None
    warmup: int | None = None
    image_size: int | None = None
    seq_len: int | None = None
    channels_last: bool = False
    compile: bool = False
    mode: str | None = None
    sweep: bool = False
    batch_sizes: tuple[int, ...] | None = None  # the sweep's grid; None: the doubling one
    nproc: int = 1
    profile: bool = False
    profile_dir: str | None = None
    threads: int | None = None
    seed: int = 0
    test_hook: str | None = None
    data: str = "device"  # where synthetic batches live: "device" or "host"
    shapes: tuple[Shape, ...] | None = None  # matmul: M×N×K triples instead of params.size
    repeat: int = 1  # timed trials after one warm-up
    # Across machines (bench.launch): N nodes × nproc ranks meeting at HOST:PORT.
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    # --baseline ID, resolved by the CLI: the same run on one process, for scaling.
    baseline_id: str | None = None
    baseline_value: float | None = None
    baseline_world: int | None = None
    # deepbench: which of DeepBench's lists; None: the catalog's default (`resolved`).
    op: str | None = None
    problem_set: str | None = None
    shape_set: str | None = None
    nvtx: bool = False  # NVTX ranges for Nsight Systems (CUDA only)
    # Benchmark-specific numbers; None: none given (the worker's `resolved` fills them).
    # A plain dict, not a read-only view: DDP ranks receive the request pickled.
    params: Mapping[str, float] | None = None

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> RunRequest:
        """A request from its JSON object, checked against the catalog (UsageError, one line)."""
        if isinstance(spec, Mapping):
            unknown = set(spec) - _FIELDS
            if unknown:
                raise UsageError(f"unknown benchmark setting(s): {', '.join(sorted(unknown))}")
        return cls._of(validate_spec(spec))

    @classmethod
    def from_json(cls, text: str) -> RunRequest:
        """The worker's one decoding of `--spec-json`. ValueError: not JSON at all."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def _of(cls, checked: Mapping[str, Any]) -> RunRequest:
        shapes = checked.get("shapes")
        params = checked.get("params")
        sizes = checked.get("batch_sizes")
        return cls(**{**{k: v for k, v in checked.items() if k in _FIELDS},
                      "shapes": tuple(tuple(s) for s in shapes) if shapes is not None else None,
                      "batch_sizes": tuple(sizes) if sizes is not None else None,
                      "params": dict(params) if params is not None else None})

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: every spec key, then `params` once there are any."""
        out: dict[str, Any] = {k: getattr(self, k) for k in SPEC_DEFAULTS}
        if self.shapes is not None:
            out["shapes"] = [list(s) for s in self.shapes]
        if self.batch_sizes is not None:
            out["batch_sizes"] = list(self.batch_sizes)
        if self.params is not None:
            out["params"] = dict(self.params)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def resolved(self, device_type: str) -> RunRequest:
        """Device-dependent defaults filled in (batch, steps, params…): what will run."""
        return self._of(resolve_spec(self.to_dict(), device_type))


_FIELDS = frozenset(f.name for f in fields(RunRequest))


def make_request(benchmark: str, **settings: Any) -> RunRequest:
    """A validated request; a setting left out or None means "the default".

    Raises UsageError (one line) for anything the catalog rejects, before a worker starts,
    and TypeError for a keyword that is no setting at all (a caller's bug).
    """
    unknown = set(settings) - set(SPEC_DEFAULTS) - {"params"}
    if unknown:
        raise TypeError(f"unknown spec keys: {', '.join(sorted(unknown))}")
    given = {k: v for k, v in settings.items() if v is not None}
    return RunRequest.from_dict({**given, "benchmark": benchmark})
