"""A host's page is someone else's text: escape sequences and markup in its labels are shown
escaped, never sent to the terminal or interpreted — in `--once` and in the view."""

from __future__ import annotations

import json
from collections.abc import Callable

from textual.widgets import DataTable, Static

from gputui.fleet.poller import FleetPoller
from gputui.fleet.targets import parse_target
from gputui.safe_text import printable
from gputui.ui.fleet_app import FleetApp
from gputui.ui.screens.fleet_host import FleetHostScreen
from gputui.ui.widgets.host_list import HostList
from tests.cli import CliRunner
from tests.fleet.conftest import PageServer

Pages = Callable[[bytes], PageServer]

# Clears the screen, retitles the terminal (OSC 0), and Rich markup.
EVIL_HOST = "\x1b[2J\x1b]0;pwned\x07[red]x"
EVIL_MODEL = "[b]M[/b]"


def _evil_page() -> bytes:
    labels = f'gpu="0",UUID="GPU-0",modelName="{EVIL_MODEL}",Hostname="{EVIL_HOST}"'
    return (f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 50\n"
            f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 60\n"
            f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{labels}}} 64\n").encode()


def test_once_text_output_escapes_what_the_page_says(page_server: Pages, cli: CliRunner) -> None:
    srv = page_server(_evil_page())
    proc = cli("fleet", "--once", srv.target)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    shown = printable(EVIL_HOST)
    assert shown == "\\x1b[2J\\x1b]0;pwned\\x07[red]x"
    lines = proc.stdout.splitlines()
    # The hosts first (a long name folds in its column), then every GPU.
    host_row = next(line for line in lines if line.startswith(shown[:20]))
    gpus = next(i for i, line in enumerate(lines) if "MODEL" in line)
    assert lines.index(host_row) < gpus
    gpu_row = next(line for line in lines[gpus:] if shown in line)
    assert EVIL_MODEL in gpu_row  # markup shown as written, not rendered bold
    alert = next(line for line in proc.stdout.splitlines() if "[critical]" in line)
    assert f"{shown} GPU 0: HW thermal slowdown" in alert


def test_once_json_keeps_the_exact_label(page_server: Pages, cli: CliRunner) -> None:
    srv = page_server(_evil_page())
    proc = cli("fleet", "--once", "--json", srv.target)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout  # JSON writes it as \u001b
    host = json.loads(proc.stdout)["hosts"][0]
    assert host["hostname"] == EVIL_HOST and host["gpus"][0]["model"] == EVIL_MODEL


async def test_the_view_escapes_what_the_page_says(page_server: Pages) -> None:
    srv = page_server(_evil_page())
    poller = FleetPoller([parse_target(srv.target)], interval=0.5, timeout=5)
    app = FleetApp(poller, interval=0.5)
    async with app.run_test(size=(180, 30)) as pilot:
        while app.snapshot is None or not app.snapshot.hosts[0].gpus:
            await pilot.pause(0.05)
        hosts = app.query_one(HostList)
        row = hosts.render_line(0)
        shown = printable(EVIL_HOST)
        assert row.text.startswith(shown[:hosts.name_width - 1])  # cut to the column
        assert "\x1b" not in row.text
        await pilot.press("enter")  # the host's own screen: its name whole, its GPU
        screen = app.screen
        assert isinstance(screen, FleetHostScreen)
        await pilot.pause(0.1)
        title = screen.query_one("#host-title", Static).render()
        assert str(title) == f"{shown} ({srv.target})"
        table = screen.query_one("#gpus", DataTable)
        (gpu,) = [table.get_row(k) for k in table.rows]
        model_cell = gpu[1]
        assert str(model_cell) == EVIL_MODEL and not model_cell.spans  # plain text, no markup
        alerts = screen.query_one("#host-alerts", Static).render()
        assert "\x1b" not in str(alerts) and shown in str(alerts)
        await pilot.press("q")
