"""Published references: a run is compared with one only when every setting matches."""

from __future__ import annotations

import json

import pytest

from gputui.bench import references
from gputui.bench.references import RunSettings, compare, mismatch
from gputui.bench.result import Result
from gputui.cli import main

AMP_A100 = RunSettings(benchmark="cnn-train", model="resnet50", precision="fp16",
                       batch_size=256, device_name="NVIDIA A100-SXM4-80GB", image_size=224,
                       channels_last=True)


def test_matching_run_gets_the_ratio_text() -> None:
    c = compare(AMP_A100, 2321.8)
    assert c is not None
    assert c.reference.value == 2470.0
    assert c.text == "0.94× NVIDIA DeepLearningExamples, A100 80GB, AMP, batch 256"
    assert c.to_json()["ratio"] == pytest.approx(2321.8 / 2470.0)


def test_tf32_reference_needs_tf32() -> None:
    tf32 = RunSettings(**{**AMP_A100.__dict__, "precision": "tf32", "channels_last": False})
    c = compare(tf32, 938.0)
    assert c is not None
    assert c.text == "1.00× NVIDIA DeepLearningExamples, A100 80GB, TF32, batch 256"


def test_mismatch_on_batch_gives_no_comparison() -> None:
    run = RunSettings(**{**AMP_A100.__dict__, "batch_size": 128})
    assert compare(run, 1200.0) is None
    amp = references.REFERENCES[1]
    assert mismatch(amp, run) == "batch 128 ≠ 256"


def test_mismatch_on_gpu_gives_no_comparison() -> None:
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe",
                 None):
        run = RunSettings(**{**AMP_A100.__dict__, "device_name": name})
        assert compare(run, 2400.0) is None, name


@pytest.mark.parametrize(("change", "why"), [
    ({"channels_last": False}, "memory format"),
    ({"image_size": 128}, "image size"),
    ({"model": "resnet18"}, "model"),
    ({"precision": "bf16"}, "precision"),
    ({"nproc": 2}, "processes"),
    ({"device_type": "cpu"}, "ran on cpu"),
])
def test_every_other_setting_must_match_too(change: dict, why: str) -> None:
    run = RunSettings(**{**AMP_A100.__dict__, **change})
    assert compare(run, 2400.0) is None
    reason = mismatch(references.REFERENCES[1], run)
    assert reason is not None and why in reason


def test_matmul_reference_by_gpu() -> None:
    h100 = RunSettings(benchmark="matmul", model=None, precision="bf16", batch_size=None,
                       device_name="NVIDIA H100 80GB HBM3")
    c = compare(h100, 750.0)
    assert c is not None and c.reference.value == 794.5
    assert c.text == "0.94× stas00 ml-engineering MAMF, H100 SXM, BF16"
    a100 = RunSettings(**{**h100.__dict__, "device_name": "NVIDIA A100-SXM4-40GB"})
    c = compare(a100, 271.2)
    assert c is not None and c.reference.value == 271.2
    pcie = RunSettings(**{**h100.__dict__, "device_name": "NVIDIA H100 PCIe"})
    assert compare(pcie, 600.0) is None


def test_settings_from_a_result_document() -> None:
    doc = {"benchmark": "cnn-train", "model": "resnet50", "precision": "fp16",
           "batch_size": 256, "device": "cuda:0", "device_name": "NVIDIA A100-SXM4-80GB",
           "settings": {"image_size": 224, "channels_last": True, "nproc": 1}}
    assert RunSettings.from_result(Result.from_dict(doc)) == AMP_A100
    assert RunSettings.from_result(Result.from_dict({**doc, "device": "cpu"})).device_type \
        == "cpu"


def test_bench_references_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "references", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, list) and len(out) == len(references.REFERENCES)
    keys = {"benchmark", "model", "precision", "batch_size", "gpu", "value", "unit", "source"}
    assert all(keys <= set(o) for o in out)
    amp = [o for o in out if o["value"] == 2470.0]
    assert len(amp) == 1 and amp[0]["batch_size"] == 256 and amp[0]["gpu"] == "A100 80GB"
    assert amp[0]["command"] == ("gputui bench run cnn-train --device cuda --model resnet50 "
                                 "--precision fp16 --batch-size 256 --image-size 224 "
                                 "--channels-last")
    assert main(["bench", "references"]) == 0
    assert "DeepLearningExamples" in capsys.readouterr().out


def _a100_amp_doc(value: float, **kw: object) -> dict:
    from .test_results import make_doc

    doc = make_doc(throughput=value, batch=256, model="resnet50", precision="fp16",
                   device="cuda:0", device_name="NVIDIA A100-SXM4-80GB")
    doc["throughput"]["value"] = value
    doc["settings"] = {"batch_size": 256, "image_size": 224, "channels_last": True,
                       "nproc": 1}
    doc.update(kw)
    return doc


def test_for_result_and_the_cli_summary_row() -> None:
    from rich.console import Console

    from gputui.commands.bench_view import summary_table

    doc = _a100_amp_doc(2321.8)
    c = references.for_result(Result.from_dict(doc))
    assert c is not None and c.text.startswith("0.94× NVIDIA DeepLearningExamples")
    console = Console(width=200, record=True)
    console.print(summary_table(Result.from_dict(doc)))
    text = console.export_text()
    assert "vs published" in text
    assert "0.94× NVIDIA DeepLearningExamples, A100 80GB, AMP, batch 256" in text
    other = _a100_amp_doc(2321.8, batch_size=128)
    other["settings"]["batch_size"] = 128
    assert references.for_result(Result.from_dict(other)) is None
    console = Console(width=200, record=True)
    console.print(summary_table(Result.from_dict(other)))
    assert "vs published" not in console.export_text()


def test_for_result_matmul_uses_the_bf16_figure() -> None:
    doc = {"benchmark": "matmul", "model": None, "precision": "fp32", "batch_size": None,
           "device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3",
           "throughput": {"value": 50.0}, "settings": {"nproc": 1},
           "extra": {"tflops": {"fp32": 50.0, "bf16": 778.6}, "best_shape": {},
                     "peak_tflops": None, "peak_source": None, "peak_gpu": None}}
    c = references.for_result(Result.from_dict(doc))
    assert c is not None and c.achieved == 778.6 and c.reference.value == 794.5
    assert references.for_result(Result.from_dict({**doc, "device_name": "NVIDIA H100 PCIe"})) \
        is None
