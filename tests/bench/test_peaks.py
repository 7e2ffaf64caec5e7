"""The peak table behind "% of peak", and `gputui bench peaks` as a user runs it."""

from __future__ import annotations

import json

import pytest

from gputui.bench import peaks
from gputui.cli import main
from tests.cli import CliRunner


def peaks_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(["bench", "peaks", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# (NVML device name, row it must match, dense FP16-with-FP32-accumulate TFLOP/s, GB/s)
SKUS = [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4, 3350),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756.5, 2000),
    ("NVIDIA H100 NVL", "H100 NVL", 835.5, 3900),
    ("NVIDIA H200", "H200 SXM", 989.4, 4800),
    ("NVIDIA H200 NVL", "H200 NVL", 835.5, 4800),
    ("NVIDIA GH200 480GB", "GH200 96GB HBM3", 989.4, 4000),
    ("NVIDIA GH200 120GB", "GH200 96GB HBM3", 989.4, 4000),
    ("NVIDIA GH200 144G HBM3e", "GH200 144GB HBM3e", 989.4, 4900),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", 312.0, 2039),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB", 312.0, 1555),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 312.0, 1935),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", 312.0, 1555),
    ("NVIDIA A30", "A30", 165.0, 933),
    ("NVIDIA A10", "A10", 125.0, 600),
    ("NVIDIA A10G", "A10G", 70.0, 600),
    ("NVIDIA A40", "A40", 149.7, 696),
    ("NVIDIA L40S", "L40S", 362.05, 864),
    ("NVIDIA L40", "L40", 181.05, 864),
    ("NVIDIA L4", "L4", 121.0, 300),
    ("Tesla T4", "T4", 65.0, 320),
    ("Tesla V100-SXM2-16GB", "V100 SXM2", 125.0, 900),
    ("Tesla V100-PCIE-32GB", "V100 PCIe", 112.0, 900),
    ("Tesla V100S-PCIE-32GB", "V100S PCIe", 130.0, 1134),
    ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", 364.2, 960),
    ("NVIDIA RTX A6000", "RTX A6000", 154.8, 768),
    ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2, 1008),
    ("NVIDIA GeForce RTX 3090", "RTX 3090", 71.0, 936),
    ("NVIDIA B200", "B200", 2250.0, 7700),
    ("NVIDIA B100", "B100", 1750.0, 8000),
    ("NVIDIA GB200", "GB200", 2500.0, 8000),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
     "RTX PRO 6000 Blackwell Workstation", 500.0, 1792),
    ("NVIDIA GeForce RTX 5090", "RTX 5090", 209.5, 1792),
    ("NVIDIA GeForce RTX 5080", "RTX 5080", 112.6, 960),
    # AMD, as ROCm torch and gputui's AMD reader name them
    ("AMD Instinct MI300X", "MI300X", 1307.4, 5300),
    ("AMD Instinct MI300X OAM", "MI300X", 1307.4, 5300),
    ("AMD Instinct MI325X", "MI325X", 1307.4, 6000),
    ("AMD Instinct MI250X", "MI250X GCD", 191.5, 1638.4),
    ("AMD Instinct MI210", "MI210", 181.0, 1638.4),
]


@pytest.mark.parametrize(("name", "row", "fp16", "mem"), SKUS)
def test_bench_peaks_gpu_matches_each_sku(capsys: pytest.CaptureFixture[str], name: str,
                                          row: str, fp16: float, mem: float) -> None:
    out = peaks_json(capsys, "--gpu", name)
    assert isinstance(out, dict)
    assert out["name"] == row and out["estimated"] is False
    assert out["fp16_tflops"] == fp16
    assert out["bf16_tflops"] in (fp16, None)  # None: no BF16 before Ampere
    assert out["mem_bw_gbps"] == mem
    assert out["source"]


@pytest.mark.parametrize("name", [
    "NVIDIA Mystery 9000",
    "NVIDIA H100",  # PCIe, SXM or NVL: 30 % apart, so no guess
    "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA GeForce RTX 4090 D",  # fewer SMs than the 4090
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    "NVIDIA RTX A1000",  # not an A10
    "NVIDIA A100X",
    "AMD Instinct MI250X / MI250",  # one PCI id for both, 5 % apart: no guess
    "AMD Instinct MI300A",
])
def test_bench_peaks_unknown_name_exits_1_with_one_line(
        capsys: pytest.CaptureFixture[str], name: str) -> None:
    assert main(["bench", "peaks", "--gpu", name, "--json"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gputui: no peak table row for {name!r}")


def test_bench_peaks_unknown_name_as_a_user_sees_it(cli: CliRunner) -> None:
    for name in ("NVIDIA Mystery 9000", "NVIDIA H100"):
        proc = cli("bench", "peaks", "--gpu", name, "--json")
        assert proc.returncode == 1
        assert proc.stdout == ""
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("gputui: no peak table row for")
    proc = cli("bench", "peaks", "--cc", "8.0")
    assert proc.returncode == 2 and proc.stderr.startswith("gputui: ")


def test_bench_peaks_json_lists_every_row_with_its_fields(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = peaks_json(capsys)
    assert isinstance(out, list) and len(out) == len(peaks.PEAKS)
    keys = {"name", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "fp8_tflops",
            "mem_bw_gbps", "source"}
    assert all(set(o) == keys for o in out)
    by_name = {o["name"]: o for o in out}
    assert by_name["A100 SXM4 80GB"]["fp8_tflops"] is None  # Ampere has no FP8
    assert by_name["H100 SXM"]["fp8_tflops"] == 1978.9


def test_bench_peaks_table_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "peaks"]) == 0
    text = capsys.readouterr().out
    assert "H200 NVL" in text and "RTX PRO 6000" in text and "Sources:" in text
    assert main(["bench", "peaks", "--gpu", "NVIDIA H100 80GB HBM3"]) == 0
    text = capsys.readouterr().out
    assert "989.4" in text and "H100 SXM" in text
    assert "'80gb' only packaging or memory size" in text


@pytest.mark.parametrize("row", peaks.PEAKS, ids=lambda r: r.name)
def test_every_row_is_dense_and_consistent(row: peaks.PeakRow) -> None:
    # A sparse figure slipped into one column breaks these ratios.
    assert row.source
    assert row.fp16_tflops is not None and row.mem_bw_gbps
    if row.bf16_tflops is not None:
        assert row.bf16_tflops == row.fp16_tflops
    if row.fp8_tflops is not None:
        assert row.fp8_tflops == pytest.approx(2 * row.fp16_tflops, rel=0.02)
    if row.tf32_tflops is not None:
        assert row.tf32_tflops <= row.fp16_tflops / 2 * 1.02  # datasheets round


def test_names_resolve_to_one_row_each() -> None:
    names = [r.name for r in peaks.PEAKS]
    assert len(names) == len(set(names))
    for r in peaks.PEAKS:
        assert peaks.match(r.name).row is r  # the row's own name finds it


@pytest.mark.parametrize(("name", "cc", "sms", "mhz", "row"), [
    # The estimate from SM count and clock agrees with the datasheet where both exist.
    ("NVIDIA A100-SXM4-80GB", (8, 0), 108, 1410, "A100 SXM4 80GB"),
    ("NVIDIA A40", (8, 6), 84, 1740, "A40"),  # professional GA102: full rate
    ("NVIDIA GeForce RTX 3090", (8, 6), 82, 1695, "RTX 3090"),  # GeForce: half rate
    ("NVIDIA H100 80GB HBM3", (9, 0), 132, 1830, "H100 SXM"),
])
def test_estimate_agrees_with_the_table(name: str, cc: tuple[int, int], sms: int, mhz: int,
                                        row: str) -> None:
    est = peaks.estimate(name, cc, sms, mhz)
    table = peaks.match(name).row
    assert est is not None and table is not None and table.name == row
    assert est.fp16_tflops == pytest.approx(table.fp16_tflops, rel=0.01)
    assert est.mem_bw_gbps is None  # the bus width is not known: never estimated


def test_a_bare_h100_gets_an_estimated_compute_peak_and_no_bandwidth() -> None:
    """"NVIDIA H100" names no form factor: the worker's lookup (name, compute capability,
    SM count, max SM clock) estimates its FLOP/s and says why, and never guesses a bus."""
    found = peaks.lookup("NVIDIA H100", (9, 0), 132, 1980)
    assert found.row is not None and found.estimated
    assert found.row.bf16_tflops == pytest.approx(132 * 1980e6 * 4096 / 1e12, abs=0.1)
    assert found.row.mem_bw_gbps is None
    assert "H100 SXM" in found.reason and "H100 PCIe" in found.reason


def test_bench_peaks_estimate_for_a_gpu_not_in_the_table(
        capsys: pytest.CaptureFixture[str]) -> None:
    # RTX A4000: 48 SMs, 1,560 MHz, cc 8.6 professional: 76.7 dense FP16 (datasheet 153.4
    # with sparsity). The old GeForce-rate estimate gave half that.
    out = peaks_json(capsys, "--gpu", "NVIDIA RTX A4000", "--cc", "8.6", "--sms", "48",
                     "--clock-mhz", "1560")
    assert isinstance(out, dict) and out["estimated"] is True
    assert out["fp16_tflops"] == 76.7 and out["mem_bw_gbps"] is None
    geforce = peaks_json(capsys, "--gpu", "NVIDIA GeForce RTX 3060", "--cc", "8.6", "--sms",
                         "28", "--clock-mhz", "1777")
    assert isinstance(geforce, dict) and geforce["fp16_tflops"] == 25.5
    assert geforce["fp32_tflops"] == 12.7


def test_pct_of_peak() -> None:
    assert peaks.pct_of_peak(494.7, 989.4) == 50.0
    assert peaks.pct_of_peak(None, 989.4) is None
    assert peaks.pct_of_peak(1.0, None) is None


def test_amd_rows_dense_figures_and_the_names_the_amd_reader_gives() -> None:
    from gputui.telemetry.amd.names import name_of

    rows = {name_of(dev, rev): peaks.match(name_of(dev, rev)).row
            for dev, rev in ((0x74A1, 0), (0x74A5, 0), (0x7408, 0), (0x740F, 2))}
    assert {n: r.name if r else None for n, r in rows.items()} == {
        "AMD Instinct MI300X": "MI300X", "AMD Instinct MI325X": "MI325X",
        "AMD Instinct MI250X": "MI250X GCD", "AMD Instinct MI210": "MI210"}
    mi300x = rows["AMD Instinct MI300X"]
    assert mi300x is not None
    # 304 CUs × 2,100 MHz × dense FLOP/clock/CU, as the datasheet's figures are made
    for dtype, per_cu in (("fp32", 256), ("tf32", 1024), ("bf16", 2048), ("fp8", 4096)):
        assert mi300x.tflops(dtype) == pytest.approx(304 * 2.1e9 * per_cu / 1e12, abs=0.06)
    # An MI250X's GCD is half the module AMD quotes (383 TFLOP/s FP16, 3.2768 TB/s).
    gcd = rows["AMD Instinct MI250X"]
    assert gcd is not None and gcd.fp16_tflops == pytest.approx(383.0 / 2, abs=0.05)
    assert gcd.mem_bw_gbps == 3276.8 / 2 and gcd.tf32_tflops is None
    assert all(r is not None and "amd.com" in r.source for r in rows.values())
