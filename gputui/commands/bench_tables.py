"""`gputui bench peaks` and `gputui bench references`: the tables a result is held against.

Torch-free and NVML-free: both print data shipped in the package.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from gputui.commands.argtypes import positive_float, positive_int
from gputui.errors import GputuiError, UsageError
from gputui.safe_text import no_markup, printable


def add_parsers(bs: argparse._SubParsersAction) -> None:
    pp = bs.add_parser(
        "peaks", help="the dense peak TFLOP/s and GB/s table behind '%% of peak'",
        description="Dense (non-sparse) peak throughput per GPU model, FP32 accumulate for "
        "tensor dtypes, with each row's datasheet. --gpu shows the row an NVML device name "
        "matches, and why.")
    pp.add_argument("--gpu", metavar="NAME",
                    help='an NVML device name, e.g. "NVIDIA H100 80GB HBM3"')
    pp.add_argument("--cc", metavar="X.Y", type=_capability,
                    help="with --gpu: compute capability, to estimate a GPU not in the table")
    pp.add_argument("--sms", metavar="N", type=positive_int,
                    help="with --gpu: SM count, to estimate a GPU not in the table")
    pp.add_argument("--clock-mhz", metavar="F", type=positive_float,
                    help="with --gpu: max SM clock in MHz, to estimate a GPU not in the table")
    pp.add_argument("--json", action="store_true", help="print JSON")
    pp.set_defaults(func=run_peaks)

    rp = bs.add_parser(
        "references", help="published results a run is compared with",
        description="Published benchmark results with their exact settings. A run shows "
        "its ratio to one only when benchmark, model, precision, batch and GPU all match.")
    rp.add_argument("--json", action="store_true", help="print JSON")
    rp.set_defaults(func=run_references)


def _capability(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"compute capability looks like 9.0, not {text!r}")
    return int(m.group(1)), int(m.group(2))


def _num(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


def run_peaks(args: argparse.Namespace) -> int:
    from gputui.bench import peaks

    estimate_args = (args.cc, args.sms, args.clock_mhz)
    if args.gpu is None:
        if any(a is not None for a in estimate_args):
            raise UsageError("--cc, --sms and --clock-mhz go with --gpu NAME")
        if args.json:
            print(json.dumps([r.to_json() for r in peaks.PEAKS], indent=2))
            return 0
        _print_peaks_table(peaks.PEAKS)
        return 0
    found = peaks.lookup(args.gpu, args.cc, args.sms, args.clock_mhz)
    if found.row is None:
        hint = ("" if all(a is not None for a in estimate_args) else
                "; give --cc, --sms and --clock-mhz to estimate one")
        raise GputuiError(printable(found.reason) + hint)
    if args.json:
        print(json.dumps({**found.row.to_json(), "estimated": found.estimated,
                          "why": found.reason}, indent=2))
        return 0
    _print_peaks_table((found.row,))
    from rich.console import Console

    Console(highlight=False).print(no_markup(found.reason), soft_wrap=True)
    return 0


def _print_peaks_table(rows: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Dense peaks (no sparsity; tensor dtypes with FP32 accumulate)")
    table.add_column("GPU", style="bold", no_wrap=True)
    for head in ("FP32", "TF32", "FP16", "BF16", "FP8"):
        table.add_column(f"{head}\nTFLOP/s", justify="right", no_wrap=True)
    table.add_column("memory\nGB/s", justify="right", no_wrap=True)
    for r in rows:
        table.add_row(no_markup(r.name), _num(r.fp32_tflops), _num(r.tf32_tflops),
                      _num(r.fp16_tflops), _num(r.bf16_tflops), _num(r.fp8_tflops),
                      _num(r.mem_bw_gbps))
    console = Console(highlight=False)
    console.print(table)
    # Sources below the table: a URL column would squeeze the numbers on 80 columns.
    console.print("Sources:")
    for r in rows:
        console.print(f"  {no_markup(r.name)}: {no_markup(r.source)}", soft_wrap=True)


def run_references(args: argparse.Namespace) -> int:
    from gputui.bench.references import REFERENCES

    if args.json:
        print(json.dumps([r.to_json() for r in REFERENCES], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Published references (a run is compared only when all settings "
                  "match)")
    for head in ("#", "benchmark", "model", "precision", "batch", "GPU", "value"):
        table.add_column(head, justify="right" if head in ("#", "batch", "value") else "left")
    for i, r in enumerate(REFERENCES, 1):
        prec = r.precision_label + (" (fp16)" if r.precision == "fp16" else "")
        if r.channels_last:
            prec += ", channels-last"
        table.add_row(str(i), r.benchmark, r.model or r.point or "—", no_markup(prec),
                      str(r.batch_size) if r.batch_size is not None else "—", r.gpu,
                      f"{r.value:,.1f} {r.unit}")
    console = Console(highlight=False)
    console.print(table)
    console.print("Sources:")
    for i, r in enumerate(REFERENCES, 1):
        console.print(f"  {i}. {no_markup(r.source)}. {no_markup(r.note)}.\n"
                      f"     run: {no_markup(r.command)}", soft_wrap=True)
    return 0
