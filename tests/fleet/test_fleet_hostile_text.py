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
    table_row = next(line for line in proc.stdout.splitlines() if "GPU" not in line[:4] and
                     shown in line)
    assert EVIL_MODEL in table_row  # markup shown as written, not rendered bold
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
        table = app.query_one("#fleet", DataTable)
        cells = [table.get_row(k) for k in table.rows]
        host_cell, _, model_cell = cells[0][:3]
        assert str(host_cell) == f"{printable(EVIL_HOST)} ({srv.target})"
        assert str(model_cell) == EVIL_MODEL and not host_cell.spans  # plain text, no markup
        alerts = app.query_one("#alerts", Static).render()
        assert "\x1b" not in str(alerts) and printable(EVIL_HOST) in str(alerts)
        await pilot.press("q")
