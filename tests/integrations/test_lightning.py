"""The Lightning callback on the real Lightning Trainer (CPU, a tiny random model)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputui.telemetry.jobs import JobSource

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")


class Tiny(L.LightningModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Embedding(32, 8)
        self.head = torch.nn.Linear(8, 1)

    def training_step(self, batch: dict[str, object], batch_idx: int) -> object:
        ids = batch["input_ids"]
        return self.head(self.net(ids)).pow(2).mean()  # type: ignore[operator]

    def configure_optimizers(self) -> object:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Tokens(torch.utils.data.Dataset):  # type: ignore[misc]
    def __init__(self, n: int, seq: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 32, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, object]:
        return {"input_ids": self.ids[i]}


def test_each_optimizer_step_counts_every_micro_batch(reporter: JobSource,
                                                      tmp_path: Path) -> None:
    from gputui.integrations.lightning import GputuiCallback

    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(Tokens(64, 12), batch_size=4)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=5, accumulate_grad_batches=2,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=str(tmp_path),
                        callbacks=[GputuiCallback(name="tiny-pl")])
    trainer.fit(Tiny(), loader)
    (job,) = reporter.read()
    assert job.pid == os.getpid() and job.name == "tiny-pl"
    # 5 optimizer steps of 2 micro-batches of 4 samples of 12 tokens.
    assert (job.step, job.samples, job.tokens) == (5, 5 * 2 * 4, 5 * 2 * 4 * 12)
    assert job.samples_per_s is not None and job.samples_per_s > 0
