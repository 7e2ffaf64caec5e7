"""Yes/no modal used before signalling a process. Its keys are shown on the buttons (as
plain text: "[y]" is not markup), and a "no" always says what happened (nothing)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: auto; max-width: 90%; height: auto;
        border: thick $error; background: $surface; padding: 1 2;
    }
    ConfirmScreen .question { width: auto; max-width: 76; margin-bottom: 1; }
    ConfirmScreen Horizontal { height: auto; width: auto; }
    ConfirmScreen Button { margin-right: 2; }
    """

    BINDINGS = [  # noqa: RUF012 (Textual's convention)
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, yes_label: str = "Yes",
                 no_message: str = "Cancelled: nothing was sent") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label
        self.no_message = no_message

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, classes="question", markup=False)
            with Horizontal():
                yield Button(Content(f"{self.yes_label} [y]"), variant="error", id="yes")
                yield Button(Content("Cancel [n]"), variant="default", id="no")

    def on_mount(self) -> None:
        # Cancel has the focus: Enter on a surprise dialog must not kill anything.
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_answer(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        if not yes:
            # Enter on the focused Cancel, n or esc: closing silently leaves the user
            # wondering whether the signal went out.
            self.app.notify(self.no_message, timeout=4, markup=False)
        self.dismiss(yes)
