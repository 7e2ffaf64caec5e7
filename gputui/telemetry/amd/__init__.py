"""AMD GPUs from amdgpu's kernel files: sysfs, hwmon, gpu_metrics, fdinfo and KFD."""

from gputui.telemetry.amd.source import AmdSource

__all__ = ["AmdSource"]
