"""`python -m benchmarks.xla_cpu_depth` on tiny sizes (jax run): the measurements' shape, the profile's reading, the
argument check. No timing is asserted."""

import keras
import pytest

from benchmarks import xla_cpu_depth

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="XLA's CPU compiler through JAX: the jax run")


def test_both_measurements_at_two_depths_fill_the_table():
    rows = [
        dict(
            depth=depth,
            **xla_cpu_depth.residual_network_ms(depth, hidden=16, tokens=5, repeats=1),
            **xla_cpu_depth.keras_vit_step(depth, hidden=64, image_size=32, repeats=1),
        )
        for depth in (1, 2)
    ]
    for row in rows:
        assert row["gradient_ms_per_block"] > 0 and row["forward_ms_per_block"] > 0 and row["step_s"] > 0
        assert 0 <= row["copy_fusion_share"] <= 1 and 0 < row["product_share"] <= 1  # the Dense layers are products
        assert row["copy_fusion_share"] + row["product_share"] <= 1 + 1e-9
    table = xla_cpu_depth.format_table(rows).splitlines()
    assert len(table) == 4 and table[2].startswith("| 1 |") and table[3].startswith("| 2 |")


def test_the_profile_attributes_xla_time_to_kinds_of_op():
    import jax
    import jax.numpy as jnp

    transpose_and_add = jax.jit(lambda x: x.T + 1.0)
    x = jnp.ones((256, 512))
    transpose_and_add(x).block_until_ready()  # compiled outside the profile
    by_kind = xla_cpu_depth.xla_time_by_kind(lambda: transpose_and_add(x).block_until_ready())
    assert by_kind and sum(by_kind.values()) > 0
    assert not any(kind[-1].isdigit() and "." in kind for kind in by_kind)  # numbered fusions counted by kind


def test_depths_must_be_positive_integers(capsys):
    assert xla_cpu_depth.main(["--depths", "4,x"]) == 2
    assert xla_cpu_depth.main(["--depths", "0"]) == 2
    assert "--depths must be positive integers separated by commas" in capsys.readouterr().err
