"""The sampler's fast GpuSample constructor (gputui.telemetry.frozen) gives the very
object the dataclass's own constructor gives: the same type, fields, equality, hash,
repr and pickling, frozen; and it refuses dataclasses whose construction it would not
reproduce."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from gputui.telemetry.frozen import fast_constructor
from gputui.telemetry.model import DeviceInfo, GpuSample, NvLink, new_gpu_sample

INFO = DeviceInfo(index=3, name="NVIDIA H100 80GB HBM3", uuid="GPU-1", pci_bus_id="0:1")


def test_built_samples_are_the_same_as_the_dataclass_builds() -> None:
    kw = {"info": INFO, "util_gpu_pct": 97, "power_w": 612.5, "throttle_mask": 0x20,
          "nvlink_links": (NvLink(0, True, 1.0, 2.0),), "mig_devices": ()}
    fast, slow = new_gpu_sample(**kw), GpuSample(**kw)
    assert type(fast) is GpuSample
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    # Every field, defaults included.
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)
    assert fast.fan_pct is None and fast.lost is False and fast.index == 3
    assert pickle.loads(pickle.dumps(fast)) == slow
    assert dataclasses.replace(fast, util_gpu_pct=5) == dataclasses.replace(slow, util_gpu_pct=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.util_gpu_pct = 1  # type: ignore[misc]


def test_wrong_arguments_fail_as_with_the_dataclass() -> None:
    with pytest.raises(TypeError):
        new_gpu_sample(util_gpu_pct=1)  # no info
    with pytest.raises(TypeError):
        new_gpu_sample(info=INFO, no_such_field=1)
    with pytest.raises(TypeError):
        new_gpu_sample(INFO)  # fields by keyword only


def test_classes_it_cannot_build_faithfully_are_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int = 0

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int = 0

    for cls in (NoSlots, PostInit, Factory, Mutable):
        with pytest.raises(TypeError):
            fast_constructor(cls)
