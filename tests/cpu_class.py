"""The class of CPU a float result was computed on, for the bit-exact checks (keras-free).

The same float32 model gives results that differ in the last bits from one kind of CPU to another: XLA
vectorizes for the host's widest instruction set, TensorFlow turns its oneDNN kernels on by default only on Intel
CPUs with AVX-512, and PyTorch's kernels pick their code path by instruction set too. Measured on the `.keras`
fixtures (tests/test_fixtures.py): recorded on an AMD EPYC (AVX2), read back on an Intel Xeon with AVX-512 BF16
they differ by up to 4.5e-8. Outputs are therefore recorded per CPU class and compared bit for bit only on the class
they were recorded on.
"""

import platform


def cpu_class(cpuinfo="/proc/cpuinfo"):
    """`vendor-isa` of this machine's CPU, e.g. `AuthenticAMD-avx2` or `GenuineIntel-avx512-bf16`.

    The instruction-set part is the widest float one the frameworks dispatch on: `amx`, `avx512-bf16`, `avx512`,
    `avx2` or `baseline`. Off x86 (or without `/proc/cpuinfo`) it is `platform.machine()`.
    """
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
