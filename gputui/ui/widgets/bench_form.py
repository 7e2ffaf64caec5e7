"""The benchmark form: the catalog, the settings (empty means the catalog default, shown
as the placeholder), the switches that apply, the buttons and the queue. It turns what was
typed into a validated run request with the catalog's own checks, so the TUI and the CLI reject
the same things."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.suggester import SuggestFromList
from textual.widgets import Button, Checkbox, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from gputui.bench import catalog
from gputui.bench.deepbench import problems
from gputui.bench.request import RunRequest, make_request
from gputui.bench.run_queue import Planned
from gputui.errors import UsageError
from gputui.telemetry.model import Snapshot

# Form fields: (widget id, label, spec key). Empty means "the catalog default".
INT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("f-batch", "batch size", "batch_size"),
    ("f-steps", "steps", "steps"),
    ("f-warmup", "warm-up", "warmup"),
)


def parse_form(bench_name: str, values: Mapping[str, str | None]) -> RunRequest:
    """Form text → a validated run request. Raises UsageError with one line."""
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
    for wid, key, _label, _choices in CHOICE_FIELDS:
        # As the CLI's flags: the catalog checks the choice (make_request, below).
        if values.get(wid) and catalog_names(bench, key):
            kw[key] = values[wid]
    for wid, key, label in PARAM_FIELDS:
        text = (values.get(wid) or "").strip()
        if text and catalog_names(bench, key):
            try:
                kw.setdefault("params", {})[key] = int(text)
            except ValueError:
                raise UsageError(f"{label} must be a whole number, got {text!r}") from None
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
    return make_request(bench_name, **kw)


# Switches (Checkbox id, spec key, label) and extra whole-number fields (Input id, spec
# key, label); each is enabled only for the benchmarks it applies to (flag_applies).
FLAGS: tuple[tuple[str, str, str], ...] = (
    ("f-sweep", "sweep", "batch sweep"),
    ("f-channels-last", "channels_last", "channels-last"),
    ("f-compile", "compile", "torch.compile"),
    ("f-profile", "profile", "profile"),
)
# A benchmark's own choices (Select id, spec key, label, choices), shown only for the
# benchmarks whose catalog defaults name the key (deepbench's --op, --set and --shapes);
# blank means the catalog default, shown as the prompt.
CHOICE_FIELDS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("f-op", "op", "op", problems.OP_CHOICES),
    ("f-set", "problem_set", "set", problems.SETS),
    ("f-shapes", "shape_set", "shapes", problems.SHAPE_SETS),
)
# A benchmark's own whole-number parameters (Input id, params key, label), shown only for
# the benchmarks whose catalog defaults name the key.
PARAM_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("f-prompt-len", "prompt_len", "prompt len"),
    ("f-new-tokens", "new_tokens", "new tokens"),
)
EXTRA_INT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("f-threads", "threads", "CPU threads"),
    ("f-nproc", "nproc", "processes"),
)


def catalog_names(bench: catalog.Benchmark, key: str) -> bool:
    """Whether the catalog's defaults for this benchmark name `key`: a setting of its own."""
    return key in bench.cpu or key in bench.cuda


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


# What the device field can hold while it is typed: a prefix of auto, cpu, cuda or cuda:N.
DEVICE_PREFIX = re.compile(r"a(u(t(o)?)?)?|c(p(u)?|u(d(a(:\d*)?)?)?)?")


def device_prefix(text: str) -> bool:
    """Whether `text` can still become a device name (the bench screen lets c type there)."""
    return DEVICE_PREFIX.fullmatch(text.strip().lower()) is not None


def size_field(bench: catalog.Benchmark) -> str | None:
    for key in ("image_size", "seq_len"):
        if key in bench.cpu or key in bench.cuda:
            return key
    return None


def default_hint(bench: catalog.Benchmark, key: str, device: str, mode: str | None) -> str:
    """The placeholder: the catalog default for this device (both when device is auto, once
    when they agree)."""
    kinds = ("cpu", "cuda") if device in ("", "auto") else (
        ("cuda",) if device.startswith("cuda") else ("cpu",))
    parts = []
    for kind in kinds:
        value = bench.defaults(kind, mode).get(key)
        if value is None:
            continue
        parts.append((f"{value:g} s" if key == "duration_s" else str(value),
                      "gpu" if kind == "cuda" else kind))
    if len(parts) == len(kinds) and len({text for text, _kind in parts}) == 1:
        return parts[0][0]  # the same on every device it may run on: said once
    return " · ".join(f"{text} {kind}" for text, kind in parts) if parts else "—"


# The bench screen's own letter keys; a form field gives them up (FormField).
SCREEN_LETTERS = frozenset("xXmc")


class FormField(Input):
    """A compact text field that leaves the screen's letter keys to the screen, except
    where the letter can be part of its value (c in "cpu"/"cuda" in the device field):
    Textual drops a binding from the chain when the focused widget consumes its key."""

    def check_consume_key(self, key: str, character: str | None) -> bool:
        if character in SCREEN_LETTERS:
            if self.id != "f-device":
                return False
            pos = self.cursor_position
            return device_prefix(self.value[:pos] + character + self.value[pos:])
        return super().check_consume_key(key, character)


class OnOffBox(Checkbox):
    """A checkbox whose state is a shape, not only a colour: ✓ when on, blank when off
    (Textual's draws an X in both states and tells them apart by colour alone)."""

    @property  # type: ignore[override]
    def BUTTON_INNER(self) -> str:  # the name Textual's ToggleButton reads
        return "✓" if self.value else " "


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


class BenchForm(VerticalScroll):
    """The left pane of the bench screen. Its buttons' presses bubble to the screen."""

    def __init__(self, *, id: str | None = None, snapshot: Snapshot | None = None) -> None:
        super().__init__(id=id)
        self.snapshot = snapshot  # the latest reading: its GPUs are the device choices
        self.bench_name = next(iter(catalog.BENCHMARKS))
        self._restoring = False

    def compose(self) -> ComposeResult:
        yield CatalogList(*[Option(f"{b.name:<18} {b.unit}", id=b.name)
                            for b in catalog.BENCHMARKS.values()], id="catalog")
        yield Static("", id="catalog-desc")
        yield Static("Settings (empty: default)", classes="section")
        with Horizontal(classes="field"):
            yield Label("model")
            yield Select[str]([], id="f-model", compact=True, allow_blank=True,
                              prompt="—")
        for wid, _key, label, choices in CHOICE_FIELDS:
            with Horizontal(classes="field"):
                yield Label(label)
                yield Select[str]([(c, c) for c in choices], id=wid, compact=True,
                                  allow_blank=True, prompt="default")
        with Horizontal(classes="field"):
            yield Label("device")
            yield FormField(placeholder="auto", id="f-device", compact=True,
                        suggester=SuggestFromList(self._device_choices(),
                                                  case_sensitive=False))
        with Horizontal(classes="field"):
            yield Label("precision")
            yield Select[str]([(p, p) for p in (*catalog.PRECISIONS, catalog.AUTO_PRECISION)],
                              value="fp32",
                              id="f-precision", compact=True, allow_blank=False)
        for wid, label, _ in INT_FIELDS[:2]:
            with Horizontal(classes="field"):
                yield Label(label)
                yield FormField(id=wid, compact=True)
        with Horizontal(classes="field"):
            yield Label("duration s")
            yield FormField(id="f-duration", compact=True)
        with Horizontal(classes="field"):
            yield Label(INT_FIELDS[2][1])
            yield FormField(id=INT_FIELDS[2][0], compact=True)
        with Horizontal(classes="field"):
            yield Label("image size", id="size-label")
            yield FormField(id="f-size", compact=True)
        with Horizontal(classes="field"):
            yield Label("mode")
            yield Select[str]([(m, m) for m in catalog.MODES], id="f-mode",
                              compact=True, allow_blank=True, prompt="default")
        for wid, _key, label in PARAM_FIELDS:
            with Horizontal(classes="field"):
                yield Label(label)
                yield FormField(id=wid, compact=True)
        for wid, _key, label in EXTRA_INT_FIELDS:
            with Horizontal(classes="field"):
                yield Label(label.replace("CPU ", ""))
                yield FormField(id=wid, compact=True,
                            placeholder="torch default" if wid == "f-threads" else "1")
        with Grid(id="flags"):
            for wid, _key, label in FLAGS:
                yield OnOffBox(label, id=wid, compact=True)
        yield Static("", id="form-error")
        with Horizontal(id="buttons"):
            yield Button("Run ⏎", id="run", variant="primary", compact=True)
            yield Button("Queue ^n", id="queue", compact=True)
            yield Button("Cancel x", id="cancel", variant="error", compact=True)
        yield Static("", id="queue-title")
        yield QueueList(id="queue-list")

    def on_mount(self) -> None:
        self.border_title = "Run a benchmark"

    def show_queue(self, queue: list[Planned]) -> None:
        title = f"Queue ({len(queue)})" + (": empty" if not queue else " · del: remove")
        self.query_one("#queue-title", Static).update(Text(title))
        lst = self.query_one(QueueList)
        keep = lst.highlighted
        lst.set_options([Option(Text(f"{i}. {p.label}")) for i, p in enumerate(queue, 1)])
        lst.display = bool(queue)
        if queue:
            lst.highlighted = min(keep or 0, len(queue) - 1)

    def _device_choices(self) -> list[str]:
        snap = self.snapshot
        gpus = [f"cuda:{g.index}" for g in snap.gpus] if snap is not None else []
        return ["auto", "cpu", "cuda", *gpus]

    def restore(self, form: Mapping[str, Any]) -> None:
        """The form as the user last left it (kept by the session across visits)."""
        self.bench_name = str(form.get("benchmark") or self.bench_name)
        self._restoring = True
        opts = self.query_one(CatalogList)
        index = list(catalog.BENCHMARKS).index(self.bench_name)
        opts.highlighted = index
        self._apply_benchmark(self.bench_name)
        for wid, value in (form.get("values") or {}).items():
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

    def saved(self) -> dict[str, Any]:
        return {"benchmark": self.bench_name, "values": self.form_values()}

    def form_values(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for widget in self.query(Input):
            assert isinstance(widget, Input)
            out[str(widget.id)] = widget.value
        for box in self.query(Checkbox):
            assert isinstance(box, Checkbox)
            out[str(box.id)] = "1" if box.value and not box.disabled else ""
        for sel_id, key in (("f-model", "model"), ("f-precision", "precision"),
                            ("f-mode", "mode")):
            sel = self.query_one(f"#{sel_id}", Select)
            value = sel.value
            out[key] = None if value is Select.NULL else str(value)
            out[sel_id] = out[key]
        for wid, _key, _label, _choices in CHOICE_FIELDS:
            value = self.query_one(f"#{wid}", Select).value
            out[wid] = None if value is Select.NULL else str(value)
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
            if bench.default_model is not None:
                model.value = bench.default_model
            else:
                model.clear()  # blank: the device's default model (a tiny one on the CPU)
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
        prec = self.query_one("#f-precision", Select)
        if not self._restoring:
            # lm-*/attention default to bf16 on CUDA and fp32 on the CPU ("auto"); "auto"
            # means fp32 elsewhere, so it is put back to that when another one is picked.
            if "precision" in bench.cuda:
                prec.value = catalog.AUTO_PRECISION
            elif prec.value == catalog.AUTO_PRECISION:
                prec.value = "fp32"
        # A benchmark's own fields are shown only where they apply: every other
        # benchmark's form stays short.
        for wid, key, _label, _choices in CHOICE_FIELDS:
            choice = self.query_one(f"#{wid}", Select)
            choice.disabled = not catalog_names(bench, key)
            if choice.parent is not None:
                choice.parent.display = not choice.disabled
            if choice.disabled:
                choice.clear()
        for wid, key, _label in PARAM_FIELDS:
            field = self.query_one(f"#{wid}", Input)
            field.disabled = not catalog_names(bench, key)
            if field.parent is not None:
                field.parent.display = not field.disabled
            if field.disabled:
                field.value = ""
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
                "f-warmup": "warmup", "f-size": size_field(bench) or "",
                **{wid: key for wid, key, _label in PARAM_FIELDS}}
        for wid, key in keys.items():
            widget = self.query_one(f"#{wid}", Input)
            widget.placeholder = default_hint(bench, key, device, mode) if key else "—"
        for wid, key, _label, _choices in CHOICE_FIELDS:
            # "default (all)": the default is also one of the choices, listed beside it.
            hint = default_hint(bench, key, device, mode)
            self.query_one(f"#{wid}", Select).prompt = f"default ({hint})"

    @on(Input.Changed, "#f-device")
    def _device_changed(self) -> None:
        self._update_placeholders()

    @on(Select.Changed, "#f-mode")
    def _mode_changed(self) -> None:
        if not self._restoring:
            self._enable_flags()  # a sweep measures throughput: not with latency mode
        self._update_placeholders()

    def _set_error(self, message: str | None) -> None:
        err = self.query_one("#form-error", Static)
        err.update(Text(f"✖ {message}") if message else "")
        if message:
            # The inline line can be below the fold of the form: a toast is always seen.
            self.notify(message, severity="error", timeout=6)

    @property
    def form_error(self) -> str:
        return str(self.query_one("#form-error", Static).render())

    def build_request(self) -> RunRequest | None:
        try:
            request = parse_form(self.bench_name, self.form_values())
        except UsageError as exc:
            self._set_error(" ".join(str(exc).split()))
            return None
        self._set_error(None)
        return request
