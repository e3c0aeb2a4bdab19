"""`python -m benchmarks`: keras_vit against its peers, measured in one run.

Each configuration (model x backend x precision x jit_compile) runs in its
own subprocess pinned to the same number of cores, with a timeout: inference
throughput, training-step throughput, time to the first step and the peak
resident memory; keras_vit's exported artefacts (OpenVINO, ONNX Runtime) for
float32 inference. The peers (keras-hub's `ViTBackbone` with a Dense head,
Hugging Face `transformers`' `ViTForImageClassification` and timm's
`VisionTransformer`, eager and `torch.compile`) and the machine's
matrix-multiply ceiling are measured in
the same run, so the ratios stay meaningful on a busy machine even when the
absolute numbers do not.

Example:

```python
import benchmarks as benchmarking
import keras_vit

specs = benchmarking.plan("Ti/16", keras_vit.models.variants.VARIANTS["Ti/16"], backends=("jax",),
                          precisions=("float32",), peers=(), artefacts=(), image_size=32,
                          repeats=1)
report = benchmarking.run(specs, output="benchmark.json")
print(report["table"])
```
"""

from benchmarks.runner import (
    ARTEFACT_FORMATS,
    BACKENDS,
    JIT_OPTIONS,
    PEERS,
    PRECISIONS,
    format_table,
    plan,
    run,
    summarize,
)


def __getattr__(name):
    # The FLOP counts come from keras_vit, which imports Keras: only when asked for, so that
    # `python -m benchmarks --help` answers at once.
    if name in ("forward_flops", "training_flops"):
        from keras_vit.models import flops

        return getattr(flops, name)
    raise AttributeError(f"module 'benchmarks' has no attribute {name!r}")


__all__ = [
    "ARTEFACT_FORMATS",
    "BACKENDS",
    "JIT_OPTIONS",
    "PEERS",
    "PRECISIONS",
    "format_table",
    "forward_flops",
    "plan",
    "run",
    "summarize",
    "training_flops",
]
