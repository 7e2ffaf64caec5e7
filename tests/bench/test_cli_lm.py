"""`gputui bench run lm-infer/lm-train` as a user runs it: the LLM flags, the per-device
defaults, and the new figures in show and export."""

from __future__ import annotations

import csv
import io
import json

import pytest

# data_dir is an autouse fixture: every run here saves into a temporary results dir.
from tests.cli import CliRunner

from .test_cli_bench import assert_usage_error, data_dir, needs_torch  # noqa: F401


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "lm-infer", "--mode", "latency"], "--mode does not apply to lm-infer"),
        (["run", "lm-train", "--model", "llama2-7b"], "unknown model 'llama2-7b'"),
        (["run", "cnn-train", "--prompt-len", "4"], "unknown parameter 'prompt_len'"),
        (["run", "lm-infer", "--new-tokens", "0"], "--new-tokens"),
    ],
)
def test_bad_llm_input_is_one_line_exit_2(argv: list[str], fragment: str,
                                         gputui: CliRunner) -> None:
    assert_usage_error(gputui("bench", *argv), fragment)


@needs_torch
def test_lm_infer_flags_reach_the_result_show_and_export(gputui: CliRunner) -> None:
    proc = gputui("bench", "run", "lm-infer", "--device", "cpu", "--threads", "1",
                  "--steps", "2", "--warmup", "0", "--prompt-len", "4", "--new-tokens", "3",
                  "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # No --model and no --precision: the CPU's defaults, a tiny model in fp32.
    assert doc["model"] == "gpt-tiny" and doc["precision"] == "fp32"
    assert (doc["llm"]["prompt_tokens"], doc["llm"]["new_tokens"]) == (4, 3)
    show = gputui("bench", "show", doc["id"], env={"COLUMNS": "200"})
    assert show.returncode == 0, show.stderr
    assert "TTFT" in show.stdout and "TPOT" in show.stdout and "(from 2 values)" in show.stdout
    assert "MBU N/A" in show.stdout and "MFU N/A" in show.stdout
    export = gputui("bench", "export", doc["id"])
    row = next(csv.DictReader(io.StringIO(export.stdout)))
    assert float(row["ttft_p50_ms"]) == doc["llm"]["ttft_ms"]["p50"]
    assert float(row["flops_per_sample"]) == doc["flops"]["per_sample"]
    assert row["mfu"] == ""  # null: no peak for a CPU
