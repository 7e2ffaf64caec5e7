"""Python side of the fake NVML library (``tests/fakenvml/fakenvml.c``).

* :func:`build_library` compiles the C source with gcc into
  ``tests/fakenvml/build/<hash>/`` (cached by a hash of the source and flags; one
  process builds while parallel ones wait on a file lock, and each file is written
  under a temporary name then renamed).
* :func:`write_scenario` / :func:`scenario_path` produce scenario files.
* :class:`FakeNvmlLib` describes a built library (for subprocesses: ``.env()``).
* :class:`FakeNvml` drives the library in-process and points the real
  ``pynvml`` module at it.

Two copies of the library are built from the same source:

``libnvidia-ml.so.1`` (soname ``libnvidia-ml.so.1``)
    what a subprocess finds through ``LD_LIBRARY_PATH``, exactly like the real
    driver library.
``libfakenvml-inproc.so`` (another soname)
    what the in-process fixture loads by path.  glibc matches ``dlopen()`` names
    against the sonames of already loaded objects, so loading a library whose
    soname is ``libnvidia-ml.so.1`` would make every later
    ``CDLL("libnvidia-ml.so.1")`` in this process succeed; the different soname
    keeps "no NVML installed" testable in the same pytest process.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FAKENVML_DIR = Path(__file__).resolve().parent
SOURCE = FAKENVML_DIR / "fakenvml.c"
BUILD_DIR = FAKENVML_DIR / "build"
SCENARIO_DIR = FAKENVML_DIR / "scenarios"

LIB_NAME = "libnvidia-ml.so.1"
INPROC_LIB_NAME = "libfakenvml-inproc.so"

CFLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-Werror"]
LIBS = ["-lm", "-lpthread"]

# Clocks-event ("throttle") reason bits, as in nvml.h.
REASON_GPU_IDLE = 0x1
REASON_APPLICATIONS_CLOCKS_SETTING = 0x2
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SYNC_BOOST = 0x10
REASON_SW_THERMAL_SLOWDOWN = 0x20
REASON_HW_THERMAL_SLOWDOWN = 0x40
REASON_HW_POWER_BRAKE_SLOWDOWN = 0x80
REASON_DISPLAY_CLOCK_SETTING = 0x100


# --------------------------------------------------------------------------- scenarios


def scenario_path(name: str) -> Path:
    """Path of a shipped scenario: ``scenario_path("throttle")`` or ``"throttle.conf"``."""
    file_name = name if name.endswith(".conf") else f"{name}.conf"
    path = SCENARIO_DIR / file_name
    if not path.is_file():
        shipped = sorted(p.stem for p in SCENARIO_DIR.glob("*.conf"))
        raise FileNotFoundError(f"no shipped scenario {name!r}; available: {shipped}")
    return path


def shipped_scenarios() -> list[str]:
    """Names (without ``.conf``) of the shipped scenarios."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.conf"))


def format_value(value: Any) -> str:
    """Render one scenario value.

    * ``bool`` → ``1``/``0``; ``int``/``float``/``str`` as written;
    * ``tuple``/``list``/``set`` → comma list (``unsupported``, ``not_found``,
      ``.wave = (amplitude, period_s)``);
    * ``dict`` → ``pid:mem`` comma list (``processes``); a ``None`` memory
      becomes ``na`` (NVML_VALUE_NOT_AVAILABLE, which pynvml reports as None).
    """
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping):
        text = ",".join(f"{int(k)}:{'na' if v is None else int(v)}" for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        text = ",".join(format_value(v) for v in items)
    elif isinstance(value, os.PathLike):
        text = os.fspath(value)
    else:
        raise TypeError(f"cannot put {type(value).__name__} into a scenario: {value!r}")
    if "\n" in text or "#" in text:
        raise ValueError(f"scenario values cannot contain newlines or '#': {text!r}")
    return text


def render_scenario(mapping: Mapping[str, Any]) -> str:
    """Scenario text for a flat ``{key: value}`` mapping (see :func:`format_value`)."""
    lines = ["# written by tests/fakenvml/harness.py"]
    for key, value in mapping.items():
        if not isinstance(key, str) or not key or any(c in key for c in "=#\n"):
            raise ValueError(f"bad scenario key {key!r}")
        lines.append(f"{key} = {format_value(value)}")
    return "\n".join(lines) + "\n"


def write_scenario(path: str | os.PathLike[str], mapping: Mapping[str, Any]) -> Path:
    """Write a scenario file from a flat dict and return its path.

    Example mapping: ``{"device_count": 1, "gpu.0.temp_c": 70,
    "gpu.0.temp_c.wave": (5, 10), "gpu.0.processes": {1234: 2**30},
    "gpu.0.unsupported": ["fan", "ecc"]}`` (wave = amplitude, period in seconds;
    processes = pid: bytes).
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_scenario(mapping))
    return out


def derive_scenario(base: str, overrides: Mapping[str, Any],
                    path: str | os.PathLike[str]) -> Path:
    """A shipped scenario with some keys changed (later lines win), e.g. one device
    made to hang: ``derive_scenario("two_gpus", {"gpu.0.hang_from_s": 0}, p)``.

    Fault keys per device: ``gpu.N.call_delay_ms`` (every call of that device sleeps
    that long) and ``gpu.N.hang_from_s`` (from that second on, every call of that
    device never returns; 0: it hangs while being opened)."""
    text = scenario_path(base).read_text(encoding="utf-8")
    out = Path(path)
    out.write_text(text + "\n# --- overrides\n" + render_scenario(overrides),
                   encoding="utf-8")
    return out


def resolve_scenario(scenario: str | os.PathLike[str]) -> Path:
    """An existing file path, or else the name of a shipped scenario."""
    path = Path(scenario)
    if path.exists():
        return path.resolve()
    if isinstance(scenario, str) and os.sep not in scenario:
        return scenario_path(scenario)
    raise FileNotFoundError(f"scenario file not found: {scenario}")


def read_stats(path: str | os.PathLike[str]) -> dict[str, int]:
    """Parse a ``FAKENVML_STATS_FILE``: ``{"calls": N, "nvmlDeviceGetName": n, ...}``."""
    stats: dict[str, int] = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            stats[key.strip()] = int(value)
    return stats


# --------------------------------------------------------------------------- building


def _compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise RuntimeError("the fake NVML library needs a C compiler (gcc) on PATH")
    return cc


def _compile(cc: str, soname: str, out: Path) -> None:
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    cmd = [cc, *CFLAGS, f"-Wl,-soname,{soname}", "-o", str(tmp), str(SOURCE), *LIBS]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"building the fake NVML library failed:\n$ {' '.join(cmd)}\n{proc.stderr}"
            )
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def build_library(build_dir: str | os.PathLike[str] | None = None) -> FakeNvmlLib:
    """Compile (or reuse the cached build of) the fake library."""
    cc = _compiler()
    digest = hashlib.sha256()
    digest.update(SOURCE.read_bytes())
    digest.update("\0".join([cc, *CFLAGS, *LIBS]).encode())
    lib_dir = Path(build_dir or BUILD_DIR) / digest.hexdigest()[:16]
    lib_dir.mkdir(parents=True, exist_ok=True)
    path = lib_dir / LIB_NAME
    inproc_path = lib_dir / INPROC_LIB_NAME
    # One builder at a time (parallel pytest workers start together): the others wait and
    # then find the finished files. Each file still appears by rename, never half-written.
    with open(lib_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.is_file():
            _compile(cc, LIB_NAME, path)
        if not inproc_path.is_file():
            _compile(cc, INPROC_LIB_NAME, inproc_path)
    return FakeNvmlLib(path=path, inproc_path=inproc_path, lib_dir=lib_dir)


class FakeNvmlLib:
    """A built fake library.

    ``path``: the ``libnvidia-ml.so.1`` file; ``lib_dir``: its directory (put it
    on ``LD_LIBRARY_PATH``); ``inproc_path``: the copy for in-process use.
    """

    def __init__(self, path: Path, inproc_path: Path, lib_dir: Path) -> None:
        self.path = path
        self.inproc_path = inproc_path
        self.lib_dir = lib_dir

    def __repr__(self) -> str:
        return f"FakeNvmlLib(path={str(self.path)!r})"

    def env(
        self,
        scenario_path: str | os.PathLike[str] | None,
        stats_file: str | os.PathLike[str] | None = None,
        base: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Environment for a subprocess that should load the fake library.

        A copy of ``os.environ`` (or ``base``) with ``lib_dir`` prepended to
        ``LD_LIBRARY_PATH`` and ``FAKENVML_SCENARIO`` set (a path, or the name of
        a shipped scenario; ``None`` = the built-in 2-GPU default).  With
        ``stats_file``, the library writes ``calls=N`` and per-function counts
        there at ``nvmlShutdown`` and at process exit.
        """
        env = dict(os.environ if base is None else base)
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = f"{self.lib_dir}:{old}" if old else str(self.lib_dir)
        if scenario_path is None:
            env.pop("FAKENVML_SCENARIO", None)
        else:
            env["FAKENVML_SCENARIO"] = str(resolve_scenario(scenario_path))
        if stats_file is None:
            env.pop("FAKENVML_STATS_FILE", None)
        else:
            env["FAKENVML_STATS_FILE"] = str(Path(stats_file).resolve())
        return env


# --------------------------------------------------------------------------- in-process


def _load_hooks(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.fakenvml_load.argtypes = [ctypes.c_char_p]
    lib.fakenvml_load.restype = ctypes.c_int
    lib.fakenvml_set_time.argtypes = [ctypes.c_double]
    lib.fakenvml_set_time.restype = None
    lib.fakenvml_get_time.argtypes = []
    lib.fakenvml_get_time.restype = ctypes.c_double
    lib.fakenvml_call_count.argtypes = []
    lib.fakenvml_call_count.restype = ctypes.c_ulonglong
    lib.fakenvml_reset_counts.argtypes = []
    lib.fakenvml_reset_counts.restype = None
    lib.fakenvml_call_count_for.argtypes = [ctypes.c_char_p]
    lib.fakenvml_call_count_for.restype = ctypes.c_ulonglong
    lib.fakenvml_init_refcount.argtypes = []
    lib.fakenvml_init_refcount.restype = ctypes.c_int
    lib.fakenvml_force_shutdown.argtypes = []
    lib.fakenvml_force_shutdown.restype = None
    return lib


def reset_pynvml() -> None:
    """Shut pynvml down (as often as it was initialised) and forget its library."""
    import pynvml

    while pynvml._nvmlLib_refcount > 0 and pynvml.nvmlLib is not None:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pynvml._nvmlLib_refcount = 0
    pynvml._nvmlLib_refcount = 0
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()


class FakeNvml:
    """In-process control of the fake library, wired into the real ``pynvml``.

    ``use()`` loads a scenario and makes ``pynvml`` call the fake library;
    ``close()`` (the fixture's teardown) shuts pynvml down and unhooks it.
    """

    def __init__(self, lib: FakeNvmlLib, scratch_dir: Path) -> None:
        self.lib_info = lib
        self.scratch_dir = Path(scratch_dir)
        self._hooks = _load_hooks(lib.inproc_path)
        self._n_written = 0
        self.scenario: Path | None = None

    # -- setup -------------------------------------------------------------------------
    def use(
        self,
        scenario: str | os.PathLike[str] | Mapping[str, Any] | None,
        frozen_time: float | None = 0.0,
    ) -> Path | None:
        """Load a scenario (path, shipped name, or flat dict; ``None`` = built-in
        default), reset time and call counts, freeze time at ``frozen_time``
        (``None``: let it run from 0 in real time) and point ``pynvml`` at the
        library.  Does not call ``nvmlInit``.  Returns the scenario path."""
        import pynvml

        path: Path | None
        if scenario is None:
            path = None
        elif isinstance(scenario, Mapping):
            self._n_written += 1
            path = write_scenario(self.scratch_dir / f"scenario_{self._n_written}.conf", scenario)
        else:
            path = resolve_scenario(scenario)
        arg = os.fsencode(path) if path is not None else None
        if self._hooks.fakenvml_load(arg) != 0:
            raise RuntimeError(f"fakenvml_load({path}) failed (see stderr)")
        if frozen_time is not None:
            self.set_time(frozen_time)
        self.scenario = path
        if pynvml.nvmlLib is None or getattr(pynvml.nvmlLib, "_name", None) != str(
            self.lib_info.inproc_path
        ):
            reset_pynvml()
            pynvml.nvmlLib = ctypes.CDLL(str(self.lib_info.inproc_path))
        pynvml._nvmlGetFunctionPointer_cache.clear()
        return path

    # -- time ------------------------------------------------------------------------
    def set_time(self, seconds: float) -> None:
        """Freeze the scenario clock at ``seconds`` (negative: let it run on)."""
        self._hooks.fakenvml_set_time(float(seconds))

    def unfreeze(self) -> None:
        self._hooks.fakenvml_set_time(-1.0)

    def time(self) -> float:
        return float(self._hooks.fakenvml_get_time())

    # -- call counting ------------------------------------------------------------------
    def call_count(self) -> int:
        """NVML API calls since the scenario was loaded (or ``reset_counts``)."""
        return int(self._hooks.fakenvml_call_count())

    def reset_counts(self) -> None:
        self._hooks.fakenvml_reset_counts()

    def count_for(self, fn_name: str) -> int:
        """Calls of one C function, e.g. ``count_for("nvmlDeviceGetPowerUsage")``."""
        return int(self._hooks.fakenvml_call_count_for(fn_name.encode()))

    def init_refcount(self) -> int:
        """The library's own nvmlInit reference count."""
        return int(self._hooks.fakenvml_init_refcount())

    def force_shutdown(self) -> None:
        """Drop every nvmlInit reference, as the teardown does."""
        self._hooks.fakenvml_force_shutdown()

    # -- subprocesses ----------------------------------------------------------------------
    def env(
        self,
        scenario_path: str | os.PathLike[str] | None,
        stats_file: str | os.PathLike[str] | None = None,
    ) -> dict[str, str]:
        return self.lib_info.env(scenario_path, stats_file)

    # -- teardown ----------------------------------------------------------------------
    def close(self) -> None:
        reset_pynvml()
        self.force_shutdown()
        self._hooks.fakenvml_set_time(-1.0)
