"""--nproc N: data-parallel training (the ranks live in gputui.bench.distributed)."""

from __future__ import annotations

from gputui.bench.context import Ctx
from gputui.bench.kinds import register


@register("ddp")
def run_ddp(ctx: Ctx) -> None:
    from gputui.bench.distributed import run_ddp as run

    run(ctx)
