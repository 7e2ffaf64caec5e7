"""Shared pytest fixtures: the fake NVML library (see tests/fakenvml/).

* ``fake_nvml_lib`` (session): builds the fake ``libnvidia-ml.so.1``; has
  ``.path``, ``.lib_dir`` and ``.env(scenario, stats_file=None)`` for running
  the real ``gputui`` CLI in a subprocess.
* ``fake_nvml`` (function): in-process; ``.use(scenario_or_dict, frozen_time=0.0)``
  points the real ``pynvml`` at the fake library; ``.set_time(s)``,
  ``.call_count()``, ``.reset_counts()``, ``.count_for(name)``.
* ``no_nvml`` (function): ``pynvml`` cannot find any NVML library.
* ``make_scenario`` (function): ``make_scenario({...}, name="scenario.conf") -> Path``
  in the test's ``tmp_path``.
* ``cli`` (function): ``cli("snapshot", "--json") -> CliResult(returncode, stdout,
  stderr)``, ``gputui.cli.main`` run in-process (tests/cli.py).
* ``cli_env`` (function): ``cli_env(args, env) -> CliResult``: the same with ``env`` (a
  subprocess environment, e.g. ``fake_nvml_lib.env(scenario)``) applied in-process: the
  fake NVML on that scenario when its library is on ``LD_LIBRARY_PATH``, else no NVML.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.cli import CliResult, CliRunner, apply_env, run_cli
from tests.fakenvml.harness import (
    FakeNvml,
    FakeNvmlLib,
    build_library,
    reset_pynvml,
    write_scenario,
)

# Started from a shell's background job, pytest inherits SIGINT ignored, and so would every
# `gputui` subprocess the Ctrl-C tests signal (Python does not turn an ignored SIGINT into
# KeyboardInterrupt). A handler here is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: half again as many workers as cores. A third of the suite's time is
    spent waiting (timeouts under test, programs in tmux, Prometheus scrapes), so one
    worker per core leaves the cores idle: on a 2-core VM 3 workers took 4 min 52 s
    where 2 took 5 min 54 s."""
    return max(2, (os.cpu_count() or 1) * 3 // 2)


@pytest.fixture(scope="session")
def fake_nvml_lib() -> FakeNvmlLib:
    """The compiled fake library (cached in tests/fakenvml/build/<source hash>/)."""
    try:
        return build_library()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def fake_nvml(fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> Iterator[FakeNvml]:
    """In-process fake NVML; call ``.use(scenario)`` before touching pynvml."""
    reset_pynvml()
    fake = FakeNvml(fake_nvml_lib, tmp_path)
    fake.close()  # drop any nvmlInit reference a previous test leaked
    try:
        yield fake
    finally:
        fake.close()


class NoNvml:
    """Returned by the ``no_nvml`` fixture."""

    def __init__(self, natural: bool) -> None:
        #: True when ``CDLL("libnvidia-ml.so.1")`` fails on its own (no driver
        #: installed, as on CI); False when it had to be blocked in pynvml.
        self.natural = natural


def _refuse_cdll(real_cdll: Callable[..., Any]) -> Callable[..., Any]:
    def cdll(name: Any, *args: Any, **kwargs: Any) -> Any:
        base = os.path.basename(name) if isinstance(name, str) else ""
        if base.startswith("libnvidia-ml") or base == "nvml.dll":
            raise OSError(f"{name}: blocked by the no_nvml fixture")
        return real_cdll(name, *args, **kwargs)

    return cdll


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[NoNvml]:
    """pynvml has no library loaded and cannot load one (nvmlInit raises
    ``NVMLError_LibraryNotFound``)."""
    import pynvml

    reset_pynvml()
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        natural = True
    else:  # a real driver (or a leaked fake) is loadable: block it in pynvml
        natural = False
        monkeypatch.setattr(pynvml, "CDLL", _refuse_cdll(pynvml.CDLL))
    assert pynvml.nvmlLib is None
    assert not pynvml._nvmlGetFunctionPointer_cache
    try:
        yield NoNvml(natural)
    finally:
        reset_pynvml()


@pytest.fixture
def make_scenario(tmp_path: Path) -> Callable[..., Path]:
    """``make_scenario({"gpu.0.temp_c": 80}, name="hot.conf") -> Path`` in tmp_path."""

    def make(mapping: Mapping[str, Any], name: str = "scenario.conf") -> Path:
        return write_scenario(tmp_path / name, mapping)

    return make


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private XDG_RUNTIME_DIR (0700), where training jobs keep their files."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> CliRunner:
    """``cli(*argv) -> CliResult``: ``gputui *argv`` in-process, its output captured."""

    def run(*argv: str) -> CliResult:
        return run_cli(capsys, *argv)

    return run


@pytest.fixture
def cli_env(cli: CliRunner, fake_nvml: FakeNvml,
            monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """``cli_env(args, env=None)``: ``gputui *args`` in-process as a subprocess with
    environment ``env`` would run it (``FAKENVML_STATS_FILE`` is not honoured)."""
    import pynvml

    def run(args: Sequence[str], env: Mapping[str, str] | None = None) -> CliResult:
        apply_env(monkeypatch, env)
        lib_dirs = os.environ.get("LD_LIBRARY_PATH", "").split(":")
        if str(fake_nvml.lib_info.lib_dir) in lib_dirs:
            # The fake's clock runs from 0, as in a process that has just loaded it.
            fake_nvml.use(os.environ.get("FAKENVML_SCENARIO"), frozen_time=None)
        else:
            reset_pynvml()
            monkeypatch.setattr(pynvml, "CDLL", _refuse_cdll(pynvml.CDLL))
        return cli(*args)

    return run
