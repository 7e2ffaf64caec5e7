"""Yes/no modal used before signalling a process."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
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

    def __init__(self, question: str, yes_label: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, classes="question", markup=False)
            with Horizontal():
                yield Button(f"{self.yes_label} [y]", variant="error", id="yes")
                yield Button("Cancel [n]", variant="default", id="no")

    def on_mount(self) -> None:
        # Cancel has the focus: Enter on a surprise dialog must not kill anything.
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
