"""Training across machines: two "nodes" on loopback, each a separate `gputui bench run`
with its node rank, meeting at one rendezvous endpoint (gloo on CPU)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.bench.launch import DEFAULT_HOST, Plan, from_launcher, parse_endpoint, plan, scaling
from gputui.errors import UsageError

from .test_cli_bench import TINY, WAIT_S, Gputui, assert_usage_error, needs_torch


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_plan_numbers_ranks_across_nodes() -> None:
    p = plan({}, nproc=2, nnodes=3, node_rank=1, rdzv_endpoint="10.0.0.5:29400")
    assert p == Plan(world=6, local=2, node_rank=1, nnodes=3, host="10.0.0.5", port=29400)
    assert [p.global_rank(r) for r in range(2)] == [2, 3]
    # Without an endpoint nothing binds beyond loopback.
    assert plan({}, nproc=1, nnodes=2, node_rank=0).host == DEFAULT_HOST
    assert plan({}, nproc=2).port is None  # one machine: a free loopback port
    assert plan({}, nproc=1) is None


def test_torchrun_and_srun_environments() -> None:
    tr = from_launcher({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                        "MASTER_ADDR": "node7", "MASTER_PORT": "29500"}, None)
    assert tr is not None and (tr.launcher, tr.rank, tr.world, tr.local_rank) == (
        "torchrun", 3, 4, 1) and (tr.host, tr.port) == ("node7", 29500)
    sr = from_launcher({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
                        "SLURM_NODEID": "1", "SLURM_NNODES": "2"},
                       "node1:29600")
    assert sr is not None and (sr.launcher, sr.rank, sr.node_rank, sr.host, sr.port) == (
        "srun", 1, 1, "node1", 29600)
    with pytest.raises(UsageError, match="no rendezvous"):
        from_launcher({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, None)
    assert from_launcher({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, None) is None


def test_endpoint_and_scaling_arithmetic() -> None:
    assert parse_endpoint("[::1]:29500") == ("::1", 29500)
    for bad in ("nohost", ":29500", "host:0", "host:http"):
        with pytest.raises(UsageError):
            parse_endpoint(bad)
    # 2 ranks making 180/s against one process's 100/s: 90 % efficient.
    assert scaling(180.0, 2, 100.0, 1) == pytest.approx(0.9)
    assert scaling(180.0, 2, None, None) is None


def test_bad_node_flags_are_usage_errors(gputui: Gputui) -> None:
    assert_usage_error(gputui("bench", "run", "cnn-train", "--nnodes", "2", "--node-rank",
                              "2"), "--node-rank 2 is not below --nnodes 2")
    assert_usage_error(gputui("bench", "run", "cnn-train", "--nnodes", "2",
                              "--rdzv-endpoint", "nohost"), "bad rendezvous endpoint")
    assert_usage_error(gputui("bench", "run", "cnn-infer", "--nnodes", "2"),
                       "--nnodes applies to cnn-train and rnn-train")
    assert_usage_error(gputui("bench", "run", "cnn-train", "--baseline", "nope"), "nope")


@needs_torch
def test_two_nodes_on_loopback_give_one_result_with_scaling(data_dir: Path, gputui: Gputui) -> None:
    base = gputui("bench", "run", "cnn-train", *TINY, "--steps", "3", "--threads", "1",
                  "--json")
    assert base.returncode == 0, base.stderr
    baseline: dict[str, Any] = json.loads(base.stdout)
    port = free_port()
    cmd = [sys.executable, "-m", "gputui", "bench", "run", "cnn-train", *TINY, "--steps", "3",
           "--threads", "1", "--nnodes", "2", "--nproc", "1",
           "--rdzv-endpoint", f"127.0.0.1:{port}", "--baseline", baseline["id"], "--json"]
    procs = [subprocess.Popen([*cmd, "--node-rank", str(r)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ))
             for r in (0, 1)]
    outs = [p.communicate(timeout=WAIT_S) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    doc = json.loads(outs[0][0])
    assert doc["status"] == "ok"
    s = doc["settings"]
    assert (s["world_size"], s["nnodes"], s["node_rank"]) == (2, 2, 0)
    assert s["rdzv_endpoint"] == f"127.0.0.1:{port}" and s["backend"] == "gloo"
    # CPU ranks have no GPU: no UUIDs, no GPU-to-GPU topology, and no error for it.
    assert s["rank_gpu_uuids"] == [None, None]
    assert doc["config"]["topology"] is None
    per_rank = doc["extra"]["per_rank_samples_per_s"]
    assert len(per_rank) == 2 and all(r > 0 for r in per_rank)
    # Both ranks ran the same 3 steps of batch 2: 12 samples in all.
    assert doc["samples"] == 12 and doc["extra"]["per_rank_samples"] == [6, 6]
    ar = doc["extra"]["allreduce"]
    assert ar["bytes"] > 0 and ar["ms"] > 0 and 0 < ar["share_of_step"]
    sc = doc["extra"]["scaling"]
    assert sc["baseline_id"] == baseline["id"] and sc["world_size"] == 2
    assert sc["efficiency"] == pytest.approx(
        doc["throughput"]["value"] / (2 * baseline["throughput"]["value"]))
    # Node 1 reports its side of the same run.
    other = json.loads(outs[1][0])
    assert other["settings"]["node_rank"] == 1 and other["samples"] == 12
    shown = gputui("bench", "show", doc["id"], env={"COLUMNS": "250"})
    assert "% efficient on 2 ranks" in shown.stdout and "per rank" in shown.stdout
    assert "of a step" in shown.stdout
    assert "GPU topology" not in shown.stdout


@needs_torch
def test_started_by_torchrun_each_worker_is_one_rank() -> None:
    # What torchrun gives each process it starts: no gputui flags about ranks at all.
    port = free_port()
    cmd = [sys.executable, "-m", "gputui", "bench", "run", "cnn-train", *TINY, "--steps", "2",
           "--threads", "1", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2",
                                   "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
                                   "MASTER_PORT": str(port)})
             for r in (0, 1)]
    outs = [p.communicate(timeout=WAIT_S) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    docs = [json.loads(out) for out, _ in outs]
    for doc in docs:
        assert doc["settings"]["launcher"] == "torchrun"
        assert doc["settings"]["world_size"] == 2 and doc["samples"] == 8
        assert len(doc["extra"]["per_rank_samples_per_s"]) == 2
