"""An AMD GPU's name from its PCI device id (and revision, where one id covers several
cards), for cards whose driver has no `product_name` file.

From libdrm's data/amdgpu.ids (the marketing names ROCm and Mesa show; "74A1, 00, AMD
Instinct MI300X") and pci.ids ("740f  Aldebaran/MI200 [Instinct MI210]"). A card not
listed is "AMD GPU 0x<id>".
"""

from __future__ import annotations

# device id → name, for every revision of it
_BY_DEVICE: dict[int, str] = {
    0x738C: "AMD Instinct MI100",
    0x738E: "AMD Instinct MI100",
    0x7408: "AMD Instinct MI250X",
    0x740C: "AMD Instinct MI250X / MI250",  # one id for both: their product_name tells
    0x740F: "AMD Instinct MI210",
    0x74A0: "AMD Instinct MI300A",
    0x74A1: "AMD Instinct MI300X",
    0x74A2: "AMD Instinct MI308X",
    0x74A5: "AMD Instinct MI325X",
    0x74A9: "AMD Instinct MI300X HF",
    0x74BD: "AMD Instinct MI300X HF",
    0x74B5: "AMD Instinct MI300X VF",
    0x75A0: "AMD Instinct MI350X",
    0x75A3: "AMD Instinct MI355X",
    0x7448: "AMD Radeon Pro W7900",
    0x744C: "AMD Radeon RX 7900 XT/7900 XTX",  # pci.ids' name when the revision is unknown
}
# (device id, revision) → name, where one device id is several cards
_BY_REVISION: dict[tuple[int, int], str] = {
    (0x744C, 0xC8): "AMD Radeon RX 7900 XTX",
    (0x744C, 0xCC): "AMD Radeon RX 7900 XT",
    (0x744C, 0xCE): "AMD Radeon RX 7900 GRE",
    (0x744C, 0xCF): "AMD Radeon RX 7900M",
    (0x7550, 0xC0): "AMD Radeon RX 9070 XT",
    (0x7550, 0xC3): "AMD Radeon RX 9070",
}


def name_of(device_id: int | None, revision: int | None) -> str:
    if device_id is None:
        return "AMD GPU"
    if revision is not None and (device_id, revision) in _BY_REVISION:
        return _BY_REVISION[device_id, revision]
    return _BY_DEVICE.get(device_id, f"AMD GPU 0x{device_id:04x}")
