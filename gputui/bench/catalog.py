"""The built-in benchmarks as plain data: each one's kind, models and defaults per device.

The parent (CLI, TUI, runner) imports this module to list benchmarks, so it must stay free
of torch. A run spec is checked against this table in `gputui.bench.run_spec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from gputui.errors import UsageError

Kind = Literal["train", "infer", "probe"]

PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
MODES: tuple[str, ...] = ("throughput", "latency")
# Segmentation models run through the same image kinds: their output is a dict whose "out"
# holds per-pixel logits, trained against per-pixel labels (bench.worker.workloads).
SEGMENTATION_MODELS: tuple[str, ...] = ("lraspp_mobilenet_v3_large",)
# vit_ti_16: ViT-Tiny/16 (DeiT-Tiny's shape: 12 layers, 3 heads, width 192), a ViT small
# enough for a CPU.
CNN_MODELS: tuple[str, ...] = ("resnet18", "resnet50", "mobilenet_v3_large", "vit_b_16",
                               "vit_ti_16", *SEGMENTATION_MODELS)
VIT_MODELS: tuple[str, ...] = ("vit_b_16", "vit_ti_16")
RNN_MODELS: tuple[str, ...] = ("lstm", "gru")
LM_TRAIN_MODELS: tuple[str, ...] = ("gpt2", "gpt2-medium", "gpt-tiny")
LM_INFER_MODELS: tuple[str, ...] = ("llama2-7b", "gpt2", "gpt2-medium", "gpt-tiny",
                                    "llama-tiny")
# Benchmarks whose model and precision default by device (a CPU gets a tiny model in fp32,
# a GPU the published shape in bf16): the spec says "auto" until the device is known.
AUTO_PRECISION = "auto"


# A default: a number, a model or precision name, or None (a latency variant's "no
# duration": it is bounded by steps instead).
Default = int | float | str | None
Defaults = Mapping[str, Default]


@dataclass(frozen=True)
class Benchmark:
    name: str
    kind: Kind
    description: str
    unit: str
    models: tuple[str, ...] = ()
    default_model: str | None = None
    # Defaults differ by device type: a CPU run must finish in seconds on a laptop, a GPU run
    # must be long and large enough to reach steady clocks. Keys are spec keys plus the
    # benchmark-specific parameters the worker reads (e.g. matmul "size").
    cpu: Defaults = field(default_factory=dict)
    cuda: Defaults = field(default_factory=dict)
    # Variants picked by mode (inference only): overrides applied on top of cpu/cuda.
    latency_cpu: Defaults = field(default_factory=dict)
    latency_cuda: Defaults = field(default_factory=dict)
    supports_sweep: bool = False
    supports_nproc: bool = False
    supports_profile: bool = False

    def defaults(self, device_type: str, mode: str | None = None) -> dict[str, Default]:
        base = dict(self.cuda if device_type == "cuda" else self.cpu)
        if mode == "latency":
            base.update(self.latency_cuda if device_type == "cuda" else self.latency_cpu)
        return base


BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType(
    {
        b.name: b
        for b in (
            Benchmark(
                name="cnn-train",
                kind="train",
                description="Image-classifier training step (SGD) on synthetic images",
                unit="images/s",
                models=CNN_MODELS,
                default_model="resnet18",
                cpu={"batch_size": 8, "image_size": 64, "steps": 10, "warmup": 2},
                cuda={"batch_size": 64, "image_size": 224, "duration_s": 15.0, "warmup": 10},
                supports_sweep=True,
                supports_nproc=True,
                supports_profile=True,
            ),
            Benchmark(
                name="cnn-infer",
                kind="infer",
                description="Image-classifier inference: offline throughput or single-stream "
                "latency",
                unit="images/s",
                models=CNN_MODELS,
                default_model="resnet18",
                cpu={"batch_size": 16, "image_size": 64, "steps": 10, "warmup": 2},
                cuda={"batch_size": 128, "image_size": 224, "duration_s": 10.0, "warmup": 10},
                latency_cpu={"batch_size": 1, "steps": 30, "warmup": 3},
                latency_cuda={"batch_size": 1, "steps": 300, "duration_s": None, "warmup": 20},
                supports_sweep=True,
                supports_profile=True,
            ),
            Benchmark(
                name="rnn-train",
                kind="train",
                description="LSTM/GRU language-model training step on synthetic tokens",
                unit="tokens/s",
                models=RNN_MODELS,
                default_model="lstm",
                cpu={"batch_size": 16, "seq_len": 32, "steps": 10, "warmup": 2,
                     "vocab": 1000, "hidden": 128, "layers": 2},
                cuda={"batch_size": 64, "seq_len": 128, "duration_s": 15.0, "warmup": 10,
                      "vocab": 10000, "hidden": 1024, "layers": 2},
                supports_sweep=True,
                supports_nproc=True,
                supports_profile=True,
            ),
            Benchmark(
                name="rnn-infer",
                kind="infer",
                description="LSTM/GRU language-model inference: offline throughput or "
                "single-stream latency",
                unit="tokens/s",
                models=RNN_MODELS,
                default_model="lstm",
                cpu={"batch_size": 32, "seq_len": 32, "steps": 10, "warmup": 2,
                     "vocab": 1000, "hidden": 128, "layers": 2},
                cuda={"batch_size": 256, "seq_len": 128, "duration_s": 10.0, "warmup": 10,
                      "vocab": 10000, "hidden": 1024, "layers": 2},
                latency_cpu={"batch_size": 1, "steps": 30, "warmup": 3},
                latency_cuda={"batch_size": 1, "steps": 300, "duration_s": None, "warmup": 20},
                supports_sweep=True,
                supports_profile=True,
            ),
            Benchmark(
                name="train-to-accuracy",
                kind="train",
                description="Time and steps for a small CNN to reach a target validation "
                "accuracy on labels from a fixed random teacher network",
                unit="images/s",
                models=("small-cnn",),
                default_model="small-cnn",
                cpu={"batch_size": 64, "image_size": 16, "steps": 1000, "warmup": 2,
                     "target_accuracy": 0.7, "classes": 4, "eval_every": 25,
                     "val_samples": 1024},
                # Warm-up steps run on a throwaway copy of the model (see the kind).
                cuda={"batch_size": 256, "image_size": 32, "steps": 3000, "warmup": 10,
                      "target_accuracy": 0.8, "classes": 4, "eval_every": 25,
                      "val_samples": 4096},
            ),
            Benchmark(
                name="lm-train",
                kind="train",
                description="GPT-2 training step (nanoGPT's model, AdamW) on synthetic "
                "tokens: tokens/s and MFU",
                unit="tokens/s",
                models=LM_TRAIN_MODELS,
                cpu={"model": "gpt-tiny", "batch_size": 4, "steps": 6, "warmup": 2},
                # nanoGPT's GPT-2 run: 12 sequences of 1,024 tokens per micro-step, bf16.
                cuda={"model": "gpt2", "precision": "bf16", "batch_size": 12,
                      "duration_s": 20.0, "warmup": 10},
            ),
            Benchmark(
                name="lm-infer",
                kind="infer",
                description="LLM generation with a static KV cache, greedy: tokens/s, TTFT, "
                "TPOT, ITL, decode bandwidth and MBU; --sweep over batch sizes",
                unit="tokens/s",
                models=LM_INFER_MODELS,
                cpu={"model": "gpt-tiny", "batch_size": 1, "prompt_len": 16, "new_tokens": 8,
                     "steps": 5, "warmup": 1},
                # Llama-2-7B in bf16, one sequence, as gpt-fast measured it.
                cuda={"model": "llama2-7b", "precision": "bf16", "batch_size": 1,
                      "prompt_len": 128, "new_tokens": 128, "duration_s": 30.0, "warmup": 2},
                supports_sweep=True,
            ),
            Benchmark(
                name="attention",
                kind="probe",
                description="scaled_dot_product_attention TFLOP/s, forward and "
                "forward+backward, causal and not, at FlashAttention's benchmark shapes",
                unit="TFLOP/s",
                cpu={"tokens": 256, "hidden": 64, "min_seq": 64, "max_seq": 128,
                     "head_dim": 32, "steps": 3, "warmup": 1},
                # FlashAttention's benchmark: 16k tokens per batch, hidden 2,048, head dim 64
                # and 128 (head_dim unset), sequence 512 … 16k; time-bounded points.
                cuda={"precision": "bf16", "tokens": 16384, "hidden": 2048, "min_seq": 512,
                      "max_seq": 16384, "duration_s": 2.0, "warmup": 5},
            ),
            Benchmark(
                name="matmul",
                kind="probe",
                description="Dense matrix multiply TFLOP/s per dtype (fp32/tf32/fp16/bf16 as "
                "available), % of the device's peak where known",
                unit="TFLOP/s",
                cpu={"size": 512, "steps": 5, "warmup": 1},
                # Seconds per point, not steps: 30 products of 8192³ last ~45 ms on an H100,
                # a boost-clock burst before power capping sets in.
                cuda={"size": 8192, "duration_s": 2.0, "warmup": 10},
                supports_sweep=True,
            ),
            Benchmark(
                name="deepbench",
                kind="probe",
                description="DeepBench's GEMM, convolution, RNN and all-reduce problems: "
                "time per call, TFLOP/s and % of peak per shape",
                unit="TFLOP/s",
                # scale: every size divided by it (bench.deepbench.problems); a CPU runs
                # the lists 8× smaller in each dimension, a GPU DeepBench's own sizes.
                cpu={"op": "all", "problem_set": "train", "shape_set": "quick", "scale": 8,
                     "steps": 5, "warmup": 1},
                # fp16: DeepBench's own default precision for training. Seconds per shape.
                cuda={"op": "all", "problem_set": "train", "shape_set": "quick", "scale": 1,
                      "precision": "fp16", "duration_s": 0.2, "warmup": 3},
            ),
            Benchmark(
                name="membw",
                kind="probe",
                description="Memory bandwidth GB/s: copy and triad on arrays far larger than "
                "the cache; on CUDA also host<->device pinned and pageable",
                unit="GB/s",
                # 64 MiB per array is far beyond any CPU's L2 (and most L3s).
                cpu={"array_bytes": 64 << 20, "steps": 5, "warmup": 1},
                cuda={"array_bytes": 512 << 20, "host_bytes": 256 << 20, "duration_s": 2.0,
                      "warmup": 5},
            ),
            Benchmark(
                name="p2p",
                kind="probe",
                description="GPU-to-GPU copy GB/s for every ordered pair of GPUs (needs 2+ "
                "CUDA GPUs)",
                unit="GB/s",
                cpu={"bytes": 1 << 20, "steps": 5, "warmup": 1},
                cuda={"bytes": 256 << 20, "duration_s": 1.0, "warmup": 3},
            ),
            Benchmark(
                name="allreduce",
                kind="probe",
                description="NCCL all-reduce bus bandwidth GB/s across every GPU, as "
                "nccl-tests reports it (needs 2+ CUDA GPUs)",
                unit="GB/s",
                cpu={"bytes": 1 << 20, "steps": 5, "warmup": 1},
                cuda={"bytes": 256 << 20, "duration_s": 2.0, "warmup": 5},
            ),
            Benchmark(
                name="batch-finder",
                kind="probe",
                description="Largest training batch that fits in memory (OOM probing), with "
                "throughput at each size tried",
                unit="images/s",
                models=CNN_MODELS,
                default_model="resnet18",
                # On CPU nothing OOMs in reasonable time: cap by max batch and an RSS budget.
                cpu={"batch_size": 8, "image_size": 64, "steps": 2, "warmup": 1,
                     "memory_budget_frac": 0.5, "headroom_frac": 0.1},
                # 10 timed steps after 3 warm-up ones: cuDNN picks its algorithms in the
                # first steps, so 3 timed steps measured mostly autotuning.
                cuda={"batch_size": 8192, "image_size": 224, "steps": 10, "warmup": 3,
                      "headroom_frac": 0.1},
            ),
        )
    }
)


def get(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UsageError(
            f"unknown benchmark {name!r} (choose from {', '.join(BENCHMARKS)})"
        ) from None
