"""Errors that end a command with a one-line message instead of a traceback."""


class GputuiError(Exception):
    """A runtime failure the user should read: printed as `gputui: msg`, exit 1."""

    exit_code = 1


class UsageError(GputuiError):
    """Bad input on the command line or in a file the user named: exit 2."""

    exit_code = 2
