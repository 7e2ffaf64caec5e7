"""gputui: a terminal GPU monitor that explains throttling, with built-in benchmarks."""

__version__ = "0.1.0"
