"""`python -m benchmarks.xla_cpu_depth`: how a JAX training step's time per block grows with depth on XLA's CPU.

A step's cost should be linear in the number of transformer blocks. On jaxlib 0.10's CPU compiler it is not when
the products are 3-D: for each weight gradient XLA copies a cotangent into a transposed layout, and it fuses into
that copy the whole chain of LayerNorm-backward and residual additions that produced the cotangent, from every later
block. The fused loops grow with depth, so the step's time per block does too. keras_vit's blocks run their Dense
layers on 2-D tokens (`keras_vit.layers.transformer.dense_over_tokens`), which avoids it. Two measurements at each
depth, both float32, one process:

- a plain-JAX residual network with 3-D products (`x + (LayerNorm(x) @ W)`, two per block, hidden 768, 8 x 197
  tokens): the gradient's and the forward pass's milliseconds per block, the compiler's behaviour with no keras_vit
  code involved;
- keras_vit's own training step (`VisionTransformer` with B/16's width, `jit_compile=True`, SGD, batch 8): seconds
  per step, and the shares of XLA's execution time spent in copy fusions and in matrix products (XLA's own `dot`
  and the library fusions: YNNPACK, XNNPACK, oneDNN), from `jax.profiler`.

Example:

    python -m benchmarks.xla_cpu_depth --depths 4,12
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

from benchmarks import runner
from keras_vit_cli import quiet

# B/16's width at 224 px, batch 8.
HIDDEN, IMAGE_SIZE, PATCH_SIZE, BATCH = 768, 224, 16, 8


def _per_block_ms(function, arguments, depth, repeats):
    import jax

    jax.block_until_ready(function(*arguments))  # compiles
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(function(*arguments))
    return (time.perf_counter() - start) / repeats / depth * 1e3


def residual_network_ms(depth, hidden=HIDDEN, tokens=(IMAGE_SIZE // PATCH_SIZE) ** 2 + 1, repeats=3):
    """`{"gradient_ms_per_block", "forward_ms_per_block"}` of the plain-JAX residual network at `depth` blocks."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def layer_norm(x):
        return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-6)

    def loss(weights, x):
        for first, second in weights:
            x = x + layer_norm(x) @ first
            x = x + layer_norm(x) @ second
        return (x**2).mean()

    generator = np.random.default_rng(0)

    def matrix():
        return jnp.asarray(generator.normal(scale=0.02, size=(hidden, hidden)).astype("float32"))

    weights = [(matrix(), matrix()) for _ in range(depth)]
    x = jnp.asarray(generator.normal(size=(BATCH, tokens, hidden)).astype("float32"))
    return {
        "gradient_ms_per_block": _per_block_ms(jax.jit(jax.grad(loss)), (weights, x), depth, repeats),
        "forward_ms_per_block": _per_block_ms(jax.jit(loss), (weights, x), depth, repeats),
    }


def xla_time_by_kind(run):
    """Seconds of XLA's CPU execution in one call of `run`, by kind of op (a fusion's name without its number)."""
    import jax
    from jax._src.lib import _profile_data  # jaxlib's reader of the profiler's XPlane files

    by_kind = collections.Counter()
    with tempfile.TemporaryDirectory(prefix="keras-vit-xla-profile-") as folder:
        with jax.profiler.trace(folder):
            run()
        (path,) = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        for plane in _profile_data.ProfileData.from_file(path).planes:
            for line in plane.lines:
                # XLA's threads: its worker pool, and the client's own thread, which runs small programs inline.
                if not line.name.startswith(("tf_XLAEigen", "tf_XLAPjRtCpuClient")):
                    continue
                for event in line.events:
                    # Ops only: not the executor's and thread pools' own events (`Class::Method`) or end markers.
                    if "::" not in event.name and not event.name.startswith("end:"):
                        kind, _, number = event.name.rpartition(".")
                        by_kind[kind if number.isdigit() else event.name] += event.duration_ns / 1e9
    return by_kind


def keras_vit_step(depth, hidden=HIDDEN, image_size=IMAGE_SIZE, repeats=2):
    """`{"step_s", "copy_fusion_share", "product_share"}` of keras_vit's jitted training step with `depth` blocks of
    `hidden`."""
    import keras
    import numpy as np

    import keras_vit

    model = keras_vit.VisionTransformer(
        patch_size=PATCH_SIZE, hidden_dim=hidden, num_layers=depth, num_heads=hidden // 64, mlp_dim=4 * hidden,
        input_shape=(image_size, image_size, 3), classes=1000, classifier_activation=None,
    )  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.SGD(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    images = np.random.default_rng(0).uniform(-1, 1, (BATCH, image_size, image_size, 3)).astype("float32")
    labels = np.zeros(BATCH, "int32")
    model.train_on_batch(images, labels)  # compiles
    start = time.perf_counter()
    for _ in range(repeats):
        model.train_on_batch(images, labels)
    step_s = (time.perf_counter() - start) / repeats
    by_kind = xla_time_by_kind(lambda: model.train_on_batch(images, labels))
    total = max(sum(by_kind.values()), 1e-12)
    copies = sum(seconds for kind, seconds in by_kind.items() if "copy" in kind.split("_"))
    products = sum(seconds for kind, seconds in by_kind.items() if _is_product(kind))
    return {"step_s": step_s, "copy_fusion_share": copies / total, "product_share": products / total}


def _is_product(kind):
    """XLA's own dot, or a fusion handed to a matrix library (YNNPACK, XNNPACK, oneDNN)."""
    return kind == "dot" or kind.split("_")[0] in ("ynn", "xnn", "onednn")


def format_table(rows):
    lines = [
        "| blocks | plain JAX: gradient ms per block | plain JAX: forward ms per block "
        "| keras_vit step (s) | keras_vit s per block | share of XLA time in copy fusions "
        "| share in matrix products |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['depth']} | {row['gradient_ms_per_block']:.1f} | {row['forward_ms_per_block']:.1f} "
            f"| {row['step_s']:.2f} | {row['step_s'] / row['depth']:.3f} | {100 * row['copy_fusion_share']:.0f} % "
            f"| {100 * row['product_share']:.0f} % |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.xla_cpu_depth", description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="4,12", help="comma-separated block counts (default: %(default)s)")
    args = parser.parse_args(argv)
    quiet.install()  # before Keras loads, after --help: no framework log lines
    if "keras" in sys.modules and os.environ.get("KERAS_BACKEND") != "jax":
        print("python -m benchmarks.xla_cpu_depth: Keras is loaded with another backend than jax", file=sys.stderr)
        return 2
    try:
        depths = runner.batch_sizes("--depths", args.depths)  # any comma-separated positive integers
    except ValueError as error:
        print(f"python -m benchmarks.xla_cpu_depth: {error}", file=sys.stderr)
        return 2
    os.environ["KERAS_BACKEND"] = "jax"  # before Keras loads
    import jax

    rows = [dict(depth=depth, **residual_network_ms(depth), **keras_vit_step(depth)) for depth in depths]
    print(f"XLA CPU (jaxlib {jax.__version__}), {os.cpu_count()} cores visible, float32, batch {BATCH}")
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
