"""`python -m gputui.bench.worker --spec-json '<JSON>'`: run one benchmark, print events.

The protocol is in `gputui.bench.events`. Events go to a private duplicate of the original
stdout (`gputui.bench.worker.pipe`). The benchmark itself is one of `gputui.bench.worker.kinds`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
import traceback
from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.bench import events
from gputui.bench.config import TorchConfig
from gputui.bench.request import RunRequest
from gputui.bench.result import ResultBuilder
from gputui.bench.worker.cancel import CancelFlag, Cancelled, TestHooks
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.environment import (
    base_settings,
    check_precision,
    collect_env,
    resolve_device,
    torch_config,
)
from gputui.bench.worker.failures import classify
from gputui.bench.worker.pipe import Emitter, claim_stdout
from gputui.errors import UsageError
from gputui.telemetry.model import iso_utc

if TYPE_CHECKING:
    from gputui.bench.worker.energy import NvmlLink


def now_iso() -> str:
    from datetime import UTC, datetime

    return iso_utc(datetime.now(UTC))


def new_result(ctx: Ctx, started_at: str) -> ResultBuilder:
    r = ctx.request
    return ResultBuilder(
        id="", benchmark=r.benchmark, model=r.model, device=str(ctx.device),
        device_name=ctx.env.get("device_name"), precision=r.precision,
        batch_size=r.batch_size, status="ok", env=ctx.env,
        settings=base_settings(r, ctx.device), started_at=started_at)


def finish(ctx: Ctx, t_start: float) -> events.ResultReady:
    res = ctx.result
    try:
        backend = None
        if ctx.request.nproc > 1:
            backend = "nccl" if ctx.device.type == "cuda" else "gloo"
        torch = torch_config(ctx.device, backend)
    except Exception as exc:  # a record, never a reason for the run to fail
        torch = TorchConfig(error=f"{type(exc).__name__}: {exc}")
    res.config = replace(res.config, torch=torch)
    res.finished_at = now_iso()
    res.duration_s = time.monotonic() - t_start
    return events.ResultReady(res.build().to_dict())


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    started_at = now_iso()
    emit = Emitter(claim_stdout(), t0)
    cancel = CancelFlag()
    signal.signal(signal.SIGTERM, cancel.set)
    signal.signal(signal.SIGINT, cancel.set)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="gputui-worker: %(message)s")

    parser = argparse.ArgumentParser(prog="python -m gputui.bench.worker")
    parser.add_argument("--spec-json", required=True)
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        emit(events.error("invalid", "worker needs --spec-json '<JSON>'"))
        return 2
    try:
        request = RunRequest.from_json(args.spec_json)
    except ValueError as exc:
        emit(events.error("invalid", f"spec is not valid JSON: {exc}"))
        return 2
    except UsageError as exc:
        emit(events.error("invalid", str(exc)))
        return 2

    ctx: Ctx | None = None
    link: NvmlLink | None = None
    try:
        try:
            import torch
        except ImportError:
            from gputui.install_hint import bench_install_hint

            raise UsageError(f"benchmarks need torch: {bench_install_hint()}") from None
        if request.threads:
            torch.set_num_threads(request.threads)
        device = resolve_device(request)
        request = request.resolved(device.type)
        from gputui.bench.worker import nvtx

        nvtx.configure(request.nvtx, device.type)
        check_precision(device, request.precision)
        from gputui.bench.worker.energy import NvmlLink
        from gputui.bench.worker.kinds import run as run_kind

        link = NvmlLink(device)
        env = collect_env(device, link)
        ctx = Ctx(request=request, device=device, env=env, emit=emit, cancel=cancel,
                  hooks=TestHooks.from_env(request), link=link)
        ctx.result = new_result(ctx, started_at)
        emit(events.Started(os.getpid(), request.benchmark, request.to_dict(), env))
        run_kind(ctx)
        if cancel.is_set() and ctx.result.status == "ok":
            ctx.result.status = "cancelled"
        emit(finish(ctx, t0))
        return 0
    except Cancelled:
        if ctx is None:
            res = ResultBuilder.for_request("", request)
            res.status, res.started_at, res.finished_at = "cancelled", started_at, now_iso()
            emit(events.ResultReady(res.build().to_dict()))
        else:
            ctx.result.status = "cancelled"
            emit(finish(ctx, t0))
        return 0
    except Exception as exc:
        batch = ctx.current_batch if ctx is not None else None
        # A failed DDP rank has already classified its own exception.
        ev = getattr(exc, "event", None) or classify(exc, batch, request)
        if ev.error_kind != "invalid":
            traceback.print_exc(file=sys.stderr)
        emit(ev)
        return 2 if ev.error_kind == "invalid" else 1
    finally:
        if link is not None:
            link.close()
