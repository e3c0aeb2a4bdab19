"""The class of CPU a float result was computed on, for the bit-exact fixture checks (keras-free).

XLA, oneDNN and PyTorch pick their kernels by instruction set, so the same float32 model differs in the last bits
from one kind of CPU to another: tests/test_fixtures.py compares bit for bit only on the class it recorded.
"""

import platform

# The float instruction sets the frameworks dispatch on, widest first.
INSTRUCTION_SETS = (
    ("amx", {"amx_tile", "amx_bf16"}),
    ("avx512-bf16", {"avx512f", "avx512_bf16"}),
    ("avx512", {"avx512f"}),
    ("avx2", {"avx2", "fma"}),
    ("baseline", set()),
)


def cpu_class(cpuinfo="/proc/cpuinfo"):
    """`vendor-isa`, e.g. `AuthenticAMD-avx2`; `platform.machine()` off x86 or without `/proc/cpuinfo`."""
    try:
        with open(cpuinfo) as file:
            lines = file.read().splitlines()
    except OSError:
        return platform.machine()
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "flags" not in fields:
        return platform.machine()
    flags = set(fields["flags"].split())
    isa = next(name for name, needed in INSTRUCTION_SETS if needed <= flags)
    return f"{fields.get('vendor_id', 'unknown')}-{isa}"


if __name__ == "__main__":
    print(cpu_class())
