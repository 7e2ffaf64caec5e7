"""Benchmark kinds: one module each, found through a registry instead of an if-chain.

A kind is a function `run(ctx: Ctx) -> None` registered under a name with `@register`
in its own module, listed in MODULES.
Benchmarks whose catalog name is registered (matmul, membw, batch-finder, lm-train,
lm-infer, attention, train-to-accuracy) run that kind; the others run by variant: "sweep"
with --sweep, "ddp" with --nproc > 1, else the catalog's kind ("train" or "infer").

A kind reports through its context: `ctx.emit(event)` for progress, `ctx.add_point(point)`
for a measured point (emitted and kept), and fills `ctx.result` (a ResultBuilder).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from gputui.bench.launch import launched
from gputui.bench.request import RunRequest
from gputui.bench.worker.context import Ctx

Kind = Callable[[Ctx], None]

_KINDS: dict[str, Kind] = {}
# Kind name → the module that registers it. Only the chosen kind's module is imported, so
# a broken kind cannot take the others down (and a run imports only what it uses).
MODULES: dict[str, str] = {
    "train": "train", "infer": "infer", "sweep": "sweep", "ddp": "ddp",
    "batch-finder": "batch_finder", "train-to-accuracy": "train_to_accuracy",
    "matmul": "matmul", "membw": "membw",
    "p2p": "interconnect", "allreduce": "interconnect",
    "lm-train": "lm_train", "lm-infer": "lm_infer", "attention": "attention",
    "deepbench": "deepbench",
}


def register(name: str) -> Callable[[Kind], Kind]:
    def add(fn: Kind) -> Kind:
        if name in _KINDS and _KINDS[name] is not fn:
            raise ValueError(f"benchmark kind {name!r} registered twice")
        _KINDS[name] = fn
        return fn

    return add


def load(name: str) -> Kind:
    """The kind registered under `name`, its module imported on first use."""
    importlib.import_module(f"{__name__}.{MODULES[name]}")
    return _KINDS[name]


def kind_name(req: RunRequest, bench_kind: str) -> str:
    if req.benchmark in MODULES:
        return str(req.benchmark)
    if req.sweep:
        return "sweep"
    if int(req.nproc or 1) * int(req.nnodes or 1) > 1 or (
            bench_kind == "train" and launched(os.environ)):
        return "ddp"
    return bench_kind


def run(ctx: Ctx) -> None:
    load(kind_name(ctx.request, ctx.bench.kind))(ctx)
