"""The class of CPU a float result was computed on, for the bit-exact fixture checks (keras-free).

The same float32 model gives results that differ in the last bits from one kind of CPU to another (XLA, oneDNN and
PyTorch pick their kernels by instruction set), so tests/test_fixtures.py compares bit for bit only on the CPU class
its outputs were recorded on.
"""

import platform


def cpu_class(cpuinfo="/proc/cpuinfo"):
    """`vendor-isa`, e.g. `AuthenticAMD-avx2`: the widest float instruction set the frameworks dispatch on (`amx`,
    `avx512-bf16`, `avx512`, `avx2`, `baseline`); `platform.machine()` off x86 or without `/proc/cpuinfo`."""
    try:
        with open(cpuinfo) as file:
            text = file.read()
    except OSError:
        return platform.machine() or "unknown"
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "flags" not in fields:
        return platform.machine() or "unknown"
    flags = set(fields["flags"].split())
    isa = next(
        name
        for name, needed in (
            ("amx", {"amx_tile", "amx_bf16"}),
            ("avx512-bf16", {"avx512f", "avx512_bf16"}),
            ("avx512", {"avx512f"}),
            ("avx2", {"avx2", "fma"}),
            ("baseline", set()),
        )
        if needed <= flags
    )
    return f"{fields.get('vendor_id', 'unknown')}-{isa}"


if __name__ == "__main__":
    print(cpu_class())
