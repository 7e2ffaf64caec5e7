"""dcgm-exporter's job mapping files from a tracked job (`track.start(hpc_job=...)` or
GPUTUI_HPC_JOB_DIR): one file per GPU, named by its index, one job id a line, as
dcgm-exporter's --hpc-job-mapping-dir reads them; the job's line taken out at its end,
others' lines kept, a line shared with a live rank kept, a crashed job's line cleared."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui import track

DEAD_PID = 2**22 + 5  # above the kernel's largest pid: never a live process


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, runtime: Path) -> pytest.MonkeyPatch:
    for name in ("GPUTUI_HPC_JOB_DIR", "DCGM_HPC_JOB_MAPPING_DIR", "SLURM_JOB_ID",
                 "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def gpu_files(d: Path) -> dict[str, str]:
    """What dcgm-exporter reads: the files named by a GPU index, and their lines."""
    return {p.name: p.read_text() for p in d.iterdir() if p.name.isdigit()}


def test_files_written_named_and_removed(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    d = tmp_path / "job-map"
    env.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    t = track.Tracker()
    t.start(name="train", hpc_job="12345", hpc_job_dir=str(d))
    assert gpu_files(d) == {"2": "12345\n", "3": "12345\n"}
    t.step(samples=8)
    t.close()
    assert gpu_files(d) == {}
    assert [p.name for p in d.iterdir()] == [".gputui.lock"]  # no marker left


def test_the_directory_from_the_environment_and_slurm_gpus(env: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    d = tmp_path / "map"
    env.setenv("GPUTUI_HPC_JOB_DIR", str(d))
    env.setenv("SLURM_JOB_ID", "4242")
    env.setenv("SLURM_JOB_GPUS", "0,5")
    env.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # inside the job: renumbered from 0
    t = track.Tracker()
    t.start()
    assert gpu_files(d) == {"0": "4242\n", "5": "4242\n"}
    t.close()
    assert gpu_files(d) == {}


def test_other_lines_stay_a_live_ranks_line_stays_a_crashed_jobs_line_goes(
        env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    d = tmp_path / "map"
    d.mkdir()
    (d / "0").write_text("999\n777\n")  # a Slurm prolog's job, and a crashed job's
    (d / f".gputui-0-{DEAD_PID}").write_text("777\n")
    (d / f".gputui-1-{os.getppid()}").write_text("12345\n")  # another rank, alive
    env.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    t = track.Tracker()
    t.start(hpc_job="12345", hpc_job_dir=str(d))
    assert gpu_files(d) == {"0": "999\n12345\n", "1": "12345\n"}
    t.close()
    # GPU 1's line is the live rank's too: it stays until that one ends.
    assert gpu_files(d) == {"0": "999\n", "1": "12345\n"}


def test_nothing_to_name_writes_nothing_and_never_raises(env: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    d = tmp_path / "map"
    t = track.Tracker()
    t.start(hpc_job="1", hpc_job_dir=str(d))  # no GPU named anywhere
    assert not d.exists()
    env.setenv("CUDA_VISIBLE_DEVICES", "GPU-0a1b2c3d")  # UUIDs: no index to name a file
    t.start(hpc_job="1", hpc_job_dir=str(d))
    assert not d.exists()
    env.setenv("CUDA_VISIBLE_DEVICES", "0")
    t.start(hpc_job="1")  # no directory
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    t.start(hpc_job="1", hpc_job_dir=str(blocker / "map"))  # cannot be made
    t.close()


def test_a_hostile_job_id_is_one_bounded_line(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    d = tmp_path / "map"
    env.setenv("CUDA_VISIBLE_DEVICES", "0")
    t = track.Tracker()
    t.start(hpc_job="evil\n0\x1b[2J" + "x" * 500, hpc_job_dir=str(d))
    (line,) = gpu_files(d)["0"].splitlines()
    assert line == ("evil0[2J" + "x" * 500)[:track.HPC_JOB_CHARS]
    t.close()


def test_a_forked_child_leaves_its_parents_files(env: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    d = tmp_path / "map"
    env.setenv("CUDA_VISIBLE_DEVICES", "0")
    t = track.Tracker()
    t.start(hpc_job="7", hpc_job_dir=str(d))
    real = track._getpid()
    env.setattr(track, "_getpid", lambda: real + 1)  # as a fork()ed child sees itself
    t.close()
    assert gpu_files(d) == {"0": "7\n"}
    env.setattr(track, "_getpid", lambda: real)
