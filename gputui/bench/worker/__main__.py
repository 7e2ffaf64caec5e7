"""`python -m gputui.bench.worker`: the child process a benchmark runs in."""

import sys

from gputui.bench.worker.main import main

# Spawned DDP ranks import this module again as __mp_main__: only the real entry runs.
if __name__ == "__main__":
    sys.exit(main())
