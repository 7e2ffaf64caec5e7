"""`b`: run benchmarks from the monitor and watch them beside the GPU that runs them.

Left: the catalog and a form (empty fields mean the catalog default, shown as the
placeholder), the queue. Right: the run in progress (or the last one): progress,
throughput now/median, a chart of every progress window with throttled windows marked,
latency or the per-phase split, memory, energy, and the tested GPU's live telemetry from
the monitor's own sampler. Bottom: saved results (the `gputui bench history` store);
mark two with space and press c to compare them.

The runs themselves live in the app's BenchSession (gputui/ui/bench_session.py), so
leaving this screen does not stop a run; this screen is only a view of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.suggester import SuggestFromList
from textual.widgets import (
    Button,
    Checkbox,
    DataTable,
    Digits,
    Footer,
    Input,
    Label,
    OptionList,
    ProgressBar,
    Select,
    Static,
)
from textual.widgets.option_list import Option

from gputui.bench import catalog, results
from gputui.bench.attribution import attribute
from gputui.bench.runner import make_spec
from gputui.errors import UsageError
from gputui.telemetry.model import Snapshot
from gputui.ui.bench_session import BenchSession, LiveRun, bench_session
from gputui.ui.messages import SnapshotShown
from gputui.ui.widgets.bench_chart import PhaseBar, ThroughputChart

NA = "N/A"
STDERR_LINES_SHOWN = 8
NOISE = 0.02  # ratios within ±2 % of 1 are noise: not coloured as better or worse
CARETS = re.compile(r"^[\s^~]*\^[\s^~]*$")  # traceback markers under a source line
NO_WINDOWS = "no timed windows (run failed)"

# Form fields: (widget id, label, spec key). Empty means "the catalog default".
INT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("f-batch", "batch size", "batch_size"),
    ("f-steps", "steps", "steps"),
    ("f-warmup", "warm-up", "warmup"),
)


def _fmt_big(value: float | None) -> str:
    """For Digits: few characters, no exponent (Digits draws a fixed set of glyphs)."""
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _ms(value: Any) -> str:
    return NA if not isinstance(value, int | float) else f"{results.fmt_num(value)} ms"


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _when(iso: Any) -> str:
    if not isinstance(iso, str) or not iso:
        return NA
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    return f"{t.astimezone():%m-%d %H:%M:%S}"


def parse_form(bench_name: str, values: Mapping[str, str | None]) -> dict[str, Any]:
    """Form text → a validated spec (make_spec). Raises UsageError with one line."""
    bench = catalog.get(bench_name)
    kw: dict[str, Any] = {}
    if bench.models and values.get("model"):
        kw["model"] = values["model"]
    kw["device"] = (values.get("device") or "").strip() or "auto"
    kw["precision"] = values.get("precision") or "fp32"
    for wid, label, key in INT_FIELDS:
        text = (values.get(wid) or "").strip()
        if text:
            try:
                kw[key] = int(text)
            except ValueError:
                raise UsageError(f"{label} must be a whole number, got {text!r}") from None
    duration = (values.get("f-duration") or "").strip()
    if duration:
        try:
            kw["duration_s"] = float(duration.removesuffix("s").strip())
        except ValueError:
            raise UsageError(f"duration must be a number of seconds, got {duration!r}") from None
    if kw.get("steps") is not None and kw.get("duration_s") is not None:
        raise UsageError("give steps or a duration, not both")
    size_key = size_field(bench)
    size = (values.get("f-size") or "").strip()
    if size and size_key:
        try:
            kw[size_key] = int(size)
        except ValueError:
            raise UsageError(f"{size_key.replace('_', ' ')} must be a whole number, "
                             f"got {size!r}") from None
    if bench.kind == "infer" and values.get("mode"):
        kw["mode"] = values["mode"]
    for wid, key, label in EXTRA_INT_FIELDS:
        text = (values.get(wid) or "").strip()
        if text and flag_applies(bench, key):
            try:
                kw[key] = int(text)
            except ValueError:
                raise UsageError(f"{label} must be a whole number, got {text!r}") from None
    for wid, key, _label in FLAGS:
        if values.get(wid) == "1" and flag_applies(bench, key):
            kw[key] = True
    # Checks are the catalog's own, so the TUI and the CLI reject the same things.
    return make_spec(bench_name, **kw)


# Switches (Checkbox id, spec key, label) and extra whole-number fields (Input id, spec
# key, label); each is enabled only for the benchmarks it applies to (flag_applies).
FLAGS: tuple[tuple[str, str, str], ...] = (
    ("f-sweep", "sweep", "batch sweep"),
    ("f-channels-last", "channels_last", "channels-last"),
    ("f-compile", "compile", "torch.compile"),
    ("f-profile", "profile", "profile"),
)
EXTRA_INT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("f-threads", "threads", "CPU threads"),
    ("f-nproc", "nproc", "processes"),
)


def flag_applies(bench: catalog.Benchmark, key: str, mode: str | None = None) -> bool:
    """Whether a switch or extra field means anything for this benchmark (the catalog's
    supports_* flags; channels-last only for image models; compile for any model)."""
    if key == "sweep":
        return bench.supports_sweep and mode != "latency"
    if key == "profile":
        return bench.supports_profile
    if key == "nproc":
        return bench.supports_nproc
    if key == "channels_last":
        return bool(bench.models) and size_field(bench) == "image_size"
    if key == "compile":
        return bool(bench.models)
    return key == "threads"


def size_field(bench: catalog.Benchmark) -> str | None:
    for key in ("image_size", "seq_len"):
        if key in bench.cpu or key in bench.cuda:
            return key
    return None


def default_hint(bench: catalog.Benchmark, key: str, device: str, mode: str | None) -> str:
    """The placeholder: the catalog default for this device (both when device is auto)."""
    kinds = ("cpu", "cuda") if device in ("", "auto") else (
        ("cuda",) if device.startswith("cuda") else ("cpu",))
    parts = []
    for kind in kinds:
        value = bench.defaults(kind, mode).get(key)
        if value is None:
            continue
        text = f"{value:g} s" if key == "duration_s" else str(value)
        parts.append(text if len(kinds) == 1 else f"{text} {'gpu' if kind == 'cuda' else kind}")
    return " · ".join(parts) if parts else "—"


class CatalogList(OptionList):
    """Arrows pick a benchmark; Enter runs it (a click only picks it)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "screen.run", "Run", show=False),
    ]


class QueueList(OptionList):
    """The waiting runs; delete (or backspace) drops the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("delete,backspace", "screen.remove_queued", "Remove from queue"),
    ]


class ResultsTable(DataTable[str | Text]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space,m", "screen.mark", "Mark", show=True),
    ]


def status_styles(widget: Any) -> dict[str, Style]:
    """ok / cancelled / failed → the theme's $success / $warning / $error (the widget's
    `status--*` component classes), so every theme, high contrast included, applies."""
    return {status: widget.get_component_rich_style(f"status--{status}", partial=True)
            for status in ("ok", "cancelled", "failed")}


class BenchScreen(Screen[None]):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"status--ok", "status--cancelled",
                                              "status--failed"}
    DEFAULT_CSS = """
    BenchScreen { layout: vertical; }
    BenchScreen > .status--ok { color: $success; }
    BenchScreen > .status--cancelled { color: $warning; }
    BenchScreen > .status--failed { color: $error; }
    BenchScreen > .title { height: 1; padding: 0 1; background: $primary 30%;
                           text-style: bold; }
    BenchScreen #bench-top { height: 2fr; min-height: 14; }
    BenchScreen #bench-left { width: 46; border: round $primary 60%; padding: 0 1;
                              scrollbar-size-vertical: 1; }
    BenchScreen #bench-live { width: 1fr; border: round $primary 60%; padding: 0 1;
                              scrollbar-size-vertical: 1; }
    BenchScreen .section { color: $text-muted; text-style: bold; margin-top: 1; }
    BenchScreen #catalog { height: auto; max-height: 10; border: none; padding: 0; }
    BenchScreen #catalog:focus { background-tint: $foreground 5%; }
    BenchScreen #catalog-desc { color: $text-muted; height: auto; }
    BenchScreen .field { height: 1; margin-bottom: 0; }
    BenchScreen .field > Label { width: 12; color: $text-muted; }
    BenchScreen .field > Input { width: 1fr; }
    BenchScreen .field > Select { width: 1fr; }
    BenchScreen #form-error { color: $error; text-style: bold; height: auto; }
    BenchScreen #buttons { height: 1; margin-top: 1; }
    BenchScreen #buttons Button { margin-right: 1; min-width: 8; }
    BenchScreen #flags { height: auto; layout: grid; grid-size: 2; grid-rows: 1;
                         grid-columns: 1fr 1fr; }
    BenchScreen #flags Checkbox { height: 1; }
    BenchScreen #queue-title { height: 1; color: $text; }
    BenchScreen #queue-list { height: auto; max-height: 6; border: none; padding: 0; }
    BenchScreen #queue-list:focus { background-tint: $foreground 5%; }
    BenchScreen #live-title { text-style: bold; height: auto; }
    BenchScreen #live-progress { height: 1; }
    BenchScreen #live-numbers { height: 4; }
    BenchScreen #live-numbers > Vertical { width: auto; margin-right: 3; }
    BenchScreen #live-numbers Label { color: $text-muted; }
    BenchScreen #tp-unit { width: auto; padding-top: 2; color: $text-muted; }
    BenchScreen Digits { width: auto; }
    BenchScreen #callout { height: auto; color: $error; text-style: bold; }
    BenchScreen #callout.-ok { color: $success; text-style: none; }
    BenchScreen #live-stats { height: auto; }
    BenchScreen #telemetry { height: auto; color: $accent; }
    BenchScreen #live-error { height: auto; color: $error; border: round $error;
                              padding: 0 1; display: none; }
    BenchScreen #live-error.-shown { display: block; }
    BenchScreen #results { height: 1fr; min-height: 6; border: round $primary 60%; }
    BenchScreen.-narrow #bench-left { width: 38; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("ctrl+r", "run", "Run"),
        Binding("ctrl+n", "enqueue", "Queue"),
        Binding("x,ctrl+g", "cancel_run", "Cancel run"),
        Binding("X", "clear_queue", "Clear queue", show=False),
        Binding("c", "compare", "Compare"),
    ]

    def __init__(self, session: BenchSession) -> None:
        super().__init__()
        self.session = session
        self.bench_name = str(session.form.get("benchmark") or next(iter(catalog.BENCHMARKS)))
        self.marked: list[str] = []  # result ids, in the order marked (A then B)
        self.history: dict[str, dict[str, Any]] = {}
        self._restoring = False

    # --- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("Benchmarks  (esc/b: back to the monitor · Tab: next field · "
                     "Enter: run)", classes="title")
        with Horizontal(id="bench-top"):
            with VerticalScroll(id="bench-left") as left:
                left.border_title = "Run a benchmark"
                yield CatalogList(*[Option(f"{b.name:<18} {b.unit}", id=b.name)
                                    for b in catalog.BENCHMARKS.values()], id="catalog")
                yield Static("", id="catalog-desc")
                yield Static("Settings (empty: default)", classes="section")
                with Horizontal(classes="field"):
                    yield Label("model")
                    yield Select[str]([], id="f-model", compact=True, allow_blank=True,
                                      prompt="—")
                with Horizontal(classes="field"):
                    yield Label("device")
                    yield Input(placeholder="auto", id="f-device", compact=True,
                                suggester=SuggestFromList(self._device_choices(),
                                                          case_sensitive=False))
                with Horizontal(classes="field"):
                    yield Label("precision")
                    yield Select[str]([(p, p) for p in catalog.PRECISIONS], value="fp32",
                                      id="f-precision", compact=True, allow_blank=False)
                for wid, label, _ in INT_FIELDS[:2]:
                    with Horizontal(classes="field"):
                        yield Label(label)
                        yield Input(id=wid, compact=True)
                with Horizontal(classes="field"):
                    yield Label("duration s")
                    yield Input(id="f-duration", compact=True)
                with Horizontal(classes="field"):
                    yield Label(INT_FIELDS[2][1])
                    yield Input(id=INT_FIELDS[2][0], compact=True)
                with Horizontal(classes="field"):
                    yield Label("image size", id="size-label")
                    yield Input(id="f-size", compact=True)
                with Horizontal(classes="field"):
                    yield Label("mode")
                    yield Select[str]([(m, m) for m in catalog.MODES], id="f-mode",
                                      compact=True, allow_blank=True, prompt="default")
                for wid, _key, label in EXTRA_INT_FIELDS:
                    with Horizontal(classes="field"):
                        yield Label(label.replace("CPU ", ""))
                        yield Input(id=wid, compact=True,
                                    placeholder="torch default" if wid == "f-threads" else "1")
                with Grid(id="flags"):
                    for wid, _key, label in FLAGS:
                        yield Checkbox(label, id=wid, compact=True)
                yield Static("", id="form-error")
                with Horizontal(id="buttons"):
                    yield Button("Run ⏎", id="run", variant="primary", compact=True)
                    yield Button("Queue ^n", id="queue", compact=True)
                    yield Button("Cancel x", id="cancel", variant="error", compact=True)
                yield Static("", id="queue-title")
                yield QueueList(id="queue-list")
            with VerticalScroll(id="bench-live") as live:
                live.border_title = "Run"
                yield Static("", id="live-title")
                yield Static("", id="live-error")
                yield ProgressBar(total=100, show_eta=False, id="live-progress")
                with Horizontal(id="live-numbers"):
                    with Vertical():
                        yield Label("now")
                        yield Digits("-", id="tp-now")
                    with Vertical():
                        yield Label("median")
                        yield Digits("-", id="tp-median")
                    with Vertical(id="overall-box"):
                        yield Label("overall")
                        yield Digits("-", id="tp-overall")
                    yield Static("", id="tp-unit")
                yield ThroughputChart(id="chart")
                yield Static("", id="callout")
                yield Static("", id="live-stats")
                yield PhaseBar(id="phases")
                yield Static("", id="telemetry")
        table = ResultsTable(id="results", cursor_type="row", zebra_stripes=True)
        table.border_title = "Results (space: mark two · c: compare)"
        yield table
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(ResultsTable)
        for label in ("✓", "STARTED", "BENCHMARK", "MODEL", "DEVICE", "PREC", "BATCH",
                      "STATUS", "THROUGHPUT", "ID"):
            table.add_column(label, key=label)
        self._restore_form()
        self.session.add_view(self._session_changed)
        catalog_list = self.query_one(CatalogList)
        catalog_list.focus()
        self.set_class(self.app.size.width < 110, "-narrow")
        self.refresh_live()
        self.refresh_queue()
        self.reload_results()

    def on_unmount(self) -> None:
        self.session.remove_view(self._session_changed)

    def on_screen_suspend(self) -> None:
        # Popped or covered: keep the form as left (children are gone by unmount time).
        with contextlib.suppress(NoMatches):
            self._save_form()

    def on_screen_resume(self) -> None:
        self.refresh_live()

    def _device_choices(self) -> list[str]:
        snap = getattr(self.app, "latest", None)
        gpus = [f"cuda:{g.index}" for g in snap.gpus] if isinstance(snap, Snapshot) else []
        return ["auto", "cpu", "cuda", *gpus]

    # --- the form ----------------------------------------------------------------------------

    def _restore_form(self) -> None:
        self._restoring = True
        opts = self.query_one(CatalogList)
        index = list(catalog.BENCHMARKS).index(self.bench_name)
        opts.highlighted = index
        self._apply_benchmark(self.bench_name)
        for wid, value in (self.session.form.get("values") or {}).items():
            try:
                widget = self.query_one(f"#{wid}")
            except NoMatches:
                continue
            if isinstance(widget, Checkbox):
                widget.value = value == "1" and not widget.disabled
            elif isinstance(widget, Input):
                widget.value = str(value or "")
            elif isinstance(widget, Select) and value is not None:
                try:
                    widget.value = value
                except Exception:  # an option that no longer exists
                    pass
        self._restoring = False
        self._update_placeholders()

    def _save_form(self) -> None:
        self.session.form = {"benchmark": self.bench_name, "values": self.form_values()}

    def form_values(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for widget in self.query("#bench-left Input"):
            assert isinstance(widget, Input)
            out[str(widget.id)] = widget.value
        for box in self.query("#bench-left Checkbox"):
            assert isinstance(box, Checkbox)
            out[str(box.id)] = "1" if box.value and not box.disabled else ""
        for sel_id, key in (("f-model", "model"), ("f-precision", "precision"),
                            ("f-mode", "mode")):
            sel = self.query_one(f"#{sel_id}", Select)
            value = sel.value
            out[key] = None if value is Select.NULL else str(value)
            out[sel_id] = out[key]
        out["device"] = out.get("f-device")
        return out

    @on(OptionList.OptionHighlighted, "#catalog")
    def _picked(self, event: OptionList.OptionHighlighted) -> None:
        name = event.option.id
        if name and name != self.bench_name:
            self._apply_benchmark(name)

    def _apply_benchmark(self, name: str) -> None:
        self.bench_name = name
        bench = catalog.get(name)
        self.query_one("#catalog-desc", Static).update(
            Text(f"{bench.description} ({bench.unit})"))
        model = self.query_one("#f-model", Select)
        if bench.models:
            model.set_options([(m, m) for m in bench.models])
            model.value = bench.default_model or bench.models[0]
            model.disabled = False
        else:
            model.set_options([])
            model.disabled = True
        size_key = size_field(bench)
        size = self.query_one("#f-size", Input)
        size.disabled = size_key is None
        if size_key is None:
            size.value = ""
        self.query_one("#size-label", Label).update(
            "seq len" if size_key == "seq_len" else "image size")
        mode = self.query_one("#f-mode", Select)
        mode.disabled = bench.kind != "infer"
        if mode.disabled:
            mode.clear()
        batch = self.query_one("#f-batch", Input)
        batch.disabled = "batch_size" not in bench.cpu and "batch_size" not in bench.cuda
        if batch.disabled:
            batch.value = ""
        self._enable_flags()
        self._set_error(None)
        self._update_placeholders()

    def _enable_flags(self) -> None:
        """Switches and extra fields only where the catalog says they apply."""
        bench = catalog.get(self.bench_name)
        mode_value = self.query_one("#f-mode", Select).value
        mode = None if mode_value is Select.NULL else str(mode_value)
        for wid, key, _label in FLAGS:
            box = self.query_one(f"#{wid}", Checkbox)
            box.disabled = not flag_applies(bench, key, mode)
            if box.disabled:
                box.value = False
        for wid, key, _label in EXTRA_INT_FIELDS:
            field = self.query_one(f"#{wid}", Input)
            field.disabled = not flag_applies(bench, key, mode)
            if field.disabled:
                field.value = ""

    def _update_placeholders(self) -> None:
        if self._restoring:
            return
        bench = catalog.get(self.bench_name)
        device = self.query_one("#f-device", Input).value.strip()
        mode_value = self.query_one("#f-mode", Select).value
        mode = None if mode_value is Select.NULL else str(mode_value)
        keys = {"f-batch": "batch_size", "f-steps": "steps", "f-duration": "duration_s",
                "f-warmup": "warmup", "f-size": size_field(bench) or ""}
        for wid, key in keys.items():
            widget = self.query_one(f"#{wid}", Input)
            widget.placeholder = default_hint(bench, key, device, mode) if key else "—"

    @on(Input.Changed, "#f-device")
    def _device_changed(self) -> None:
        self._update_placeholders()

    @on(Select.Changed, "#f-mode")
    def _mode_changed(self) -> None:
        if not self._restoring:
            self._enable_flags()  # a sweep measures throughput: not with latency mode
        self._update_placeholders()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    @on(Button.Pressed, "#run")
    def _run_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_run()

    @on(Button.Pressed, "#queue")
    def _queue_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_enqueue()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_cancel_run()

    def _set_error(self, message: str | None) -> None:
        err = self.query_one("#form-error", Static)
        err.update(Text(f"✖ {message}") if message else "")
        if message:
            # The inline line can be below the fold of the form: a toast is always seen.
            self.notify(message, severity="error", timeout=6)

    @property
    def form_error(self) -> str:
        return str(self.query_one("#form-error", Static).render())

    def build_spec(self) -> dict[str, Any] | None:
        try:
            spec = parse_form(self.bench_name, self.form_values())
        except UsageError as exc:
            self._set_error(" ".join(str(exc).split()))
            return None
        self._set_error(None)
        return spec

    # --- actions -----------------------------------------------------------------------------

    def action_run(self) -> None:
        """Start now, or behind the queue if a run is going (Enter never drops a request)."""
        self._submit()

    def action_enqueue(self) -> None:
        self._submit()

    def _submit(self) -> None:
        spec = self.build_spec()
        if spec is None:
            return
        self._save_form()
        ahead = self.session.submit(spec)
        if ahead:
            self.notify(f"Queued behind {ahead} run(s): {spec.get('benchmark')}", timeout=3)

    def action_cancel_run(self) -> None:
        if not self.session.cancel():
            self.notify("No benchmark is running", severity="warning", timeout=3)

    def action_remove_queued(self) -> None:
        queue = self.query_one(QueueList)
        index = queue.highlighted
        planned = None if index is None else self.session.remove_queued(index)
        if planned is None:
            self.notify("Nothing queued to remove", severity="warning", timeout=3)
            return
        self.notify(f"Removed from the queue: {planned.label}", timeout=3)

    def action_clear_queue(self) -> None:
        n = self.session.clear_queue()
        self.notify(f"Queue cleared ({n} removed)", timeout=3)

    def action_mark(self) -> None:
        table = self.query_one(ResultsTable)
        if table.row_count == 0:
            return
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        rid = str(row_key.value)
        if rid not in self.history:
            return
        if rid in self.marked:
            self.marked.remove(rid)
        else:
            self.marked.append(rid)
            if len(self.marked) > 2:
                self.marked.pop(0)  # keep the two most recently marked
        self._update_marks()

    def action_compare(self) -> None:
        if len(self.marked) != 2:
            self.notify("Mark two results with space, then press c", severity="warning",
                        timeout=4)
            return
        a, b = (self.history[i] for i in self.marked)
        self.app.push_screen(CompareScreen(a, b))

    # --- session → widgets -------------------------------------------------------------------

    def _session_changed(self, what: str) -> None:
        if what in ("queue", "start", "done"):
            self.refresh_queue()
        if what == "done":
            self.reload_results()
        self.refresh_live()

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        live = self.session.current
        if live is not None:
            self._track_memory(live, message.snapshot)
            self.refresh_live(message.snapshot)

    def _track_memory(self, live: LiveRun, snap: Snapshot) -> None:
        for g in snap.gpus:
            if g.index == live.gpu_index and g.mem_used_bytes is not None:
                live.gpu_mem_max = max(live.gpu_mem_max or 0, g.mem_used_bytes)

    def refresh_queue(self) -> None:
        q = self.session.queue
        title = f"Queue ({len(q)})" + (": empty" if not q else " · del: remove")
        self.query_one("#queue-title", Static).update(Text(title))
        queue = self.query_one(QueueList)
        keep = queue.highlighted
        queue.set_options([Option(f"{i}. {p.label}") for i, p in enumerate(q, 1)])
        queue.display = bool(q)
        if q:
            queue.highlighted = min(keep or 0, len(q) - 1)

    def refresh_live(self, snap: Snapshot | None = None) -> None:
        try:
            self._refresh_live(snap)
        except NoMatches:  # torn down while an update was queued
            return

    def _refresh_live(self, snap: Snapshot | None) -> None:
        live = self.session.shown
        title = self.query_one("#live-title", Static)
        if live is None:
            title.update(Text("No benchmark yet: pick one on the left, adjust the settings, "
                              "press Enter."))
            self.query_one("#live-progress", ProgressBar).update(total=100, progress=0)
            self.query_one("#telemetry", Static).update("")
            return
        title.update(self._title(live))
        bar = self.query_one("#live-progress", ProgressBar)
        frac = live.fraction
        if frac is None and live.finished:
            # Cancelled or failed: the bar stays where the run stopped (steps or seconds).
            bar.update(total=100, progress=100 * live.stopped_fraction)
        elif frac is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=100 * frac)
        self.query_one("#tp-now", Digits).update(
            _fmt_big(None if live.finished else live.current))
        median, overall = live.median, live.overall
        self.query_one("#tp-median", Digits).update(_fmt_big(median))
        self.query_one("#overall-box").display = overall is not None
        self.query_one("#tp-overall", Digits).update(_fmt_big(overall))
        self.query_one("#tp-unit", Static).update(live.unit or "")
        now = live.finished_wall or datetime.now(UTC)
        episodes = self.session.episodes_for(live)
        failed = live.finished and live.status == "failed"
        self.query_one(ThroughputChart).set_data(
            [p.throughput for p in live.points], live.throttled_flags(episodes, now),
            refs=(median, overall),
            empty_text=(NO_WINDOWS if failed else "no timed windows" if live.finished
                        else "waiting for the first window…"))
        self._callout(live, episodes, now)
        self.query_one("#live-stats", Static).update(self._stats(live))
        phases = self.query_one(PhaseBar)
        kind = catalog.get(str(live.spec.get("benchmark"))).kind
        phases.display = kind == "train"
        phases.set_phases(live.phases_ms or (live.result or {}).get("phases_ms"),
                          empty_text=("phase split: " + NO_WINDOWS) if failed
                          else "phase split: none measured" if live.finished
                          else "phase split: after the first timed steps")
        self._error_pane(live)
        self._telemetry(live, snap)

    def _title(self, live: LiveRun) -> Text:
        where = live.device_name or live.device
        head = live.planned.label + (f"  on {where}" if where else "")
        if not live.finished:
            stage = {"starting": "starting the worker…", "loading": "building the model…",
                     "cancelling": "cancelling…"}.get(live.stage, "")
            if live.stage == "warmup" and live.warmup:
                stage = f"warm-up {live.warmup[0]}/{live.warmup[1]}"
            elif live.stage == "running" and live.progress:
                p = live.progress
                if p.get("of"):
                    stage = f"step {p['step']}/{p['of']}"
                elif p.get("duration_s"):
                    stage = f"{p['elapsed_s']:.0f}/{p['duration_s']:.0f} s"
                else:
                    stage = f"step {p['step']}, {p['elapsed_s']:.0f} s"

            return Text.assemble(("▶ ", "bold"), head, ("  — " + stage, "dim"))
        doc = live.result or {}
        status = doc.get("status")
        saved = f" · saved {doc.get('id')}" if live.saved_path else " · not saved"
        styles = status_styles(self)
        bold = Style(bold=True)
        if status == "ok":
            return Text.assemble(("✓ ", styles["ok"] + bold), head,
                                 (f"  — ok, {results.fmt_throughput(doc)}{saved}", "dim"))
        if status == "cancelled":
            return Text.assemble(("■ ", styles["cancelled"] + bold), head,
                                 (f"  — cancelled (partial result){saved}", "dim"))
        return Text.assemble(("✖ ", styles["failed"] + bold), head, (f"  — failed{saved}", "dim"))

    def _callout(self, live: LiveRun, episodes: list[Any], now: datetime) -> None:
        callout = self.query_one("#callout", Static)
        attributions = live.attributions if live.finished else attribute(
            live.points, episodes, run_end=now)
        if attributions:
            callout.set_class(False, "-ok")
            callout.update(Text("\n".join(f"⚠ {a.text(live.unit)}" for a in attributions)))
        elif live.gpu_index is not None and live.points:
            callout.set_class(True, "-ok")
            callout.update("✓ no throttling on this GPU during the run")
        else:
            callout.update("")

    def _stats(self, live: LiveRun) -> Text:
        doc = live.result or {}
        bench = catalog.get(str(live.spec.get("benchmark")))
        lines: list[str] = []
        lat = doc.get("latency_ms") if isinstance(doc.get("latency_ms"), dict) else None
        if bench.kind == "infer":
            if lat:
                lines.append(f"latency  p50 {_ms(lat.get('p50'))}  p90 {_ms(lat.get('p90'))}  "
                             f"p99 {_ms(lat.get('p99'))}")
            elif live.step_ms:
                xs = live.step_ms
                lines.append(f"latency ≈ p50 {_ms(_percentile(xs, 0.5))}  "
                             f"p90 {_ms(_percentile(xs, 0.9))}  p99 {_ms(_percentile(xs, 0.99))}"
                             "  (per batch, from progress windows)")
            elif live.finished:
                lines.append(f"latency  {NA} (" + (NO_WINDOWS if live.status == "failed"
                                                   else "no timed windows") + ")")
            else:
                lines.append(f"latency  {NA} until the first timed window")
        st = doc.get("step_time_ms") if isinstance(doc.get("step_time_ms"), dict) else None
        if bench.kind != "infer" and st:
            lines.append(f"step time  p50 {_ms(st.get('p50'))}  p90 {_ms(st.get('p90'))}  "
                         f"p99 {_ms(st.get('p99'))}")
        if live.finished:
            mem = results.fmt_bytes(doc.get("peak_memory_bytes"))
        else:
            gpu_max = live.gpu_mem_max
            mem = (f"GPU memory used ≤ {results.fmt_bytes(gpu_max)} so far (all processes)"
                   if gpu_max else "known at the end")
        energy = doc.get("energy_j_per_sample")
        energy_text = NA if not isinstance(energy, int | float) else f"{energy:.4g} J"
        power = doc.get("avg_power_w")
        power_text = "" if not isinstance(power, int | float) else f"  avg power {power:.0f} W"
        lines.append(f"peak memory {mem}  energy/sample {energy_text}{power_text}")
        for p in live.sweep_points or (doc.get("points") or []):
            if not isinstance(p, dict):
                continue
            batch = f" batch {p['batch_size']}" if p.get("batch_size") else ""
            value = (f"{results.fmt_num(p.get('throughput'))} {p.get('unit') or ''}"
                     if p.get("ok", True) else f"✖ {p.get('error') or 'failed'}")
            lines.append(f"  {p.get('label')}{batch}: {value}")
        return Text("\n".join(lines))

    def _error_pane(self, live: LiveRun) -> None:
        pane = self.query_one("#live-error", Static)
        err = live.error
        if not live.finished or err is None or live.result.get("status") != "failed":  # type: ignore[union-attr]
            pane.set_class(False, "-shown")
            return
        lines = [f"✖ {err.get('kind') or 'error'}: {err.get('message') or ''}"]
        if err.get("suggestion"):
            lines.append(f"  suggestion: {err['suggestion']}")
        if err.get("exit_code") is not None or err.get("signal"):
            lines.append(f"  exit code {err.get('exit_code')}"
                         + (f" ({err['signal']})" if err.get("signal") else ""))
        tail = stderr_lines(err.get("stderr_tail") or live.stderr_tail,
                            str(err.get("message") or ""))
        if tail:
            lines.append(f"worker stderr (last {len(tail)} lines):")
            lines += [f"  | {line}" for line in tail]
        pane.update(Text("\n".join(lines)))
        pane.set_class(True, "-shown")

    def _telemetry(self, live: LiveRun, snap: Snapshot | None) -> None:
        tel = self.query_one("#telemetry", Static)
        if live.finished:
            tel.update("")
            return
        snap = snap or getattr(self.app, "latest", None)
        if live.device is None:
            tel.update("waiting for the worker to pick its device…")
            return
        if live.gpu_index is None:
            cpu = snap.host.cpu_pct if isinstance(snap, Snapshot) else None
            tel.update(f"CPU run — no GPU telemetry · host CPU "
                       f"{NA if cpu is None else f'{cpu:.0f} %'}")
            return
        gpu = None
        if isinstance(snap, Snapshot):
            gpu = next((g for g in snap.gpus if g.index == live.gpu_index), None)
        if gpu is None:
            tel.update(f"GPU {live.gpu_index}: no telemetry from the monitor")
            return

        def val(v: Any, fmt: str) -> str:
            return NA if v is None else fmt.format(v)

        text = (f"GPU {gpu.index} · util {val(gpu.util_gpu_pct, '{} %')} · "
                f"SM {val(gpu.clock_sm_mhz, '{} MHz')} · {val(gpu.temp_c, '{} °C')} · "
                f"{val(gpu.power_w, '{:.0f} W')}")
        sampler = self.session.sampler
        ongoing = sampler.ongoing().get(gpu.index) if sampler is not None else None
        if ongoing is not None:
            text += f"  ⚠ {ongoing.words}"
        tel.update(text)

    # --- results -----------------------------------------------------------------------------

    def reload_results(self) -> None:
        self.run_worker(self._load_results(), group="bench-results", exclusive=True)

    async def _load_results(self) -> None:
        # Reading every result file is disk I/O: off the event loop.
        hist = await asyncio.to_thread(results.history)
        self.history = {str(d.get("id")): d for d in hist.results}
        self.marked = [m for m in self.marked if m in self.history]
        table = self.query_one(ResultsTable)
        cursor = table.cursor_row
        table.clear()
        for d in reversed(hist.results):  # newest first
            rid = str(d.get("id"))
            status = str(d.get("status"))
            style = status_styles(self).get(status, "")
            table.add_row(
                self._mark_cell(rid), _when(d.get("started_at")), str(d.get("benchmark")),
                str(d.get("model") or "—"), str(d.get("device_name") or d.get("device")),
                str(d.get("precision")), str(d.get("batch_size") or "—"),
                Text(status, style=style), results.fmt_throughput(d), rid, key=rid)
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1), animate=False)
        for warning in hist.warnings[:3]:
            self.notify(warning, severity="warning", timeout=6)

    def _mark_cell(self, rid: str) -> str:
        if rid not in self.marked:
            return ""
        return "A" if self.marked.index(rid) == 0 else "B"

    def _update_marks(self) -> None:
        table = self.query_one(ResultsTable)
        for rid in self.history:
            try:
                table.update_cell(rid, "✓", self._mark_cell(rid))
            except Exception:  # a row not in the table (reloading)
                continue


class CompareScreen(ModalScreen[None]):
    """Two results side by side with ratios B/A (results.compare); esc closes."""

    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > .cmp--better { color: $success; }
    CompareScreen > .cmp--worse { color: $error; }
    CompareScreen > .cmp--differs { color: $warning; text-style: bold; }
    CompareScreen > .cmp--same { color: $text-muted; }
    CompareScreen > Vertical { width: 96%; height: 90%; border: round $primary;
                               background: $surface; padding: 0 1; }
    CompareScreen #cmp-metrics { height: auto; max-height: 14; }
    CompareScreen #cmp-settings { height: 1fr; }
    CompareScreen .title { text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"cmp--better", "cmp--worse", "cmp--differs",
                                              "cmp--same"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,c", "dismiss", "Close"),
    ]

    def __init__(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> None:
        super().__init__()
        self.cmp = results.compare(a, b)

    def compose(self) -> ComposeResult:
        a, b = self.cmp.a, self.cmp.b
        with Vertical() as box:
            box.border_title = "Compare results (esc closes)"
            yield Static(Text(f"A = {a.get('id')}  {a.get('benchmark')} {a.get('model') or ''}"
                              f" on {a.get('device_name') or a.get('device')}\n"
                              f"B = {b.get('id')}  {b.get('benchmark')} {b.get('model') or ''}"
                              f" on {b.get('device_name') or b.get('device')}"),
                         classes="title")
            yield DataTable(id="cmp-metrics", cursor_type="row")
            yield DataTable(id="cmp-settings", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        metrics = self.query_one("#cmp-metrics", DataTable)
        for label in ("METRIC", "A", "B", "B/A"):
            metrics.add_column(label, key=label)
        for m in self.cmp.metrics:
            if m.a is None and m.b is None:
                continue

            def fmt(v: float | None, unit: str = m.unit) -> str:
                if unit == "bytes":
                    return results.fmt_bytes(v)
                return NA if v is None else f"{results.fmt_num(v)} {unit}"

            style = ratio_style(self, m.better, m.ratio)
            metrics.add_row(m.name, fmt(m.a), fmt(m.b),
                            Text(results.fmt_ratio(m.ratio), style=style))
        settings = self.query_one("#cmp-settings", DataTable)
        for label in ("SETTING", "A", "B"):
            settings.add_column(label, key=label)
        rows = sorted(self.cmp.settings, key=lambda s: not s.differs)
        # Long prose values (shapes, sync, ...) would push B off-screen: each value gets
        # half of what is left beside the names, cut with an ellipsis.
        name_w = max([len("SETTING"), *(len(s.name) for s in rows)])
        box_w = int(self.app.size.width * 0.96) - 4  # border and padding
        value_w = max(8, (box_w - name_w - 3 * 2 - 2) // 2)  # cell padding, scrollbar
        differs = self.get_component_rich_style("cmp--differs", partial=True)
        same = self.get_component_rich_style("cmp--same", partial=True)
        for s in rows:
            style = differs if s.differs else same
            settings.add_row(Text(s.name, style=style),
                             Text(clip(_plain(s.a), value_w), style=style),
                             Text(clip(_plain(s.b), value_w), style=style))
        metrics.focus()


def stderr_lines(tail: Any, message: str = "") -> list[str]:
    """The last lines of the worker's stderr worth reading: no caret-only marker lines
    (`^^^^`), not the error message again (the pane's first line), at most
    STDERR_LINES_SHOWN."""
    if not isinstance(tail, list | tuple):
        return []
    msg = message.strip()
    out = [str(line).rstrip() for line in tail
           if str(line).strip() and not CARETS.match(str(line))
           and not (msg and str(line).strip() == msg)]
    return out[-STDERR_LINES_SHOWN:]


def clip(text: str, width: int) -> str:
    """At most `width` cells, with … when cut."""
    t = Text(text, no_wrap=True)
    t.truncate(max(1, width), overflow="ellipsis")
    return t.plain


def ratio_style(widget: Any, better: str | None, ratio: float | None) -> Style | str:
    """B/A colour from the theme: $success when B is better, $error when worse, plain
    within ±NOISE (run-to-run noise is not a difference)."""
    if better is None or ratio is None or abs(ratio - 1.0) <= NOISE:
        return ""
    return widget.get_component_rich_style(
        "cmp--better" if better == "b" else "cmp--worse", partial=True)


def _plain(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, default=str)
    return str(value)


def toggle_bench_screen(app: App[Any]) -> None:
    """The app's `b`: open the benchmark screen, or go back from it."""
    if isinstance(app.screen, BenchScreen):
        app.pop_screen()
        return
    app.push_screen(BenchScreen(bench_session(app)))
