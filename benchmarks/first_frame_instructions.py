#!/usr/bin/env python3
"""Instructions `gputui` executes before its first frame (callgrind, every thread), per tree.

The first frame's time (benchmarks/first_frame.py) moves with this VM's speed by ±15 %
within a minute; the instructions executed to get there do not (two runs of one tree agree
within ~0.3 %), so a change of 1 % shows. Each tree is installed as first_frame.py installs
it and started the same way (tmux pane, 4 fake GPUs, 120×40, scratch directory), under
`valgrind --tool=callgrind`, through a small bootstrap: it wraps the monitor's terminal
writer once its module is imported and ends the process (`os._exit`) when the first GPU
line is written, then runs `gputui.cli.main([])` as `python -m gputui` would.

    python benchmarks/first_frame_instructions.py [--rounds 2] [--compare PATH]

Needs valgrind, tmux and gcc. Not a test; ~15 s a run.
"""

from __future__ import annotations

import argparse
import glob
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from tui_perf import Program, SetupError, gputui_program, program_base_env  # noqa: E402

from tests.e2e.tmux import TmuxSession, tmux_available  # noqa: E402
from tests.fakenvml.harness import build_library, write_scenario  # noqa: E402

# Wraps DiffingDriver.write as soon as gputui.ui.terminal_writer is imported (importing it
# first would import Textual before the command line is read, with the collector still on,
# and measure another start). The hook removes itself once it has wrapped the writer.
BOOTSTRAP = """
import builtins, os, sys
_import = builtins.__import__
def _hook(name, *args, **kwargs):
    module = _import(name, *args, **kwargs)
    tw = sys.modules.get("gputui.ui.terminal_writer")
    if tw is not None and hasattr(tw, "DiffingDriver"):
        builtins.__import__ = _import
        write = tw.DiffingDriver.write
        def first_frame(self, data):
            if "A100" in data:
                os._exit(0)
            return write(self, data)
        tw.DiffingDriver.write = first_frame
    return module
builtins.__import__ = _hook
from gputui.cli import main
sys.exit(main([]))
"""


def instructions(program: Program, scenario: Path) -> int:
    lib = build_library()
    python = program.command[0]
    with tempfile.TemporaryDirectory(prefix="gputui-ff-instr-") as tmp_name:
        tmp = Path(tmp_name)
        out = tmp / "callgrind.out"
        env = lib.env(scenario, base=program_base_env(tmp))
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   python, "-c", BOOTSTRAP]
        with TmuxSession(command, env=env, width=120, height=40, name="ff-instr",
                         cwd=tmp) as s:
            deadline = time.monotonic() + 300
            while not s.exited() and time.monotonic() < deadline:
                time.sleep(0.5)
            status = s.exit_status()
            if status != 0:
                raise RuntimeError(f"{program.label}: exited {status}: {s.capture()[-300:]}")
        total = 0
        for f in glob.glob(f"{out}*"):
            m = re.search(r"^(?:summary|totals): (\d+)", Path(f).read_text(), re.M)
            total += int(m.group(1)) if m else 0
        return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="runs of each tree (2)")
    ap.add_argument("--compare", metavar="PATH", help="another gputui source tree")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        print("gputui: --rounds must be at least 1", file=sys.stderr)
        return 2
    if not tmux_available() or shutil.which("valgrind") is None:
        print("gputui: first_frame_instructions needs tmux and valgrind", file=sys.stderr)
        return 1
    try:
        programs = [gputui_program(1.0, ROOT)]
        if args.compare:
            programs.append(gputui_program(1.0, Path(args.compare)))
    except SetupError as exc:
        print(f"gputui: {exc}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="gputui-ff-instr-") as tmp:
        scenario = write_scenario(Path(tmp) / "gpus.conf", {"device_count": 4})
        counts: dict[str, list[int]] = {p.label: [] for p in programs}
        for _ in range(args.rounds):
            for program in programs:
                counts[program.label].append(instructions(program, scenario))
    for label, runs in counts.items():
        shown = " ".join(f"{n / 1e6:.0f}" for n in runs)
        print(f"{label:<24} median {statistics.median(runs) / 1e6:8.1f} M instructions"
              f"   runs {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
