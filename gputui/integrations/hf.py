"""A Hugging Face transformers TrainerCallback that reports each optimizer step:

    from gputui.integrations.hf import GputuiCallback
    trainer = Trainer(..., callbacks=[GputuiCallback(name="llama-sft")])

Samples per optimizer step are this process's: per_device_train_batch_size ×
gradient_accumulation_steps (a short last batch is counted whole). Tokens are counted
where the Trainer counts them (`include_num_input_tokens_seen`): its count is summed
over every process, so this process's share is that step's growth ÷ world_size.
Nothing here synchronises with the GPU. transformers is imported when the class is
first used (module `__getattr__`), so importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any

from gputui import track
from gputui.integrations import lazy_callback


def _make() -> type:
    from transformers import TrainerCallback

    class GputuiCallback(TrainerCallback):  # type: ignore[misc]
        """Reports every optimizer step to the gputui monitor (gputui.track)."""

        def __init__(self, name: str | None = None) -> None:
            self.name = name
            self._tokens_seen = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            track.start(name=self.name)
            self._tokens_seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            try:
                samples = int(args.per_device_train_batch_size) * int(
                    args.gradient_accumulation_steps)
                seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
                tokens = max(0, seen - self._tokens_seen) // max(1, int(args.world_size))
                self._tokens_seen = seen
            except Exception:  # a training job never fails because of gputui
                samples, tokens = 0, 0
            track.step(samples=samples, tokens=tokens)

    GputuiCallback.__module__ = __name__
    return GputuiCallback


__getattr__ = lazy_callback(__name__, _make)
