"""The Hugging Face callback on the real transformers Trainer (CPU, a tiny random GPT-2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.telemetry.jobs import JobSource

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
SEQ = 16


class Tokens(torch.utils.data.Dataset):  # type: ignore[misc]
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 64, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, object]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_importing_gputui_and_the_module_imports_no_framework() -> None:
    code = ("import sys, gputui, gputui.track, gputui.integrations.hf, "
            "gputui.integrations.lightning; print(sorted(m for m in ('transformers', "
            "'lightning', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    assert out.stdout.strip() == "[]"


def test_each_optimizer_step_is_reported_with_this_process_samples_and_tokens(
        reporter: JobSource, tmp_path: Path) -> None:
    from gputui.integrations.hf import GputuiCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=SEQ, n_embd=16, n_layer=1,
                                     n_head=2, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4,
        gradient_accumulation_steps=2, max_steps=5, report_to=[], save_strategy="no",
        logging_strategy="no", use_cpu=True, disable_tqdm=True,
        include_num_input_tokens_seen="all", dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(64),
                                   callbacks=[GputuiCallback(name="gpt2-tiny")])
    trainer.train()
    (job,) = reporter.read()
    assert job.pid == os.getpid() and job.name == "gpt2-tiny"
    # 5 optimizer steps of 2 micro-batches of 4 sequences of 16 tokens.
    assert (job.step, job.samples, job.tokens) == (5, 5 * 2 * 4, 5 * 2 * 4 * SEQ)
    assert job.samples_per_s is not None and job.samples_per_s > 0
