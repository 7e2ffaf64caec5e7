"""Published results to hold a run against, with their source and exact settings.

A run is compared with a reference only when every setting the reference names matches
(benchmark, model, precision, batch, image size, memory format, one GPU of the same
model); anything else gets no comparison rather than a misleading one. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gputui.bench import peaks
from gputui.bench.extras import ReferenceNote
from gputui.bench.kind_extras import MatmulExtra

if TYPE_CHECKING:
    from gputui.bench.result import Result

_DLE = ("NVIDIA DeepLearningExamples, ResNet50 v1.5 for PyTorch, training performance on "
        "NVIDIA DGX A100 (8x A100 80GB), 1 GPU, "
        "https://github.com/NVIDIA/DeepLearningExamples/tree/master/PyTorch/Classification/"
        "ConvNets/resnet50v1.5")
_GPT_FAST = ("pytorch-labs/gpt-fast README, benchmarks: Llama-2-7B, bf16 (base), batch 1, "
             "A100-80GB power-limited to 330 W, torch.compile with CUDA graphs, "
             "https://github.com/pytorch-labs/gpt-fast")
_FA3 = ("Shah et al., FlashAttention-3 (2024), Figure 5: attention forward speed, BF16, "
        "H100 80GB SXM5, batch × sequence 16k tokens, hidden 2,048, "
        "https://arxiv.org/abs/2407.08608")
_MAMF = ("stas00/ml-engineering, compute/accelerator: maximum achievable matmul FLOPS "
         "(mamf-finder, best over a search of shapes), "
         "https://github.com/stas00/ml-engineering/tree/master/compute/accelerator")


@dataclass(frozen=True)
class Reference:
    benchmark: str          # gputui benchmark name
    model: str | None       # gputui model name; None for probes
    precision: str          # gputui precision ("fp16" is AMP: fp16 autocast + loss scaling)
    batch_size: int | None
    gpu: str                # as the source names it
    gpu_rows: tuple[str, ...]  # peaks.PEAKS rows that are this GPU
    value: float
    unit: str
    label: str              # short name of the source, for the ratio text
    precision_label: str    # the source's word for the precision
    source: str
    image_size: int | None = None
    channels_last: bool | None = None  # None: the source does not fix it
    note: str = ""
    compile: bool | None = None  # None: the source does not fix it
    # A kind with many points (attention): the point label whose value is compared.
    point: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "model": self.model,
                "precision": self.precision, "batch_size": self.batch_size,
                "gpu": self.gpu, "value": self.value, "unit": self.unit,
                "source": self.source, "image_size": self.image_size,
                "channels_last": self.channels_last, "note": self.note,
                "compile": self.compile, "point": self.point, "command": self.command}

    @property
    def command(self) -> str:
        """The `gputui bench run` line whose result this reference is compared with."""
        parts = ["gputui bench run", self.benchmark, "--device cuda"]
        if self.model:
            parts.append(f"--model {self.model}")
        parts.append(f"--precision {self.precision}")
        if self.batch_size is not None:
            parts.append(f"--batch-size {self.batch_size}")
        if self.image_size is not None:
            parts.append(f"--image-size {self.image_size}")
        if self.channels_last:
            parts.append("--channels-last")
        if self.compile:
            parts.append("--compile")
        return " ".join(parts)

    def describe(self) -> str:
        parts = [self.label, self.gpu, self.precision_label]
        if self.batch_size is not None:
            parts.append(f"batch {self.batch_size}")
        if self.point is not None:
            parts.append(self.point)
        return ", ".join(parts)


REFERENCES: tuple[Reference, ...] = (
    Reference(
        benchmark="cnn-train", model="resnet50", precision="tf32", batch_size=256,
        gpu="A100 80GB", gpu_rows=("A100 SXM4 80GB",), value=938.0, unit="images/s",
        label="NVIDIA DeepLearningExamples", precision_label="TF32", source=_DLE,
        image_size=224,
        note="real ImageNet through DALI; gputui feeds synthetic device-resident images"),
    Reference(
        benchmark="cnn-train", model="resnet50", precision="fp16", batch_size=256,
        gpu="A100 80GB", gpu_rows=("A100 SXM4 80GB",), value=2470.0, unit="images/s",
        label="NVIDIA DeepLearningExamples", precision_label="AMP", source=_DLE,
        image_size=224, channels_last=True,
        note="AMP with NHWC (channels-last); real ImageNet through DALI; gputui feeds "
             "synthetic device-resident images"),
    Reference(
        benchmark="matmul", model=None, precision="bf16", batch_size=None,
        gpu="H100 SXM", gpu_rows=("H100 SXM",), value=794.5, unit="TFLOP/s",
        label="stas00 ml-engineering MAMF", precision_label="BF16", source=_MAMF,
        note="80.3 % of the 989.4 TFLOP/s dense BF16 peak; the best shape of a search, so "
             "one fixed shape may fall short of it"),
    Reference(
        benchmark="matmul", model=None, precision="bf16", batch_size=None,
        gpu="A100 SXM", gpu_rows=("A100 SXM4 80GB", "A100 SXM4 40GB"), value=271.2,
        unit="TFLOP/s", label="stas00 ml-engineering MAMF", precision_label="BF16",
        source=_MAMF,
        note="86.9 % of the 312 TFLOP/s dense BF16 peak; the best shape of a search"),
    Reference(
        benchmark="lm-infer", model="llama2-7b", precision="bf16", batch_size=1,
        gpu="A100 80GB (330 W)", gpu_rows=("A100 SXM4 80GB",), value=104.9,
        unit="tokens/s", label="gpt-fast", precision_label="BF16", source=_GPT_FAST,
        compile=True,
        note="1,397 GB/s in gpt-fast's own count (model bytes × tokens/s); a prompt of a "
             "few tokens and 200 new tokens; gpt-fast's GPU ran power-limited to 330 W"),
    Reference(
        benchmark="attention", model=None, precision="bf16", batch_size=None,
        gpu="H100 SXM5", gpu_rows=("H100 SXM",), value=370.0, unit="TFLOP/s",
        label="FlashAttention-3 paper (FlashAttention-2 bars)", precision_label="BF16",
        source=_FA3, point="d128 s16384 full fwd",
        note="FlashAttention-2's forward pass, no causal mask, head dim 128, sequence 16k "
             "(Figure 5b); PyTorch's flash backend is FlashAttention-2; FlashAttention-3 "
             "reaches 648 and cuDNN 595 at the same shape"),
    Reference(
        benchmark="attention", model=None, precision="bf16", batch_size=None,
        gpu="H100 SXM5", gpu_rows=("H100 SXM",), value=335.0, unit="TFLOP/s",
        label="FlashAttention-3 paper (FlashAttention-2 bars)", precision_label="BF16",
        source=_FA3, point="d128 s16384 causal fwd",
        note="FlashAttention-2's forward pass, causal, head dim 128, sequence 16k "
             "(Figure 5e, causal FLOPs halved); FlashAttention-3 reaches 616 and cuDNN 539"),
)


@dataclass(frozen=True)
class RunSettings:
    """What a result says about how it ran: the fields a reference must agree with."""

    benchmark: str
    model: str | None
    precision: str
    batch_size: int | None
    device_name: str | None
    image_size: int | None = None
    channels_last: bool = False
    nproc: int = 1
    device_type: str = "cuda"
    compile: bool = False

    @classmethod
    def from_result(cls, r: Result) -> RunSettings:
        s = r.settings
        device = str(r.device or s.get("device") or "")
        return cls(
            benchmark=r.benchmark or str(s.get("benchmark") or ""),
            model=r.model or s.get("model"),
            precision=r.precision or str(s.get("precision") or ""),
            batch_size=r.batch_size,
            device_name=r.device_name,
            image_size=s.get("image_size"),
            channels_last=bool(s.get("channels_last", False)),
            nproc=int(s.get("nproc") or 1),
            device_type=device.split(":", 1)[0] or "cuda",
            compile=bool(s.get("compile", False)),
        )


@dataclass(frozen=True)
class Comparison:
    reference: Reference
    achieved: float
    ratio: float

    @property
    def text(self) -> str:
        return f"{self.ratio:.2f}× {self.reference.describe()}"

    def to_json(self) -> dict[str, Any]:
        return self.to_note().to_json()

    def to_note(self) -> ReferenceNote:
        """What the result keeps as extra.reference."""
        return ReferenceNote(text=self.text, ratio=self.ratio, value=self.reference.value,
                             unit=self.reference.unit, source=self.reference.source,
                             reference=self.reference.to_json())


def mismatch(ref: Reference, run: RunSettings) -> str | None:
    """The first setting on which `run` differs from `ref`, or None when all agree."""
    if run.benchmark != ref.benchmark:
        return f"benchmark {run.benchmark} ≠ {ref.benchmark}"
    if run.model != ref.model:
        return f"model {run.model} ≠ {ref.model}"
    if run.precision != ref.precision:
        return f"precision {run.precision} ≠ {ref.precision}"
    if ref.batch_size is not None and run.batch_size != ref.batch_size:
        return f"batch {run.batch_size} ≠ {ref.batch_size}"
    if ref.image_size is not None and run.image_size != ref.image_size:
        return f"image size {run.image_size} ≠ {ref.image_size}"
    if ref.channels_last is not None and run.channels_last != ref.channels_last:
        return "memory format differs (channels-last)"
    if ref.compile is not None and run.compile != ref.compile:
        return "compiled" if run.compile else "not compiled (--compile)"
    if run.nproc != 1:
        return f"{run.nproc} processes; the reference is one GPU"
    if run.device_type != "cuda":
        return f"ran on {run.device_type}"
    row = peaks.match(run.device_name).row
    if row is None or row.name not in ref.gpu_rows:
        return f"GPU {run.device_name!r} is not a {ref.gpu}"
    return None


def find(run: RunSettings) -> Reference | None:
    """The reference whose every setting the run shares, or None."""
    for ref in REFERENCES:
        if mismatch(ref, run) is None:
            return ref
    return None


def compare(run: RunSettings, achieved: float | None) -> Comparison | None:
    """Achieved (in the reference's unit) ÷ the matching reference, or None."""
    ref = find(run)
    if ref is None or achieved is None or achieved <= 0:
        return None
    return Comparison(ref, achieved, achieved / ref.value)


def for_result(r: Result) -> Comparison | None:
    """The comparison for a result, or None when no reference matches.

    matmul measures every dtype: its BF16 figure (best shape) is what a BF16 reference
    compares with, whatever the run's --precision.
    """
    run = RunSettings.from_result(r)
    achieved = r.headline
    if run.benchmark == "matmul":
        m = r.extra.of(MatmulExtra)
        run = replace(run, precision="bf16")
        achieved = m.tflops.get("bf16") if m is not None else None
    if run.benchmark == "attention":
        return _point_comparison(r, run)
    if achieved is None:
        return None
    return compare(run, float(achieved))


def _point_comparison(r: Result, run: RunSettings) -> Comparison | None:
    """The first reference whose settings match and whose point the run measured."""
    values = {p.label: p.throughput for p in r.points}
    for ref in REFERENCES:
        value = values.get(ref.point) if ref.point is not None else None
        if value is None or value <= 0 or mismatch(ref, run) is not None:
            continue
        return Comparison(ref, float(value), float(value) / ref.value)
    return None
