"""The small things a user trips on: an unknown --theme, the install hint for
torch, the snapshot's throttled flag and even cards, the first watch row's host CPU %,
and one CPU % per process however many GPUs it uses."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputui import install_hint
from gputui.telemetry.host import HostSource
from gputui.telemetry.model import GpuProcess
from tests.cli import CliResult
from tests.fakenvml.harness import FakeNvmlLib, scenario_path, write_scenario

Run = Callable[..., CliResult]


@pytest.fixture
def run(cli_env: Run) -> Run:
    """``run(args, env)``: the CLI in-process, as a subprocess with that environment."""
    return cli_env


def test_an_unknown_theme_is_one_line_listing_the_themes_and_exit_2(tmp_path: Path,
                                                                   run: Run) -> None:
    env = {**os.environ, "GPUTUI_CONFIG_DIR": str(tmp_path)}
    proc = run(["--theme", "no-such-theme"], env=env)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines == ["gputui: unknown theme 'no-such-theme' (themes: gputui-dark, "
                     "gputui-high-contrast, gputui-light)"]


class FakeDist:
    def __init__(self, direct_url: dict[str, Any] | None, base: Path) -> None:
        self.direct_url = direct_url
        self.base = base

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)

    def locate_file(self, path: str) -> Path:
        return self.base / path


@pytest.mark.parametrize(("direct_url", "checkout", "hint"), [
    (None, False, "pip install 'gputui[bench]'"),  # from an index
    ({"url": "file:///src/gputui", "dir_info": {"editable": True}}, False,
     "pip install -e '/src/gputui[bench]'"),
    ({"url": "file:///src/gputui", "dir_info": {}}, False, "pip install torch torchvision"),
    ({"url": "https://github.com/x/gputui", "vcs_info": {"vcs": "git"}}, False,
     "pip install torch torchvision"),
    (None, True, "pip install -e '{base}[bench]'"),  # an egg-info inside a checkout
])
def test_the_torch_hint_fits_how_gputui_was_installed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, direct_url: dict[str, Any] | None,
        checkout: bool, hint: str) -> None:
    if checkout:
        (tmp_path / "pyproject.toml").write_text("[project]\nname = 'gputui'\n")
        (tmp_path / "gputui").mkdir()
    monkeypatch.setattr(install_hint.metadata, "distribution",
                        lambda name: FakeDist(direct_url, tmp_path))
    assert install_hint.bench_install_hint() == hint.format(base=tmp_path)


def test_the_torch_hint_without_an_installed_gputui(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise install_hint.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(install_hint.metadata, "distribution", missing)
    assert install_hint.bench_install_hint() == "pip install torch torchvision"


def test_snapshot_main_table_flags_the_throttled_gpu(fake_nvml_lib: FakeNvmlLib,
                                                     tmp_path: Path, run: Run) -> None:
    sc = write_scenario(tmp_path / "t.conf", {"device_count": 2,
                                               "gpu.0.throttle_reasons": 0x40,
                                               "gpu.1.throttle_reasons": 0x1})
    env = fake_nvml_lib.env(sc)
    env["COLUMNS"] = "200"
    out = run(["snapshot"], env=env).stdout
    header = next(line for line in out.splitlines() if "Bus-Id" in line)
    assert "Throttled" in header
    rows = [line for line in out.splitlines() if "00000000:" in line and "│" in line]
    assert len(rows) == 2
    assert rows[0].rstrip("│ ").endswith("⚠ yes") and rows[1].rstrip("│ ").endswith("no")


def test_snapshot_cards_at_80_columns_are_one_width(fake_nvml_lib: FakeNvmlLib,
                                                    run: Run) -> None:
    env = fake_nvml_lib.env(scenario_path("two_gpus"))
    env["COLUMNS"] = "80"
    out = run(["snapshot"], env=env).stdout
    edges = [line for line in out.splitlines() if line.startswith(("╭", "╰"))]
    assert len(edges) == 4  # two cards, top and bottom
    assert {len(line) for line in edges} == {80}
    assert "Throttled      no" in out


def test_the_first_watch_row_has_the_host_cpu(fake_nvml_lib: FakeNvmlLib, run: Run) -> None:
    proc = run(["watch", "--count", "1", "--format", "csv"],
               env=fake_nvml_lib.env(scenario_path("two_gpus")))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 2
    for row in rows:
        assert row["host_cpu_pct"] != "" and float(row["host_cpu_pct"]) >= 0


def test_one_process_on_two_gpus_has_one_cpu_percent() -> None:
    host = HostSource()
    me = os.getpid()
    rows = (GpuProcess(gpu_index=0, pid=me, gpu_mem_bytes=1),
            GpuProcess(gpu_index=1, pid=me, gpu_mem_bytes=2))
    host.describe(rows)  # psutil's first reading of a process primes it
    end = time.process_time() + 0.3
    while time.process_time() < end:  # use some CPU, so the reading is not 0 either way
        pass
    first, second = host.describe(rows)
    assert (first.gpu_index, second.gpu_index) == (0, 1)
    assert (first.gpu_mem_bytes, second.gpu_mem_bytes) == (1, 2)
    assert first.cpu_pct is not None and first.cpu_pct > 0
    assert second.cpu_pct == first.cpu_pct
    assert second.rss_bytes == first.rss_bytes and second.command == first.command
