"""The benchmark's child process: `python -m gputui.bench.worker --spec-json '<JSON>'`.

Everything that imports torch or torchvision lives in this package (a test enforces it);
the parent side (`gputui.bench`: catalog, runner, run queue, results) never imports from
here. The entry point is `main.main`; one module per benchmark kind under `kinds/`.
"""
