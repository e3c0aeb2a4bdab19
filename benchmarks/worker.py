"""Measures one benchmark configuration; runs in its own process.

`python benchmarks/worker.py '<json spec>'` pins the process to
`threads` cores and sets every framework's thread pools before importing any
of them, builds the model the spec names, measures it and prints one line
`KERAS_VIT_BENCHMARK_RESULT {json}` on stdout. The runner starts one such
process per configuration, so one framework's thread pools, caches, compiled
code and memory high-water mark never leak into another's numbers.

Spec keys: `kind` ("keras_vit", "keras_hub", "transformers", "timm", "artefact"
or "ceiling"), `backend`, `precision` ("float32" or "mixed_bfloat16"), `jit_compile`
(bool; for "transformers" and "timm" it selects `torch.compile`), `format`
(an "artefact" row's export format, measured for inference only), `variant` (a dict of
`keras_vit.models.variants.VARIANTS`), `image_size`, `classes`, `inference_batch_sizes`,
`train_batch_size`, `repeats`, `threads`, and optionally `family` (runner.FAMILIES: "vit", the default, or
"dinov3": `variant` then carries its options and the peers build their DINOv3), `remat` (keras_vit's
`remat=True`, timm's `set_grad_checkpointing()`), `first_step_only` (measure
the first training step and nothing after it), `inference_only` (no training), `absent_frameworks` (module
names made unimportable before anything loads, as in an environment without
them: Keras imports jax wherever it is installed, also on the torch backend).
"""

import importlib
import json
import os
import sys
import time

RESULT_PREFIX = "KERAS_VIT_BENCHMARK_RESULT "
# timm's model of each family but the plain ViT (runner.FAMILIES), built at the spec's sizes.
TIMM_FAMILY_MODELS = {"dinov3": "vit_base_patch16_dinov3"}


def limit_threads(threads):
    """Pins this process to `threads` cores and sizes every thread pool to match.

    Must run before TensorFlow, JAX, PyTorch or NumPy is imported: their pools
    read these variables once, at start-up.
    """
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus[:threads])
    threads = str(threads)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ[name] = threads
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# What Keras 3.15 imports whenever it is installed, also on the torch backend, and an install of
# keras-vision-transformer[torch] lacks: jax (Keras's Orbax checkpoint callback), TensorFlow, scikit-learn (Keras's
# scikit-learn wrappers) with SciPy, and matplotlib (keras.visualization), ~200 MiB of resident memory before a
# model is built (each row records which of them its process imported);
FRAMEWORKS_KERAS_IMPORTS = ("jax", "tensorflow", "sklearn", "scipy", "matplotlib")
# and ~12 MiB more of IPython with traitlets (Keras's file editor), requests with urllib3 and its imports (Keras's
# remote-monitor callback), Pillow (Keras's image utilities), psutil, huggingface_hub and tqdm (Keras's saving). A
# torch-only row hides them all.
TORCH_INSTALL_LACKS = FRAMEWORKS_KERAS_IMPORTS + (
    "IPython",
    "traitlets",
    "requests",
    "urllib3",
    "charset_normalizer",
    "idna",
    "certifi",
    "backports",
    "PIL",
    "psutil",
    "huggingface_hub",
    "tqdm",
)


def uninstall_for_this_process(names):
    """Makes the packages whose names start with one of `names` (jax: jax, jaxlib, jax_plugins and their
    metadata) unfindable, as in an environment where they were never installed.

    Each `site-packages` on `sys.path` is replaced by a folder of links to all of its other entries. A
    `sys.modules[name] = None` would not do: Keras asks `"tensorflow" in sys.modules`, and
    `importlib.util.find_spec` must answer None. Must run before anything imports them.
    """
    import atexit
    import shutil
    import tempfile

    prefixes = tuple(name.lower() for name in names)
    for index, entry in enumerate(sys.path):
        if os.path.basename(entry) != "site-packages" or not os.path.isdir(entry):
            continue
        links = tempfile.mkdtemp(prefix="keras-vit-benchmark-site-")
        atexit.register(shutil.rmtree, links, ignore_errors=True)  # removes the links, never what they point to
        for name in os.listdir(entry):
            if not name.lower().startswith(prefixes):
                os.symlink(os.path.join(entry, name), os.path.join(links, name))
        sys.path[index] = links


def peak_rss_mb():
    """This process's resident-memory high-water mark in MiB.

    On Linux, `VmHWM` in /proc/self/status: the process's own mark, which `reset_peak_rss` restarts. Not
    `getrusage`'s `ru_maxrss`: Linux carries that over from the parent that forked the process, so a worker
    started by a 750 MiB parent reported at least 750 MiB before it imported anything. Elsewhere `ru_maxrss`.
    """
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def malloc_state_mb():
    """glibc's C heap in MiB, `{"heap", "heap_free", "mmapped"}` (`mallinfo2`, all arenas), or None where the C
    library is not glibc 2.33 or later.

    Where the tensors live shows here: glibc maps a block above its mmap threshold on its own (`mmapped`) and
    returns it to the system when it is freed; a smaller one comes from the heap, whose freed blocks glibc keeps
    (`heap_free`) and counts in the resident memory. The threshold adapts: it rises to the size of each mapped
    block freed (up to 32 MiB), so what a process freed before it allocates decides where the next blocks go.
    """
    import ctypes

    fields = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in fields]

    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):  # not Linux with glibc 2.33+
        return None
    mallinfo2.restype = MallInfo2
    state = mallinfo2()
    mib = 2**20
    return {"heap": state.arena / mib, "heap_free": state.fordblks / mib, "mmapped": state.hblkhd / mib}


def reset_peak_rss():
    """Restarts the high-water mark at the current resident memory (Linux `clear_refs`); False where refused.

    After the first training step, the mark then measures the steady training steps alone, not the tracing and
    compilation of the first (XLA's compiler can use more memory than the step it compiles).
    """
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def _timed(function, repeats):
    """Calls `function` `repeats` times; returns the sorted wall times in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return sorted(times)


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def _throughput(batch, times):
    return {"images_per_s": batch / _median(times), "seconds": times}


def _images(batch, image_size, channels_first=False, seed=0, pixels=False):
    """Random images: the models' [-1, 1] inputs, or with `pixels` the uint8 [0, 255] an exported artefact takes."""
    import numpy as np

    shape = (batch, 3, image_size, image_size) if channels_first else (batch, image_size, image_size, 3)
    if pixels:
        return np.random.default_rng(seed).integers(0, 256, size=shape, dtype="uint8")
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


def _labels(batch, classes, seed=0):
    import numpy as np

    return np.random.default_rng(seed).integers(0, classes, size=(batch,)).astype("int32")


def _measure(spec, infer, train_step, rss_after_imports_mb=None):
    """The common protocol: training first, so its peak memory is not inference's.

    `infer(images)` and `train_step(images, labels)` must block until the
    result is computed. The first call of each is timed separately (tracing,
    compilation, allocation: "time to first step"), then `repeats` timed
    calls follow one untimed warm-up. `rss_after_imports_mb`: the runner's
    high-water mark once its framework and model library were imported.
    """
    result = {
        "rss_after_imports_mb": rss_after_imports_mb,
        "rss_after_build_mb": peak_rss_mb(),
        "malloc_after_build_mb": malloc_state_mb(),
    }
    if spec.get("inference_only"):
        result["inference"] = _measure_inference(spec, infer)
        result["peak_rss_mb"] = peak_rss_mb()
        return result
    batch = spec["train_batch_size"]
    images, labels = _images(batch, spec["image_size"], spec.get("channels_first")), _labels(batch, spec["classes"])
    start = time.perf_counter()
    train_step(images, labels)
    result["first_train_step_s"] = time.perf_counter() - start
    result["peak_rss_first_train_step_mb"] = peak_rss_mb()
    if spec.get("first_step_only"):
        # One step of a batch of a thousand images takes minutes; its peak is the steps' after it (benchmarks.memory).
        result["peak_rss_train_mb"] = result["peak_rss_mb"] = result["peak_rss_first_train_step_mb"]
        return result
    steady = reset_peak_rss()
    train_step(images, labels)
    result["train"] = _throughput(batch, _timed(lambda: train_step(images, labels), spec["repeats"]))
    result["train"]["batch_size"] = batch
    result["peak_rss_train_mb"] = peak_rss_mb()
    result["malloc_after_training_mb"] = malloc_state_mb()
    # The high-water mark of the steps after the first (None where it could not be reset).
    result["peak_rss_steady_train_mb"] = result["peak_rss_train_mb"] if steady else None
    if steady:
        result["peak_rss_train_mb"] = max(result["peak_rss_train_mb"], result["peak_rss_first_train_step_mb"])
    result["inference"] = _measure_inference(spec, infer)
    result["peak_rss_mb"] = max(peak_rss_mb(), result["peak_rss_train_mb"])
    return result


def _measure_inference(spec, infer, pixels=False):
    """`{batch: throughput}` of `infer` at each inference batch: the first call timed alone, one warm-up, then
    `repeats` timed calls."""
    measured = {}
    for batch in spec["inference_batch_sizes"]:
        images = _images(batch, spec["image_size"], spec.get("channels_first"), pixels=pixels)
        start = time.perf_counter()
        infer(images)
        first = time.perf_counter() - start
        infer(images)
        entry = _throughput(batch, _timed(lambda images=images: infer(images), spec["repeats"]))
        entry["first_call_s"] = first
        measured[str(batch)] = entry
    return measured


def keras_model(spec):
    """keras_vit's `VisionTransformer`, or keras-hub's `ViTBackbone` with a Dense head, as `spec` names."""
    import keras

    if spec["kind"] == "keras_vit":
        import keras_vit

        return keras_vit.VisionTransformer(
            **spec["variant"],
            input_shape=(spec["image_size"], spec["image_size"], 3),
            classes=spec["classes"],
            classifier_activation=None,
            remat=spec.get("remat", False),
            lora_rank=spec.get("lora"),
        )
    import keras_hub

    variant = spec["variant"]
    sizes = dict(
        image_shape=(spec["image_size"], spec["image_size"], 3),
        patch_size=variant["patch_size"],
        num_layers=variant["num_layers"],
        num_heads=variant["num_heads"],
        hidden_dim=variant["hidden_dim"],
    )
    if spec.get("family", "vit") == "dinov3":
        backbone = keras_hub.models.DINOV3Backbone(
            **sizes,
            intermediate_dim=variant["mlp_dim"],
            layer_scale_init_value=variant["layer_scale_init"],
            num_register_tokens=variant["num_register_tokens"],
            use_mask_token=False,
            use_query_bias=False,  # as timm's and keras_vit's (`qkv_bias=False`)
            use_key_bias=False,
            use_value_bias=False,
            layer_norm_eps=variant["layer_norm_epsilon"],
            rope_theta=variant["rope"]["temperature"],
        )
    else:
        backbone = keras_hub.models.ViTBackbone(**sizes, mlp_dim=variant["mlp_dim"])
    # keras-hub's ViTImageClassifier head: the class token into a float32 Dense.
    logits = keras.layers.Dense(spec["classes"], dtype="float32", name="head")(backbone.output[:, 0])
    return keras.Model(backbone.input, logits)


def keras_trainer(spec):
    """The compiled Keras model of `spec`, its `train_step(images, labels)`, which returns the loss as a Python
    float (the step has finished), and `train_steps(images, labels, count)`: `count` steps of `model.fit`, the
    loop users train with, returning the last loss once it is on the host. Every row of the benchmarks trains
    with SGD: Keras's own, or (`spec["optimizer"] == "sync-free"`) `keras_vit.training.SyncFreeSGD`, which
    `keras-vit finetune` uses."""
    import keras

    if spec.get("optimizer", "keras") == "sync-free":
        from keras_vit import training

        optimizer = training.SyncFreeSGD(learning_rate=1e-3)
    else:
        optimizer = keras.optimizers.SGD(learning_rate=1e-3)
    model = keras_model(spec)
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=spec["jit_compile"],
    )
    callbacks = []
    if spec["kind"] == "keras_vit":
        # As `keras-vit finetune` trains: each step's gradients released before the next forward pass (torch; a no-op
        # elsewhere).
        from keras_vit import training

        callbacks.append(training.ReleaseGradients())
        callbacks[0].set_model(model)

    def train_step(images, labels):
        for callback in callbacks:
            callback.on_train_batch_begin(0)
        return model.train_on_batch(images, labels)

    def train_steps(images, labels, count):
        def batches():  # the same device-resident batch, every step
            while True:
                yield images, labels

        history = model.fit(batches(), steps_per_epoch=count, shuffle=False, verbose=0, callbacks=callbacks)
        return history.history["loss"][-1]

    return model, train_step, train_steps


def _run_keras(spec):
    import keras

    backend = keras.backend.backend()
    if backend != spec["backend"]:
        raise RuntimeError(f"KERAS_BACKEND is {backend!r}, the spec asks for {spec['backend']!r}")
    if backend == "torch":
        import torch

        torch.set_num_threads(spec["threads"])
    # What a script pays before it builds anything: the framework and the model library.
    importlib.import_module("keras_vit" if spec["kind"] == "keras_vit" else "keras_hub")
    rss_after_imports = peak_rss_mb()
    if spec["kind"] == "keras_vit":
        # As `keras-vit finetune` trains: XLA's CPU compiler scheduled for memory (JAX; a no-op elsewhere).
        from keras_vit.training import schedule_xla_cpu_for_memory

        schedule_xla_cpu_for_memory()
    keras.config.set_dtype_policy(spec["precision"])
    # Not keras.utils.set_random_seed: it imports TensorFlow whenever it is installed, which on the jax and torch
    # rows added ~460 MiB of resident memory and seconds of start-up that the library never needs.
    from keras_vit.utils import keras_compat

    keras_compat.set_random_seed(0)
    model, train_step, _ = keras_trainer(spec)
    result = _measure(
        spec,
        infer=model.predict_on_batch,  # returns NumPy: the computation has finished
        train_step=train_step,
        rss_after_imports_mb=rss_after_imports,
    )
    result["parameters"] = model.count_params()
    return result


def _run_artefact(spec):
    """keras_vit's exported artefact in its own runtime, inference only: export (timed) from the spec's Keras
    backend, the Keras model released, then the artefact run as `keras_vit.deploy.load_artefact` runs it, fed the
    uint8 pixels it takes (its [-1, 1] scaling is inside it)."""
    import gc
    import shutil
    import tempfile

    import keras

    from keras_vit import deploy

    keras.config.set_dtype_policy(spec["precision"])
    model = keras_model(dict(spec, kind="keras_vit"))
    folder = tempfile.mkdtemp(prefix="keras-vit-benchmark-artefact-")
    try:
        start = time.perf_counter()
        path = deploy.export(model, os.path.join(folder, "vit"), format=spec["format"])
        result = {"export_s": time.perf_counter() - start, "parameters": model.count_params()}
        del model
        keras.backend.clear_session()
        gc.collect()
        result["rss_after_build_mb"] = peak_rss_mb()  # the export's high-water mark
        infer = deploy.load_artefact(path, spec["format"])
        result["inference"] = _measure_inference(spec, infer, pixels=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def _run_transformers(spec):
    import torch
    import transformers

    dinov3 = spec.get("family", "vit") == "dinov3"
    # transformers imports a model on first access.
    model_class = transformers.DINOv3ViTModel if dinov3 else transformers.ViTForImageClassification
    rss_after_imports = peak_rss_mb()
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    variant = spec["variant"]
    sizes = dict(
        image_size=spec["image_size"],
        patch_size=variant["patch_size"],
        hidden_size=variant["hidden_dim"],
        num_hidden_layers=variant["num_layers"],
        num_attention_heads=variant["num_heads"],
        intermediate_size=variant["mlp_dim"],
        attn_implementation="sdpa",
    )
    if dinov3:
        config = transformers.DINOv3ViTConfig(
            **sizes,
            layer_norm_eps=variant["layer_norm_epsilon"],
            layerscale_value=variant["layer_scale_init"],
            num_register_tokens=variant["num_register_tokens"],
            rope_theta=variant["rope"]["temperature"],
            query_bias=False,  # as timm's and keras_vit's (`qkv_bias=False`)
            value_bias=False,
        )

        class Classifier(torch.nn.Module):  # DINOv3ViTModel has none: a Linear on its class token, as keras_vit's
            def __init__(self):
                super().__init__()
                self.backbone, self.head = model_class(config), torch.nn.Linear(config.hidden_size, spec["classes"])

            def forward(self, pixel_values):
                return self.head(self.backbone(pixel_values=pixel_values).pooler_output)

        model = Classifier()
    else:
        model = model_class(transformers.ViTConfig(**sizes, num_labels=spec["classes"], layer_norm_eps=1e-6))
    compiled = torch.compile(model) if spec["jit_compile"] else model
    logits = (lambda images: compiled(images)) if dinov3 else (lambda images: compiled(pixel_values=images).logits)
    infer, train_step, _ = torch_trainer(spec, model, logits)
    result = _measure(dict(spec, channels_first=True), infer, train_step, rss_after_imports)
    result["parameters"] = sum(p.numel() for p in model.parameters())
    return result


def _import_timm():
    """timm, with the repository's torchvision stand-in (tests/stubs) where no torchvision is installed:
    timm imports it for names a ViT never calls."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sys.path.insert(0, os.path.join(repo, "tests", "stubs"))
    import timm.models.vision_transformer

    return timm


def torch_trainer(spec, model, forward, device="cpu"):
    """`infer`, `train_step` and `train_steps` of a torch classifier (`forward(images) -> logits`) on `device`, SGD
    as the Keras runs. They take NumPy arrays or tensors (moved to `device` unless there already) and return once
    the result is computed: the logits as NumPy, the loss as a Python float (`train_steps(images, labels, count)`:
    the last step's, read once, as a training loop that logs now and then does)."""
    import torch

    # Mixed bfloat16 as Keras means it: float32 weights, bfloat16 compute (autocast).
    autocast = spec["precision"] == "mixed_bfloat16"
    device_type = torch.device(device).type
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_function = torch.nn.CrossEntropyLoss()

    def infer(images):
        model.eval()
        with torch.inference_mode(), torch.autocast(device_type, dtype=torch.bfloat16, enabled=autocast):
            return forward(torch.as_tensor(images, device=device)).float().cpu().numpy()

    def train_steps(images, labels, count):
        model.train()
        images = torch.as_tensor(images, device=device)
        labels = torch.as_tensor(labels, device=device).long()
        for _ in range(count):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type, dtype=torch.bfloat16, enabled=autocast):
                logits = forward(images)
            loss = loss_function(logits.float(), labels)
            loss.backward()
            optimizer.step()
        return loss.item()

    return infer, (lambda images, labels: train_steps(images, labels, 1)), train_steps


def timm_vision_transformer(variant, image_size, classes, checkpointing=False, family="vit"):
    """timm's model at the sizes of `variant`, random weights, optionally checkpointed: its `VisionTransformer`, or
    for another `family` its model (`TIMM_FAMILY_MODELS`; at B/16, `timm.create_model(name)` itself)."""
    timm = _import_timm()
    sizes = dict(
        img_size=image_size,
        patch_size=variant["patch_size"],
        embed_dim=variant["hidden_dim"],
        depth=variant["num_layers"],
        num_heads=variant["num_heads"],
        mlp_ratio=variant["mlp_dim"] / variant["hidden_dim"],
        num_classes=classes,
    )
    if family == "vit":
        model = timm.models.vision_transformer.VisionTransformer(**sizes)
    else:
        model = timm.create_model(TIMM_FAMILY_MODELS[family], pretrained=False, **sizes)
    model.set_grad_checkpointing(checkpointing)
    return model


def _run_timm(spec):
    """timm's VisionTransformer of the same size, eager or `torch.compile`d (`jit_compile`), optionally with
    gradient checkpointing per block."""
    import torch

    _import_timm()
    rss_after_imports = peak_rss_mb()
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    arguments = (spec["variant"], spec["image_size"], spec["classes"], spec.get("remat", False))
    family = spec.get("family", "vit")
    model = timm_vision_transformer(*arguments, family=family)
    compiled = torch.compile(model) if spec["jit_compile"] else model
    infer, train_step, _ = torch_trainer(spec, model, compiled)
    result = _measure(dict(spec, channels_first=True), infer, train_step, rss_after_imports)
    result["parameters"] = sum(p.numel() for p in model.parameters())
    return result


def _gemm_gflops(make_matmul, repeats, largest=2048, long_enough_s=0.25):
    """The best GFLOP/s of square matrix products, sized to run long enough.

    `make_matmul(size)` returns a function computing one `size`-square
    product. The size doubles from 256 until one call takes `long_enough_s`
    (or reaches `largest`), so a slow path (bfloat16 without hardware support
    can run at 0.1 GFLOP/s) costs seconds, not minutes.
    """
    size = 256
    while True:
        matmul = make_matmul(size)
        matmul()
        seconds = min(_timed(matmul, 1))
        if seconds >= long_enough_s or size >= largest:
            break
        size *= 2
    return {"gflops": 2 * size**3 / min(_timed(matmul, max(repeats, 3))) / 1e9, "size": size}


def mlp_gemm_shape(spec):
    """`(rows, inner, columns)` of the model's largest product: the first MLP
    layer at the largest inference batch, `(batch * tokens, hidden) @ (hidden, mlp)`."""
    variant = spec["variant"]
    tokens = (spec["image_size"] // variant["patch_size"]) ** 2 + 1
    return max(spec["inference_batch_sizes"]) * tokens, variant["hidden_dim"], variant["mlp_dim"]


def _model_gemm_gflops(matmul, shape, repeats):
    rows, inner, columns = shape
    matmul()
    return 2 * rows * inner * columns / min(_timed(matmul, max(repeats, 3))) / 1e9


def _run_ceiling(spec):
    """The machine's matrix-multiply ceiling: square GEMMs in NumPy and PyTorch,
    and the float32 rate of the model's own MLP product shape (a closer
    yardstick for a ViT than large square products)."""
    import numpy as np

    rng = np.random.default_rng(0)

    def numpy_matmul(size):
        a, b = (rng.standard_normal((size, size)).astype("float32") for _ in range(2))
        return lambda: a @ b

    gemms = {"numpy_float32": _gemm_gflops(numpy_matmul, spec["repeats"])}
    shape = mlp_gemm_shape(spec)
    tokens, weights = (rng.standard_normal(size).astype("float32") for size in (shape[:2], shape[1:]))
    model_gemms = {"numpy_float32": _model_gemm_gflops(lambda: tokens @ weights, shape, spec["repeats"])}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(spec["threads"])
        for dtype_name in ("float32", "bfloat16"):
            torch_dtype = getattr(torch, dtype_name)

            def torch_matmul(size, dtype=torch_dtype):
                a, b = (torch.randn(size, size).to(dtype) for _ in range(2))
                return lambda: a @ b

            gemms[f"torch_{dtype_name}"] = _gemm_gflops(torch_matmul, spec["repeats"])
        torch_tokens, torch_weights = torch.from_numpy(tokens), torch.from_numpy(weights)
        model_gemms["torch_float32"] = _model_gemm_gflops(lambda: torch_tokens @ torch_weights, shape, spec["repeats"])
    result = {f"{name}_gflops": value["gflops"] for name, value in gemms.items()}
    result["gemm_sizes"] = {name: value["size"] for name, value in gemms.items()}
    result.update({f"{name}_model_gemm_gflops": value for name, value in model_gemms.items()})
    result["model_gemm_shape"] = list(shape)
    return result


RUNNERS = {
    "keras_vit": _run_keras,
    "keras_hub": _run_keras,
    "transformers": _run_transformers,
    "timm": _run_timm,
    "artefact": _run_artefact,
    "ceiling": _run_ceiling,
}


def read_spec(argv, command):
    """The JSON spec that is a worker's one argument (`argv` after the program name); None, with the usage line
    printed to stderr, otherwise."""
    if len(argv) != 1:
        print(f"usage: {command} '<json spec>'", file=sys.stderr)
        return None
    return json.loads(argv[0])


def main(argv=None):
    spec = read_spec(sys.argv[1:] if argv is None else argv, "python benchmarks/worker.py")
    if spec is None:
        return 2
    limit_threads(spec["threads"])
    if spec.get("absent_frameworks"):
        uninstall_for_this_process(spec["absent_frameworks"])
    start = time.perf_counter()
    result = RUNNERS[spec["kind"]](spec)
    result["wall_s"] = time.perf_counter() - start
    # What the row's process carries: a framework, or a large library Keras imports wherever it is installed,
    # imported beside the measured one counts in its resident memory.
    result["frameworks_imported"] = sorted(
        name for name in ("torch", *FRAMEWORKS_KERAS_IMPORTS) if sys.modules.get(name) is not None
    )
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    # Run as a script, this folder is first on sys.path; drop it so that its
    # modules (cli, flops, runner) cannot shadow anything the frameworks import.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    sys.exit(main())
