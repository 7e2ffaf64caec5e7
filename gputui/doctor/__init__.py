"""`gputui doctor`: configuration, health and performance checks of every GPU."""
