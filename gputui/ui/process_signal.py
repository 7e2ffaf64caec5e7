"""`k` / `K`: sending SIGTERM or SIGKILL to the selected GPU process, after a question.

The checks (is it still the process that was listed, may we signal it) are
gputui.telemetry.procctl's; this module words the question and the outcome.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from gputui.safe_text import printable
from gputui.telemetry import procctl
from gputui.telemetry.model import GpuProcess

SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


@dataclass(frozen=True, slots=True)
class SignalRequest:
    proc: GpuProcess
    name: str  # "TERM" or "KILL"

    @property
    def signame(self) -> str:
        return f"SIG{self.name}"

    def refused(self) -> str | None:
        """Why the signal cannot be sent (the process is gone, not ours...), or None."""
        reason = procctl.check_signal(self.proc.pid, expected_start=self.proc.started)
        if reason is None:
            return None
        return f"Cannot send {self.signame} to PID {self.proc.pid}: {reason}"

    def question(self) -> str:
        # The command line and user are anyone's: escaped (and never read as markup).
        p = self.proc
        command = printable((p.command or "?")[:200])
        user = printable(p.user or "unknown user")
        return f"Send {self.signame} to PID {p.pid} ({user}) on GPU {p.gpu_index}?\n\n{command}"

    def cancelled(self) -> str:
        return f"Cancelled: {self.signame} not sent to PID {self.proc.pid}"

    def send(self) -> tuple[str, bool]:
        """Send it; (what happened, whether it was sent)."""
        error = procctl.send_signal(self.proc.pid, SIGNALS[self.name],
                                    expected_start=self.proc.started)
        if error is not None:
            return f"{self.signame} to PID {self.proc.pid} failed: {error}", False
        return f"Sent {self.signame} to PID {self.proc.pid}", True
