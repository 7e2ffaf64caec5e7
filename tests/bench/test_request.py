"""The run request: typed, checked by the catalog, and the same JSON object the worker,
the `started` event and a result's `settings` have always carried."""

from __future__ import annotations

import json
import pickle
from dataclasses import FrozenInstanceError, fields
from typing import Any

import pytest

from gputui.bench import run_spec
from gputui.bench.request import RunRequest, make_request
from gputui.errors import UsageError

SPECS: list[dict[str, Any]] = [
    {"benchmark": "cnn-train"},
    {"benchmark": "cnn-infer", "device": "cpu", "mode": "latency", "batch_size": 1},
    {"benchmark": "rnn-train", "model": "gru", "seq_len": 16, "params": {"hidden": 64}},
    {"benchmark": "matmul", "device": "cpu", "shapes": [[64, 32, 16], [8, 8, 8]]},
    {"benchmark": "cnn-train", "nproc": 2, "nnodes": 2, "node_rank": 1,
     "rdzv_endpoint": "10.0.0.5:29400", "baseline_id": "x", "baseline_value": 10.0,
     "baseline_world": 1},
    {"benchmark": "lm-infer", "device": "cpu", "batch_sizes": [8, 1, 2, 8]},
]


def test_fields_are_the_catalogs_spec_keys_with_their_defaults() -> None:
    names = [f.name for f in fields(RunRequest)]
    assert names == [*run_spec.SPEC_DEFAULTS, "params"]
    bare = RunRequest("cnn-train")
    assert {k: getattr(bare, k) for k in run_spec.SPEC_DEFAULTS if k != "benchmark"} == {
        k: v for k, v in run_spec.SPEC_DEFAULTS.items() if k != "benchmark"}


@pytest.mark.parametrize("spec", SPECS)
def test_to_dict_is_the_catalogs_spec_object_key_for_key(spec: dict[str, Any]) -> None:
    request = RunRequest.from_dict(spec)
    assert list(request.to_dict().items()) == list(run_spec.validate_spec(spec).items())
    resolved = request.resolved("cpu")
    assert list(resolved.to_dict().items()) == list(
        run_spec.resolve_spec(run_spec.validate_spec(spec), "cpu").items())


@pytest.mark.parametrize("spec", SPECS)
def test_serialised_once_decoded_once_into_the_same_request(spec: dict[str, Any]) -> None:
    request = RunRequest.from_dict(spec)
    assert RunRequest.from_json(request.to_json()) == request
    resolved = request.resolved("cuda")
    assert RunRequest.from_json(resolved.to_json()) == resolved
    # DDP ranks receive the request pickled.
    assert pickle.loads(pickle.dumps(resolved)) == resolved


def test_matmul_shapes_are_triples_and_params_are_filled_when_resolved() -> None:
    request = make_request("matmul", device="cpu", shapes=[[64, 32, 16]])
    assert request.shapes == ((64, 32, 16),) and request.params is None
    assert json.loads(request.to_json())["shapes"] == [[64, 32, 16]]
    resolved = request.resolved("cpu")
    assert resolved.params == {"size": 512} and resolved.steps == 5


def test_a_request_cannot_be_changed_in_place() -> None:
    request = make_request("cnn-train")
    with pytest.raises(FrozenInstanceError):
        request.batch_size = 4  # type: ignore[misc]


def test_bad_requests_are_one_line_usage_errors() -> None:
    with pytest.raises(UsageError, match=r"unknown benchmark setting.*bogus"):
        RunRequest.from_dict({"benchmark": "cnn-train", "bogus": 1})
    with pytest.raises(UsageError, match="JSON object"):
        RunRequest.from_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RunRequest.from_json("{not json")
    with pytest.raises(UsageError, match="fp16"):
        make_request("cnn-train", device="cpu", precision="fp16")
    with pytest.raises(TypeError):
        make_request("cnn-train", bogus=1)


def test_an_explicit_sweep_grid_is_kept_ascending_once_each_and_asks_for_a_sweep() -> None:
    request = make_request("lm-infer", device="cpu", batch_sizes=[32, 1, 8, 8])
    assert request.batch_sizes == (1, 8, 32) and request.sweep is True
    assert request.batch_size is None
    assert request.resolved("cuda").batch_size == 32  # the grid's largest point
    assert make_request("cnn-infer", batch_sizes=[1, 4]).sweep is True


@pytest.mark.parametrize(("settings", "message"), [
    ({"benchmark": "lm-infer", "batch_sizes": []}, "whole numbers ≥ 1"),
    ({"benchmark": "lm-infer", "batch_sizes": [0, 2]}, "whole numbers ≥ 1"),
    ({"benchmark": "lm-infer", "batch_sizes": [2, True]}, "whole numbers ≥ 1"),
    ({"benchmark": "lm-infer", "batch_sizes": "1,2"}, "whole numbers ≥ 1"),
    ({"benchmark": "matmul", "batch_sizes": [1, 2]}, "not matmul"),
    ({"benchmark": "lm-train", "batch_sizes": [2, 4]}, "not lm-train"),
    ({"benchmark": "lm-infer", "batch_sizes": [1, 2], "batch_size": 4},
     "--batch-size or --batch-sizes"),
    ({"benchmark": "cnn-train", "batch_sizes": [1, 2]}, "start at batch 2"),
])
def test_bad_sweep_grids_are_one_line_usage_errors(settings: dict[str, Any],
                                                    message: str) -> None:
    with pytest.raises(UsageError, match=message) as err:
        RunRequest.from_dict(settings)
    assert "\n" not in str(err.value)
