"""A Lightning Callback that reports each optimizer step:

    from gputui.integrations.lightning import GputuiCallback
    trainer = L.Trainer(..., callbacks=[GputuiCallback(name="vit")])

Samples are counted from each training batch of this process (Lightning's own
batch-size extraction: the first dimension of its first tensor, no GPU sync) and
reported when the optimizer steps (`trainer.global_step` grows), so gradient
accumulation counts every micro-batch. Tokens are counted where a batch is a mapping
with `input_ids`: its number of elements (padding included: a count without a GPU sync).
Lightning is imported when the class is first used (module `__getattr__`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputui import track
from gputui.integrations import lazy_callback


def _tokens(batch: Any) -> int:
    if isinstance(batch, Mapping):
        ids = batch.get("input_ids")
        numel = getattr(ids, "numel", None)
        if numel is not None:
            return int(numel())
    return 0


def _make() -> type:
    from lightning.pytorch import Callback
    from lightning.pytorch.utilities.data import extract_batch_size

    class GputuiCallback(Callback):  # type: ignore[misc]
        """Reports every optimizer step to the gputui monitor (gputui.track)."""

        def __init__(self, name: str | None = None) -> None:
            super().__init__()
            self.name = name
            self._samples = 0
            self._tokens = 0
            self._step = 0

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            track.start(name=self.name)
            self._step = int(trainer.global_step)

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                               batch_idx: int) -> None:
            try:
                self._samples += int(extract_batch_size(batch))
                self._tokens += _tokens(batch)
                step = int(trainer.global_step)
            except Exception:  # a training job never fails because of gputui
                return
            if step > self._step:  # the optimizer stepped after this batch
                self._step = step
                track.step(samples=self._samples, tokens=self._tokens)
                self._samples = self._tokens = 0

    GputuiCallback.__module__ = __name__
    return GputuiCallback


__getattr__ = lazy_callback(__name__, _make)
