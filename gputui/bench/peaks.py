"""Published peak throughput per GPU model, and how a device name (NVML's, torch's or the
AMD reader's) finds its row.

Every figure is dense (no 2:4 sparsity) and, for tensor cores, with FP32 accumulate: that
is what `torch.mm` in fp16/bf16 runs. Vendors headline the sparse figure (twice the dense
one) and GeForce cards run FP16/FP8 with FP32 accumulate at half the FP16-accumulate rate;
using either as the peak would make "% of peak" come out half of what it is. Datasheets
quote tensor figures "with sparsity": the dense value is that divided by two.

Torch-free: the CLI (`gputui bench peaks`) and the worker both read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class PeakRow:
    """One GPU model's peaks: TFLOP/s per dtype (None: the part has no such mode, or the
    vendor publishes none) and memory bandwidth in GB/s (10⁹ bytes/s)."""

    name: str
    # Each alias is a set of name words that must all appear in the device name.
    aliases: tuple[frozenset[str], ...]
    fp32_tflops: float | None
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    mem_bw_gbps: float | None
    source: str

    def tflops(self, dtype: str) -> float | None:
        """Peak for a matmul dtype label ("fp32", "tf32", "fp16", "bf16", "fp8")."""
        return getattr(self, f"{dtype}_tflops", None) if dtype in DTYPES else None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "fp32_tflops": self.fp32_tflops,
            "tf32_tflops": self.tf32_tflops, "fp16_tflops": self.fp16_tflops,
            "bf16_tflops": self.bf16_tflops, "fp8_tflops": self.fp8_tflops,
            "mem_bw_gbps": self.mem_bw_gbps, "source": self.source,
        }


def _row(name: str, aliases: tuple[str, ...], fp32: float | None, tf32: float | None,
         fp16: float | None, bf16: float | None, fp8: float | None, mem: float | None,
         source: str) -> PeakRow:
    return PeakRow(name, tuple(frozenset(a.split()) for a in aliases), fp32, tf32, fp16,
                   bf16, fp8, mem, source)


_H100 = "NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/"
_GH200 = ("NVIDIA GH200 Grace Hopper Superchip datasheet, https://www.nvidia.com/en-us/"
          "data-center/grace-hopper-superchip/")
_A100 = "NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/a100/"
_ADA = ("NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A, "
        "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/"
        "nvidia-ada-gpu-architecture.pdf")
_RTXBW = ("NVIDIA RTX Blackwell GPU Architecture whitepaper, Appendix A, "
          "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
          "nvidia-rtx-blackwell-gpu-architecture.pdf")
_V100 = "NVIDIA V100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/v100/"
_MI300X = ("AMD Instinct MI300X accelerator specifications, https://www.amd.com/en/products/"
           "accelerators/instinct/mi300/mi300x.html")
_MI325X = ("AMD Instinct MI325X accelerator specifications, https://www.amd.com/en/products/"
           "accelerators/instinct/mi300/mi325x.html")
_MI250X = ("AMD Instinct MI250X accelerator specifications, https://www.amd.com/en/products/"
           "accelerators/instinct/mi200/mi250x.html")
_MI210 = ("AMD Instinct MI210 accelerator specifications, https://www.amd.com/en/products/"
          "accelerators/instinct/mi200/mi210.html")

# Aliases name the words that tell a part from its siblings (form factor, memory size for
# A100s whose bandwidth differs); `match` lets only packaging/memory words go unmatched,
# so "RTX 4090 D", "RTX 4080 SUPER", laptop and Max-Q parts (other SM counts or clocks)
# never take a desktop row. A bare "NVIDIA H100" matches no row: PCIe, SXM and NVL differ
# by 30 %, and a guess would be wrong by that much; the worker estimates its FLOP/s from
# its SM count and clock instead (`estimate`), and gives no bandwidth.
PEAKS: tuple[PeakRow, ...] = (
    # Hopper. SXM5 reports "NVIDIA H100 80GB HBM3". Datasheet, SXM column: FP32 67,
    # TF32 989*, BF16/FP16 1,979*, FP8 3,958* (*sparse), 3.35 TB/s.
    _row("H100 SXM", ("h100 sxm5", "h100 sxm", "h100 hbm3"),
         67.0, 494.7, 989.4, 989.4, 1978.9, 3350, _H100 + " (H100 SXM)"),
    # Datasheet, PCIe column: FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 3,026*, 2 TB/s.
    _row("H100 PCIe", ("h100 pcie",), 51.2, 378.0, 756.5, 756.5, 1513.0, 2000,
         _H100 + " (H100 PCIe)"),
    # Datasheet, NVL column (per GPU): FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341*,
    # 3.9 TB/s.
    _row("H100 NVL", ("h100 nvl",), 60.0, 417.5, 835.5, 835.5, 1670.5, 3900,
         _H100 + " (H100 NVL)"),
    # H200 SXM reports plain "NVIDIA H200": same compute as H100 SXM, 4.8 TB/s HBM3e.
    _row("H200 SXM", ("h200", "h200 sxm"), 67.0, 494.7, 989.4, 989.4, 1978.9, 4800,
         _H200 + " (H200 SXM)"),
    # H200 NVL: FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341*, 4.8 TB/s.
    _row("H200 NVL", ("h200 nvl",), 60.0, 417.5, 835.5, 835.5, 1670.5, 4800,
         _H200 + " (H200 NVL)"),
    # GH200's Hopper GPU (NVML: "NVIDIA GH200 480GB" and "NVIDIA GH200 120GB" — the size is
    # the Grace CPU's LPDDR5X — with 96 GB HBM3; "NVIDIA GH200 144G HBM3e"). Datasheet: FP32
    # 67, TF32 989*, BF16/FP16 1,979*, FP8 3,958* (*sparse), as H100 SXM; HBM3 up to 4 TB/s,
    # HBM3e up to 4.9 TB/s.
    _row("GH200 96GB HBM3", ("gh200",), 67.0, 494.7, 989.4, 989.4, 1978.9, 4000,
         _GH200 + " (96GB HBM3)"),
    _row("GH200 144GB HBM3e", ("gh200 144g", "gh200 144gb"), 67.0, 494.7, 989.4, 989.4,
         1978.9, 4900, _GH200 + " (144GB HBM3e)"),
    # Ampere datacenter: FP32 19.5, TF32 156, BF16/FP16 312 dense; bandwidth by SKU.
    _row("A100 SXM4 80GB", ("a100 sxm4 80gb", "a100 sxm 80gb"),
         19.5, 156.0, 312.0, 312.0, None, 2039, _A100 + " (A100 80GB SXM)"),
    _row("A100 SXM4 40GB", ("a100 sxm4 40gb", "a100 sxm 40gb"),
         19.5, 156.0, 312.0, 312.0, None, 1555, _A100 + " (A100 40GB SXM)"),
    _row("A100 PCIe 80GB", ("a100 pcie 80gb",),
         19.5, 156.0, 312.0, 312.0, None, 1935, _A100 + " (A100 80GB PCIe)"),
    _row("A100 PCIe 40GB", ("a100 pcie 40gb",),
         19.5, 156.0, 312.0, 312.0, None, 1555, _A100 + " (A100 40GB PCIe)"),
    # A30 datasheet: FP32 10.3, TF32 82/165*, BF16/FP16 165/330*, 933 GB/s.
    _row("A30", ("a30",), 10.3, 82.0, 165.0, 165.0, None, 933,
         "NVIDIA A30 datasheet, https://www.nvidia.com/en-us/data-center/products/a30-gpu/"),
    # A10 datasheet: FP32 31.2, TF32 62.5/125*, BF16/FP16 125/250*, 600 GB/s (a pro GA102:
    # FP16 with FP32 accumulate at full rate).
    _row("A10", ("a10",), 31.2, 62.5, 125.0, 125.0, None, 600,
         "NVIDIA A10 datasheet, https://www.nvidia.com/en-us/data-center/products/a10-gpu/"),
    # A10G (AWS G5) has no NVIDIA datasheet; 80 SMs × 1.71 GHz at GA102's GeForce rate
    # (512 dense FP16-FP32acc FLOP/clock/SM) gives the 70 TFLOP/s AWS quotes.
    _row("A10G", ("a10g",), 31.2, 35.0, 70.0, 70.0, None, 600,
         "AWS EC2 G5 instance specifications (NVIDIA A10G), "
         "https://aws.amazon.com/ec2/instance-types/g5/; tensor rate derived from SM count × "
         "clock (NVIDIA Ampere GA102 whitepaper)"),
    # A40 datasheet: FP32 37.4, TF32 74.8/149.6*, BF16/FP16 149.7/299.4*, 696 GB/s.
    _row("A40", ("a40",), 37.4, 74.8, 149.7, 149.7, None, 696,
         "NVIDIA A40 datasheet, https://www.nvidia.com/en-us/data-center/a40/"),
    # Ada datacenter. L40S datasheet: FP32 91.6, TF32 183/366*, BF16/FP16 362.05/733*,
    # FP8 733/1,466*, 864 GB/s.
    _row("L40S", ("l40s",), 91.6, 183.0, 362.05, 362.05, 733.0, 864,
         "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/"),
    # L40 datasheet: FP32 90.5, TF32 90.5/181*, BF16/FP16 181.05/362.1*, FP8 362/724*.
    _row("L40", ("l40",), 90.5, 90.5, 181.05, 181.05, 362.0, 864,
         "NVIDIA L40 datasheet, https://www.nvidia.com/en-us/data-center/l40/"),
    # L4 datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485*, 300 GB/s.
    _row("L4", ("l4",), 30.3, 60.0, 121.0, 121.0, 242.5, 300,
         "NVIDIA L4 datasheet, https://www.nvidia.com/en-us/data-center/l4/"),
    # Turing: T4 datasheet, FP32 8.1, mixed precision (FP16/FP32) 65, 320 GB/s.
    _row("T4", ("t4",), 8.1, None, 65.0, None, None, 320,
         "NVIDIA T4 datasheet, https://www.nvidia.com/en-us/data-center/tesla-t4/"),
    # Volta (V100 datasheet): SXM2 15.7 / 125 tensor; PCIe 14 / 112; V100S PCIe 16.4 / 130,
    # 1,134 GB/s. No TF32, BF16 or FP8.
    _row("V100 SXM2", ("v100 sxm2",), 15.7, None, 125.0, None, None, 900, _V100 + " (SXM2)"),
    _row("V100 PCIe", ("v100 pcie",), 14.0, None, 112.0, None, None, 900, _V100 + " (PCIe)"),
    _row("V100S PCIe", ("v100s pcie", "v100s"), 16.4, None, 130.0, None, None, 1134,
         "NVIDIA V100S datasheet (Tesla V100S PCIe 32GB), "
         "https://www.nvidia.com/en-us/data-center/v100/"),
    # Professional Ada (AD102, 142 SMs) runs FP16/FP8 with FP32 accumulate at full rate:
    # the whitepaper lists FP16-FP32acc 364.2/728.4*, FP8 728.5/1,457*, TF32 182.1/364.2*.
    _row("RTX 6000 Ada", ("rtx 6000 ada",), 91.1, 182.1, 364.2, 364.2, 728.5, 960,
         _ADA + " (RTX 6000 Ada Generation)"),
    # Professional Ampere (GA102): full-rate FP16-FP32acc. RTX A6000 datasheet: FP32 38.7,
    # tensor 309.7* → 154.8 dense; RTX A5000: FP32 27.8, tensor 222.2* → 111.1 dense.
    _row("RTX A6000", ("rtx a6000",), 38.7, 77.4, 154.8, 154.8, None, 768,
         "NVIDIA RTX A6000 datasheet, https://www.nvidia.com/en-us/design-visualization/"
         "rtx-a6000/"),
    _row("RTX A5000", ("rtx a5000",), 27.8, 55.6, 111.1, 111.1, None, 768,
         "NVIDIA RTX A5000 datasheet, https://www.nvidia.com/en-us/design-visualization/"
         "rtx-a5000/"),
    # GeForce Ada: FP16/BF16 with FP32 accumulate at half the FP16-accumulate rate.
    # RTX 4090: FP32 82.6, TF32 82.6/165.2*, FP16-FP32acc 165.2/330.4*, FP8-FP32acc 330.3.
    _row("RTX 4090", ("rtx 4090",), 82.6, 82.6, 165.2, 165.2, 330.3, 1008,
         _ADA + " (GeForce RTX 4090)"),
    # RTX 4080: FP32 48.7, TF32 48.7, FP16-FP32acc 97.5, FP8-FP32acc 194.9, 716.8 GB/s.
    _row("RTX 4080", ("rtx 4080",), 48.7, 48.7, 97.5, 97.5, 194.9, 716.8,
         _ADA + " (GeForce RTX 4080 16GB)"),
    # GeForce Ampere (GA102 whitepaper): RTX 3090 FP32 35.6, TF32 35.6, FP16-FP32acc 71.
    _row("RTX 3090", ("rtx 3090",), 35.6, 35.6, 71.0, 71.0, None, 936,
         "NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (GeForce RTX 3090), "
         "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-"
         "whitepaper-v2.pdf"),
    # Blackwell datacenter (per GPU; vendor figures are with sparsity, halved here).
    # HGX B200: FP32 75, TF32 2.2 PF*, FP16/BF16 4.5 PF*, FP8 9 PF*, 7.7 TB/s.
    _row("B200", ("b200",), 75.0, 1100.0, 2250.0, 2250.0, 4500.0, 7700,
         "NVIDIA HGX B200 specifications (per GPU), https://www.nvidia.com/en-us/data-center/"
         "hgx/"),
    # HGX B100 at launch (GTC 2024), 8 GPUs: TF32 14 PF*, FP16/BF16 28 PF*, FP8 56 PF*;
    # 8 TB/s per GPU; FP32 not published.
    _row("B100", ("b100",), None, 875.0, 1750.0, 1750.0, 3500.0, 8000,
         "NVIDIA HGX B100 specifications (per GPU, GTC 2024), https://www.nvidia.com/en-us/"
         "data-center/hgx/"),
    # GB200 NVL72, per Blackwell GPU: FP32 80, TF32 2.5 PF*, FP16/BF16 5 PF*, FP8 10 PF*,
    # 8 TB/s.
    _row("GB200", ("gb200",), 80.0, 1250.0, 2500.0, 2500.0, 5000.0, 8000,
         "NVIDIA GB200 NVL72 specifications (per GPU), https://www.nvidia.com/en-us/"
         "data-center/gb200-nvl72/"),
    # RTX PRO 6000 Blackwell Workstation Edition datasheet: FP32 125, 4,000 AI TOPS (FP4,
    # sparse) → FP8 1,000 / FP16 500 / TF32 250 dense (a pro part: FP32 accumulate at full
    # rate), 1,792 GB/s. The Max-Q and Server editions run other clocks: no row.
    _row("RTX PRO 6000 Blackwell Workstation", ("rtx pro 6000 blackwell workstation",),
         125.0, 250.0, 500.0, 500.0, 1000.0, 1792,
         "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet, https://www.nvidia.com/"
         "en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/"),
    # GeForce Blackwell (whitepaper appendix): RTX 5090 FP32 104.8, TF32 104.8,
    # FP16-FP32acc 209.5, FP8-FP32acc 419, 1,792 GB/s; RTX 5080 FP32 56.3, TF32 56.3,
    # FP16-FP32acc 112.6, FP8-FP32acc 225.1, 960 GB/s.
    _row("RTX 5090", ("rtx 5090",), 104.8, 104.8, 209.5, 209.5, 419.0, 1792,
         _RTXBW + " (GeForce RTX 5090)"),
    _row("RTX 5080", ("rtx 5080",), 56.3, 56.3, 112.6, 112.6, 225.1, 960,
         _RTXBW + " (GeForce RTX 5080)"),
    # AMD Instinct (ROCm torch and gputui's AMD reader name them "AMD Instinct MI300X").
    # Matrix-core figures: an fp32 matmul runs on the matrix cores too (MFMA FP32), so
    # fp32 is the "FP32 matrix" peak. Each is CUs × peak engine clock × dense FLOP/clock/CU.
    # MI300X: 304 CUs × 2,100 MHz: FP32 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8
    # 2,614.9 (dense; the sparse figures are twice these), HBM3 5.3 TB/s.
    _row("MI300X", ("mi300x",), 163.4, 653.7, 1307.4, 1307.4, 2614.9, 5300, _MI300X),
    # MI325X: MI300X's compute with HBM3E at 6 TB/s.
    _row("MI325X", ("mi325x",), 163.4, 653.7, 1307.4, 1307.4, 2614.9, 6000, _MI325X),
    # MI250X is two GCDs, and each is its own device to torch and to amdgpu (110 CUs,
    # 64 GB): AMD's figures for the module (FP32 matrix 95.7, FP16/BF16 383.0, 3.2768
    # TB/s; 220 CUs × 1,700 MHz) halved. No TF32 or FP8. PCI id 0x740c is MI250X or
    # MI250 ("MI250X / MI250"): 5 % apart, no row.
    _row("MI250X GCD", ("mi250x", "mi250x gcd"), 47.9, None, 191.5, 191.5, None, 1638.4,
         _MI250X + " (per module; halved per GCD)"),
    # MI210: 104 CUs × 1,700 MHz: FP32 matrix 45.3, FP16/BF16 181.0, HBM2e 1.6384 TB/s.
    _row("MI210", ("mi210",), 45.3, None, 181.0, 181.0, None, 1638.4, _MI210),
)

# Words of a device name that say nothing about compute or bandwidth.
_VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla", "quadro", "amd", "instinct"})
_PACKAGING_WORDS = frozenset({"gpu", "generation", "edition", "hbm2", "hbm2e", "hbm3",
                              "hbm3e", "oam"})
_MEMORY_SIZE = re.compile(r"\d+gb")


def name_words(name: str) -> list[str]:
    """'NVIDIA A100-SXM4-80GB' → ['a100', 'sxm4', '80gb'] (vendor words dropped)."""
    words = re.split(r"[\s\-_/,()]+", name.lower())
    return [w for w in words if w and w not in _VENDOR_WORDS]


def _ignorable(word: str) -> bool:
    return word in _PACKAGING_WORDS or bool(_MEMORY_SIZE.fullmatch(word))


@dataclass(frozen=True)
class PeakMatch:
    """What a device name resolves to: a table row, an estimate, or nothing (row None)."""

    row: PeakRow | None
    estimated: bool
    reason: str


def match(name: str | None) -> PeakMatch:
    """The most specific row whose alias words all appear in `name`, with the other words
    only packaging or memory size; ties between rows, or no row, give `row=None`."""
    if not name or not name.strip():
        return PeakMatch(None, False, "no device name")
    words = name_words(name)
    present = set(words)
    best: list[tuple[int, PeakRow, frozenset[str]]] = []
    for row in PEAKS:
        for alias in row.aliases:
            if not alias <= present:
                continue
            if all(_ignorable(w) for w in present - alias):
                best.append((len(alias), row, alias))
    if not best:
        return PeakMatch(None, False, _why_not(name, present))
    top = max(n for n, _, _ in best)
    rows = {r.name: (r, a) for n, r, a in best if n == top}
    if len(rows) > 1:
        return PeakMatch(None, False, f"{name!r} matches several rows "
                                      f"({', '.join(sorted(rows))}); none is chosen")
    row, alias = next(iter(rows.values()))
    rest = [w for w in words if w not in alias]
    why = f"{name!r} → {row.name}: name words {' '.join(sorted(alias))!r}"
    if rest:
        why += f"; {' '.join(rest)!r} only packaging or memory size"
    return PeakMatch(row, False, why)


def _why_not(name: str, present: set[str]) -> str:
    # "Near" rows share a model number with the name (a word with a digit: h100, 4090),
    # not merely a brand word such as "rtx".
    numbered = {w for w in present if any(c.isdigit() for c in w)}
    near = sorted({r.name for r in PEAKS for a in r.aliases if a & numbered})
    text = f"no peak table row for {name!r}"
    if near:
        text += (f" (near: {', '.join(near)}; the form factor, variant or memory size in "
                 "the name must match one exactly)")
    return text


# Dense FLOP per SM per clock by compute capability, FP32 accumulate for tensor dtypes, for
# GPUs missing from PEAKS: SM count × max SM clock × rate. GeForce parts of cc 7.5, 8.6,
# 8.9 and 12.0 run tensor math with FP32 accumulate at half the rate of the professional
# and datacenter parts of the same chip (whitepaper appendices), hence two tables.
_PRO_RATES: dict[tuple[int, int], dict[str, float]] = {
    (7, 0): {"fp32": 128, "fp16": 1024},
    (7, 5): {"fp32": 128, "fp16": 1024},
    (8, 0): {"fp32": 128, "tf32": 1024, "fp16": 2048, "bf16": 2048},
    (8, 6): {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024},
    (8, 9): {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "fp8": 2048},
    (9, 0): {"fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096, "fp8": 8192},
    (10, 0): {"fp32": 256, "tf32": 4096, "fp16": 8192, "bf16": 8192, "fp8": 16384},
    (12, 0): {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "fp8": 2048},
}
_HALF_RATE_ON_GEFORCE = frozenset({(7, 5), (8, 6), (8, 9), (12, 0)})


def per_sm_rates(capability: tuple[int, int], geforce: bool) -> dict[str, float] | None:
    rates = _PRO_RATES.get(capability)
    if rates is None:
        return None
    if geforce and capability in _HALF_RATE_ON_GEFORCE:
        # CUDA-core FP32 is not halved; TF32 on GeForce runs at FP32's rate.
        return {k: (v if k == "fp32" else v / 2) for k, v in rates.items()}
    return dict(rates)


def estimate(name: str | None, capability: tuple[int, int] | None, sm_count: int | None,
             clock_mhz: float | None) -> PeakRow | None:
    """An estimated row from SM count × max SM clock, or None when any input is missing or
    the compute capability is not in the rate table. No bandwidth: the bus is unknown."""
    if capability is None or not sm_count or not clock_mhz:
        return None
    geforce = bool(name) and "geforce" in (name or "").lower()
    rates = per_sm_rates(capability, geforce)
    if rates is None:
        return None

    def tf(key: str) -> float | None:
        r = rates.get(key)
        return round(sm_count * clock_mhz * 1e6 * r / 1e12, 1) if r else None

    cc = f"{capability[0]}.{capability[1]}"
    return PeakRow(
        name=f"estimate for {name or 'this GPU'}", aliases=(),
        fp32_tflops=tf("fp32"), tf32_tflops=tf("tf32"), fp16_tflops=tf("fp16"),
        bf16_tflops=tf("bf16"), fp8_tflops=tf("fp8"), mem_bw_gbps=None,
        source=(f"estimated: {sm_count} SMs × {clock_mhz:g} MHz max SM clock × dense "
                f"FLOP/clock/SM of compute capability {cc}"
                f" ({'GeForce' if geforce else 'professional/datacenter'} rate)"))


def lookup(name: str | None, capability: tuple[int, int] | None = None,
           sm_count: int | None = None, clock_mhz: float | None = None) -> PeakMatch:
    """The table row for `name`, else an estimate when SM count, clock and compute
    capability are given, else no row (the reason says why)."""
    found = match(name)
    if found.row is not None:
        return found
    est = estimate(name, capability, sm_count, clock_mhz)
    if est is not None:
        return PeakMatch(est, True, f"{found.reason}; {est.source}")
    return found


def pct_of_peak(achieved: float | None, peak: float | None) -> float | None:
    """Achieved as a percentage of peak (same unit), None when either is unknown."""
    if achieved is None or not peak or peak <= 0:
        return None
    return 100.0 * achieved / peak
