"""Dense peak rates per device, from the vendors' datasheets (sources beside each row).

The percentage of peak in a report is against these numbers; measured ceilings (shared/anchors) are
lower, so a kernel at 80% of datasheet peak is near the practical limit."""

# TFLOP/s, dense (no sparsity)
PEAKS = {
    "H100": {"bf16": 989.4, "fp8": 1978.9,
             "source": "NVIDIA H100 SXM datasheet (nvidia.com/en-us/data-center/h100), dense"},
    "H200": {"bf16": 989.4, "fp8": 1978.9,
             "source": "NVIDIA H200 SXM datasheet (nvidia.com/en-us/data-center/h200), dense; same core as H100"},
    "MI300X": {"bf16": 1307.4, "fp8": 2614.9,
               "source": "AMD Instinct MI300X datasheet (amd.com), dense"},
    "MI325X": {"bf16": 1307.4, "fp8": 2614.9,
               "source": "AMD Instinct MI325X datasheet (amd.com), dense"},
    "MI355X": {"bf16": 2516.6, "fp8": 5033.2,
               "source": "AMD Instinct MI355X datasheet (amd.com), dense"},
}

DEVICES = tuple(PEAKS)


# other parts of one name, with other clocks and power, hence other peaks: their own columns
VARIANTS = ("PCIE", "NVL")


def device_key(name: str) -> str:
    """Map a torch device name ('NVIDIA H200', 'NVIDIA H100 80GB HBM3', 'AMD Instinct MI300X') to a PEAKS
    key by whole words, or the name itself: 'NVIDIA GH200 480GB' is not an H200, and an 'H100 PCIe' or
    'H100 NVL' does not have the SXM part's peak."""
    words = name.upper().replace("-", " ").split()
    if any(v in words for v in VARIANTS):
        return name
    for key in PEAKS:
        if key in words:
            return key
    return name


# which peak a kernel's TFLOP/s are measured against (its tensor-core input type)
KERNEL_KIND = {"gemm_fp8": "fp8", "gemm_fp8_rowwise": "fp8"}


def peak(device: str, kind: str = "bf16"):
    row = PEAKS.get(device_key(device))
    return None if row is None else row.get(kind)
