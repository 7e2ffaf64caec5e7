"""What `gputui doctor --quick` must report for the shipped doctor scenarios."""

from __future__ import annotations

P, W, F, S = "pass", "warn", "fail", "skip"

_CONFIG = ("pcie_width", "pcie_gen", "persistence_mode", "power_limit", "app_clocks",
           "ecc_mode", "mig_mode", "compute_mode")
_HEALTH = ("remapped_rows", "retired_pages", "ecc_volatile", "ecc_aggregate",
           "throttle_idle", "temp_headroom", "fan")


def _all(gpu: int, status: str) -> dict[tuple[int | None, str], str]:
    return {(gpu, cid): status for cid in (*_CONFIG, "vbios", *_HEALTH, "xid")}


CLEAN: dict[tuple[int | None, str], str] = {(None, "driver"): P, **_all(0, P), **_all(1, P)}

# tests/fakenvml/scenarios/doctor_faults.conf, check by check.
FAULTS: dict[tuple[int | None, str], str] = {
    (None, "driver"): P,
    **_all(0, P),
    (0, "pcie_width"): F, (0, "pcie_gen"): W, (0, "persistence_mode"): W,
    (0, "power_limit"): F, (0, "app_clocks"): W, (0, "throttle_idle"): F, (0, "xid"): F,
    **_all(1, P),
    (1, "mig_mode"): W, (1, "compute_mode"): W, (1, "vbios"): W, (1, "remapped_rows"): F,
    (1, "retired_pages"): W, (1, "ecc_volatile"): F, (1, "ecc_aggregate"): W,
    (1, "temp_headroom"): F, (1, "fan"): W,
    **_all(2, P),
    (2, "ecc_mode"): F, (2, "compute_mode"): F, (2, "remapped_rows"): F,
    (2, "retired_pages"): F, (2, "ecc_volatile"): S, (2, "ecc_aggregate"): S,
    (2, "throttle_idle"): F,
    **_all(3, P),
    (3, "mig_mode"): S, (3, "fan"): S, (3, "xid"): S,
}
