"""Alert events sent to webhooks, a command or the terminal, off the sampler's thread.

events.py derives the events from the alert engine's frames; sinks.py delivers them;
notifier.py owns the queues and worker threads; cli.py holds the --notify-* flags. No
textual here: the terminal sink lives in gputui.ui.terminal_notify.
"""
