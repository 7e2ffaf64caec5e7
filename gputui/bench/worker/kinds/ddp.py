"""--nproc N: data-parallel training (the ranks live in gputui.bench.worker.distributed)."""

from __future__ import annotations

from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register


@register("ddp")
def run_ddp(ctx: Ctx) -> None:
    from gputui.bench.worker.distributed import run_ddp as run

    run(ctx)
