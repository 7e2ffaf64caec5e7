"""The keys that work on every screen (the app's actions), defined once: the app binds
them, and the monitor screen lists them among its own keys, in its footer's order.

A key that only means something on the monitor (compact, window, sort, signal, the
replay's seek and jump, which on other screens are their tables' arrows) is bound by
the monitor screen alone (gputui/ui/screens/monitor.py).
"""

from __future__ import annotations

from textual.binding import Binding

QUIT = Binding("q", "app.quit", "Quit")
# As in top, htop, nvtop and nvitop (Textual's default only says "press ctrl+q").
# Not a priority binding: a focused text field keeps ctrl+c for copying.
CTRL_C_QUIT = Binding("ctrl+c", "app.quit", "Quit", show=False)
# As in less, vim and shells: repaint after another program wrote over the screen.
REDRAW = Binding("ctrl+l", "app.redraw", "Redraw", show=False)
HELP = Binding("question_mark", "app.help", "Help")
ALERTS = Binding("a", "app.alerts", "Alerts")
BENCHMARKS = Binding("b", "app.benchmarks", "Benchmarks")
DOCTOR = Binding("d", "app.doctor", "Doctor")
THEME = Binding("t", "app.cycle_theme", "Theme")
GPU_INFO = Binding("i", "app.gpu_detail", "GPU info")
HISTORY = Binding("h", "app.history", "History")  # last in the footer: the first cut when narrow
# Replay only (the app's check_action disables them live), each a move of
# ReplayController.move. Space is a priority binding: the process table would otherwise
# take it.
PLAY_PAUSE = Binding("space", "app.replay('toggle')", "Play/Pause", priority=True)
STEP = Binding("full_stop", "app.replay('step', 1)", "Step", show=False)
STEP_BACK = Binding("comma", "app.replay('step', -1)", "Step back", show=False)
FASTER = Binding("right_square_bracket", "app.replay('speed', 2.0)", "Faster")
SLOWER = Binding("left_square_bracket", "app.replay('speed', 0.5)", "Slower", show=False)

EVERY_SCREEN = [QUIT, CTRL_C_QUIT, REDRAW, HELP, ALERTS, BENCHMARKS, DOCTOR, THEME, GPU_INFO,
                HISTORY, PLAY_PAUSE, STEP, STEP_BACK, FASTER, SLOWER]
