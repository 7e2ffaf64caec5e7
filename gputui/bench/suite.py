"""The benchmark suite: a fixed, versioned set of tests over the model families users run.

In the spirit of AI-Benchmark: the same models at the same settings on every device of a
class, each test scored against a reference figure, and three geometric means (inference,
training, the device). The suite reuses the catalog's benchmark kinds; one benchmark run can
feed more than one test (lm-infer gives both prefill and decode rates, attention both the
forward and the forward+backward figure).

Settings are fixed per device class and written out in full here, not taken from the
catalog's defaults: a change of a catalog default must not change a suite's numbers. Any
change to the tests, their settings or their metrics is a new SUITE_VERSION, and runs of
different versions are never compared (bench.suite_score). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from gputui.errors import UsageError

SUITE_VERSION = 1

DeviceClass = Literal["cpu-quick", "cpu", "cuda"]
CLASSES: tuple[DeviceClass, ...] = ("cpu-quick", "cpu", "cuda")
# Inference and training tests feed those scores; the compute probes (matmul, memory
# bandwidth) only the device score, which is the geometric mean of every test.
Group = Literal["inference", "training", "compute"]
GROUPS: tuple[Group, ...] = ("inference", "training", "compute")
# Which figure of the run's result a test reads (bench.suite_record.figure_of).
Metric = Literal["headline", "prefill", "decode", "forward"]


@dataclass(frozen=True)
class SuiteRun:
    """One benchmark run of the suite: a catalog benchmark with its settings per class
    (keywords of request.make_request, the model among them; the device comes from the
    class)."""

    key: str
    benchmark: str
    settings: Mapping[DeviceClass, Mapping[str, Any]]


@dataclass(frozen=True)
class SuiteTest:
    """One scored test: a figure of one run."""

    id: str
    title: str
    family: str
    group: Group
    run: str  # SuiteRun.key
    metric: Metric = "headline"
    unit: str | None = None  # None: the result's own unit (metrics other than headline name it)


def _classes(model: str | None, quick: Mapping[str, Any], cpu: Mapping[str, Any],
             cuda: Mapping[str, Any]) -> Mapping[DeviceClass, Mapping[str, Any]]:
    """Settings per class; `model` unless a class names its own."""
    return MappingProxyType({name: MappingProxyType({"model": model, **given})
                             for name, given in (("cpu-quick", quick), ("cpu", cpu),
                                                 ("cuda", cuda))})


# CPU-quick: seconds per run on a 2-core VM (what the tests run), with the families' small
# models (ResNet-18, ViT-Tiny); CPU: ResNet-50 and ViT-B/16, a few seconds of
# timed work per run at realistic sizes; CUDA: the catalog's published-shape sizes in fp16
# autocast (AMP), which every CUDA GPU from Volta on runs on tensor cores (bf16 would
# leave out Volta and Turing). fp32 on the CPU.
_Q = {"precision": "fp32", "warmup": 1}
_C = {"precision": "fp32", "warmup": 2}
_G = {"precision": "fp16", "warmup": 10}

RUNS: tuple[SuiteRun, ...] = (
    SuiteRun("cnn-infer", "cnn-infer", _classes(
        "resnet50",
        {**_Q, "model": "resnet18", "mode": "throughput", "batch_size": 4, "image_size": 32,
         "steps": 2},
        {**_C, "mode": "throughput", "batch_size": 16, "image_size": 224, "duration_s": 10.0},
        {**_G, "mode": "throughput", "batch_size": 128, "image_size": 224,
         "duration_s": 10.0, "channels_last": True})),
    SuiteRun("cnn-train", "cnn-train", _classes(
        "resnet50",
        {**_Q, "model": "resnet18", "batch_size": 4, "image_size": 32, "steps": 2},
        {**_C, "batch_size": 16, "image_size": 224, "duration_s": 10.0},
        {**_G, "batch_size": 128, "image_size": 224, "duration_s": 15.0,
         "channels_last": True})),
    SuiteRun("vit-infer", "cnn-infer", _classes(
        "vit_b_16",
        {**_Q, "model": "vit_ti_16", "mode": "throughput", "batch_size": 2, "image_size": 32,
         "steps": 2},
        {**_C, "mode": "throughput", "batch_size": 8, "image_size": 224, "duration_s": 10.0},
        {**_G, "mode": "throughput", "batch_size": 128, "image_size": 224,
         "duration_s": 10.0})),
    SuiteRun("vit-train", "cnn-train", _classes(
        "vit_b_16",
        {**_Q, "model": "vit_ti_16", "batch_size": 2, "image_size": 32, "steps": 2},
        {**_C, "batch_size": 8, "image_size": 224, "duration_s": 10.0},
        {**_G, "batch_size": 64, "image_size": 224, "duration_s": 15.0})),
    SuiteRun("seg-infer", "cnn-infer", _classes(
        "lraspp_mobilenet_v3_large",
        {**_Q, "mode": "throughput", "batch_size": 2, "image_size": 32, "steps": 2},
        {**_C, "mode": "throughput", "batch_size": 8, "image_size": 256, "duration_s": 10.0},
        {**_G, "mode": "throughput", "batch_size": 64, "image_size": 512,
         "duration_s": 10.0})),
    SuiteRun("seg-train", "cnn-train", _classes(
        "lraspp_mobilenet_v3_large",
        {**_Q, "batch_size": 2, "image_size": 32, "steps": 2},
        {**_C, "batch_size": 8, "image_size": 256, "duration_s": 10.0},
        {**_G, "batch_size": 32, "image_size": 512, "duration_s": 15.0})),
    SuiteRun("lstm-infer", "rnn-infer", _classes(
        "lstm",
        {**_Q, "mode": "throughput", "batch_size": 16, "seq_len": 32, "steps": 2,
         "params": {"vocab": 1000, "hidden": 128, "layers": 2}},
        {**_C, "mode": "throughput", "batch_size": 32, "seq_len": 64, "duration_s": 10.0,
         "params": {"vocab": 10000, "hidden": 512, "layers": 2}},
        {**_G, "mode": "throughput", "batch_size": 256, "seq_len": 128, "duration_s": 10.0,
         "params": {"vocab": 10000, "hidden": 1024, "layers": 2}})),
    SuiteRun("lstm-train", "rnn-train", _classes(
        "lstm",
        {**_Q, "batch_size": 16, "seq_len": 32, "steps": 2,
         "params": {"vocab": 1000, "hidden": 128, "layers": 2}},
        {**_C, "batch_size": 32, "seq_len": 64, "duration_s": 10.0,
         "params": {"vocab": 10000, "hidden": 512, "layers": 2}},
        {**_G, "batch_size": 64, "seq_len": 128, "duration_s": 15.0,
         "params": {"vocab": 10000, "hidden": 1024, "layers": 2}})),
    SuiteRun("gpt-train", "lm-train", _classes(
        "gpt-tiny",
        {**_Q, "batch_size": 2, "steps": 2},
        {**_C, "batch_size": 8, "duration_s": 10.0},
        # nanoGPT's GPT-2 micro-batch: 12 sequences of 1,024 tokens.
        {**_G, "model": "gpt2", "batch_size": 12, "duration_s": 20.0})),
    SuiteRun("llm-infer", "lm-infer", _classes(
        "gpt-tiny",
        {**_Q, "batch_size": 1, "steps": 2, "params": {"prompt_len": 16, "new_tokens": 8}},
        # gpt-tiny's context is 64 tokens: prompt + new tokens fit in it.
        {**_C, "batch_size": 1, "duration_s": 10.0,
         "params": {"prompt_len": 32, "new_tokens": 32}},
        # GPT-2 medium (355 M parameters) fits every CUDA GPU a suite ranks; a 7 B model
        # would leave out those under 16 GB.
        {**_G, "model": "gpt2-medium", "batch_size": 1, "duration_s": 20.0, "warmup": 2,
         "params": {"prompt_len": 512, "new_tokens": 128}})),
    SuiteRun("attention", "attention", _classes(
        None,
        {**_Q, "steps": 2, "params": {"tokens": 256, "hidden": 64, "min_seq": 64,
                                      "max_seq": 128, "head_dim": 32}},
        {**_C, "steps": 5, "params": {"tokens": 4096, "hidden": 512, "min_seq": 256,
                                      "max_seq": 1024, "head_dim": 64}},
        {**_G, "duration_s": 1.0, "warmup": 5,
         "params": {"tokens": 16384, "hidden": 2048, "min_seq": 512, "max_seq": 4096,
                    "head_dim": 128}})),
    SuiteRun("matmul", "matmul", _classes(
        None,
        {**_Q, "steps": 5, "params": {"size": 512}},
        {**_C, "duration_s": 5.0, "params": {"size": 2048}},
        {**_G, "duration_s": 2.0, "params": {"size": 8192}})),
    SuiteRun("membw", "membw", _classes(
        None,
        {**_Q, "steps": 3, "params": {"array_bytes": 64 << 20}},
        {**_C, "duration_s": 5.0, "params": {"array_bytes": 256 << 20}},
        {**_G, "duration_s": 2.0, "warmup": 5,
         "params": {"array_bytes": 512 << 20, "host_bytes": 256 << 20}})),
)

TESTS: tuple[SuiteTest, ...] = (
    SuiteTest("cnn-infer", "ResNet inference", "image classification (CNN)",
              "inference", "cnn-infer"),
    SuiteTest("vit-infer", "ViT inference", "image classification (ViT)",
              "inference", "vit-infer"),
    SuiteTest("seg-infer", "LR-ASPP segmentation inference", "segmentation", "inference",
              "seg-infer"),
    SuiteTest("lstm-infer", "LSTM inference", "RNN", "inference", "lstm-infer"),
    SuiteTest("llm-prefill", "LLM prefill", "LLM inference", "inference", "llm-infer",
              metric="prefill", unit="tokens/s"),
    SuiteTest("llm-decode", "LLM decode", "LLM inference", "inference", "llm-infer",
              metric="decode", unit="tokens/s"),
    SuiteTest("attention-fwd", "attention forward", "attention", "inference", "attention",
              metric="forward", unit="TFLOP/s"),
    SuiteTest("cnn-train", "ResNet training", "image classification (CNN)",
              "training", "cnn-train"),
    SuiteTest("vit-train", "ViT training", "image classification (ViT)", "training",
              "vit-train"),
    SuiteTest("seg-train", "LR-ASPP segmentation training", "segmentation", "training",
              "seg-train"),
    SuiteTest("lstm-train", "LSTM training", "RNN", "training", "lstm-train"),
    SuiteTest("gpt-train", "GPT training", "GPT training", "training", "gpt-train"),
    SuiteTest("attention-train", "attention forward+backward", "attention", "training",
              "attention"),
    SuiteTest("matmul", "matmul", "dense matrix multiply", "compute", "matmul"),
    SuiteTest("membw", "memory bandwidth", "memory bandwidth (triad)", "compute", "membw"),
)

RUNS_BY_KEY: Mapping[str, SuiteRun] = MappingProxyType({r.key: r for r in RUNS})
TESTS_BY_ID: Mapping[str, SuiteTest] = MappingProxyType({t.id: t for t in TESTS})


def device_class(device: str, quick: bool) -> DeviceClass:
    """The class a run on `device` ("cpu", "cuda", "cuda:N") belongs to."""
    kind = device.split(":", 1)[0]
    if quick and kind != "cpu":
        raise UsageError("--quick is the CPU's short class; on CUDA the suite has one class "
                         "(drop --quick or use --device cpu)")
    if kind == "cpu":
        return "cpu-quick" if quick else "cpu"
    if kind == "cuda":
        return "cuda"
    raise UsageError(f"bad device {device!r} (use cpu, cuda, cuda:N or auto)")


def run_settings(run: SuiteRun, cls: DeviceClass, device: str) -> dict[str, Any]:
    """make_request's keywords for one run of the suite on `device`."""
    return {**run.settings[cls], "device": device}


def tests_of(run_key: str) -> tuple[SuiteTest, ...]:
    return tuple(t for t in TESTS if t.run == run_key)
