"""`python -m benchmarks.deploy`: exported artefacts in their runtimes, float32 vs int8.

Run from the repository root on the TensorFlow backend (it writes every
format):

    KERAS_BACKEND=tensorflow python -m benchmarks.deploy --finetuned /tmp/deploy_run/model.keras

Rows, all from one process: images/s of the Keras model (TensorFlow,
`predict`), of each artefact in its own runtime; Keras `quantize` modes; a
Hugging Face transformers ViT of the same size exported to ONNX and run with
the same session options; and the int8 tables of `benchmarks/deploy_int8.py`
(each runtime's int8 artefacts against its own float32, alternating, with
`--profile` the per-op-type time shares). The README's int8 table:

    KERAS_BACKEND=tensorflow python -m benchmarks.deploy --finetuned /tmp/deploy_main/model.keras \
        --int8-only --profile --batch 4 --out int8.json
"""

import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np

from benchmarks import deploy_models
from keras_vit_cli import quiet


def _images_per_second(run, images, seconds):
    run(images)  # warm-up
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(images)
        count += len(images)
    return count / (time.perf_counter() - start)


def machine():
    """The CPU's model name, core count and the int8-relevant instruction sets it has."""
    name, flags = platform.processor() or platform.machine(), set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
    present = [flag for flag in wanted if flag in flags]
    return f"{name}, {os.cpu_count()} cores, {'/'.join(present) or 'no AVX2'}, no GPU"


def _onnx_pair(model, workdir, name, deploy):
    float_path = deploy.export(model, os.path.join(workdir, name), format="onnx")
    int8_path = deploy.quantize_onnx_int8(float_path, os.path.join(workdir, name + "_int8.onnx"))
    return deploy.load_artefact(float_path, "onnx"), deploy.load_artefact(int8_path, "onnx")


def finetuned_rows(path, workdir, seconds):
    from keras_vit import deploy
    from keras_vit.models import metadata

    model = metadata.load_classifier(path)
    images, labels = deploy_models.digits(model.input_shape[1])
    run_float, _ = _onnx_pair(model, workdir, "digits", deploy)
    rows = {"onnx_float32_images_per_s": _images_per_second(run_float, images, seconds)}
    from keras_vit.models.preprocessing import preprocess_input

    scaled = preprocess_input(images.astype("float32"))
    rows["keras_images_per_s"] = _images_per_second(
        lambda x: model.predict(x, batch_size=len(x), verbose=0), scaled, seconds
    )
    rows.update(keras_quantize_rows(path, images))
    return rows


def keras_quantize_rows(path, images, reference_top1=None):
    """`model.quantize(mode)` for each Keras mode: top-1 agreement with the
    float model (labels given) or the relative max logit error."""
    import warnings

    import keras

    from keras_vit.models import metadata
    from keras_vit.models.preprocessing import preprocess_input

    scaled = preprocess_input(images.astype("float32"))
    float_outputs = keras.ops.convert_to_numpy(metadata.load_classifier(path).predict(scaled, verbose=0))
    rows = {}
    for mode in ("int8", "float8", "int4"):
        model = metadata.load_classifier(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model.quantize(mode)
        outputs = keras.ops.convert_to_numpy(model.predict(scaled, verbose=0))
        rows[f"keras_{mode}_top1_agreement"] = float(np.mean(outputs.argmax(-1) == float_outputs.argmax(-1)))
        rows[f"keras_{mode}_relative_logit_error"] = float(
            np.max(np.abs(outputs - float_outputs)) / np.max(np.abs(float_outputs))
        )
    return rows


def b16_rows(workdir, seconds, batch, formats=("onnx",)):
    import keras

    from keras_vit import deploy
    from keras_vit.models.preprocessing import preprocess_input

    model = deploy_models.b16_model()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (batch, 224, 224, 3)).astype("uint8")
    rows = {}
    runs = {}
    for format in formats:
        path = deploy.export(model, os.path.join(workdir, "b16_" + format), format=format)
        runs[format] = deploy.load_artefact(path, format)
    runs["onnx_int8"] = deploy.load_artefact(
        deploy.quantize_onnx_int8(os.path.join(workdir, "b16_onnx.onnx"), os.path.join(workdir, "b16_int8.onnx")),
        "onnx",
    )
    reference = keras.ops.convert_to_numpy(model(preprocess_input(images.astype("float32"))))
    for name, run in runs.items():
        outputs = run(images)
        rows[f"{name}_max_abs_logit_error"] = float(np.max(np.abs(outputs - reference)))
        rows[f"{name}_images_per_s"] = _images_per_second(run, images, seconds)
    rows["int8_relative_logit_error"] = rows["onnx_int8_max_abs_logit_error"] / float(np.max(np.abs(reference)))
    scaled = preprocess_input(images.astype("float32"))
    rows["keras_tensorflow_images_per_s"] = _images_per_second(
        lambda x: model.predict(x, batch_size=len(x), verbose=0), scaled, seconds
    )
    rows["hf_onnx_float32_images_per_s"] = _hf_onnx_images_per_second(workdir, images, seconds)
    model_path = os.path.join(workdir, "b16.keras")
    model.save(model_path)
    rows.update(keras_quantize_rows(model_path, images))
    return rows


def _hf_onnx_images_per_second(workdir, images, seconds):
    """transformers' ViT-B/16 (random weights), exported with torch.onnx and
    run by the same ONNX Runtime session options as keras_vit's artefact."""
    import onnxruntime
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    hf = ViTForImageClassification(ViTConfig(num_labels=1000)).eval()
    path = os.path.join(workdir, "hf_b16.onnx")
    sample = torch.zeros((1, 3, 224, 224))
    torch.onnx.export(
        hf, (sample,), path, input_names=["pixel_values"], dynamic_axes={"pixel_values": {0: "batch"}}, dynamo=False
    )
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    pixels = (images.transpose(0, 3, 1, 2).astype("float32") / 127.5 - 1.0).astype("float32")
    return _images_per_second(lambda x: session.run(None, {"pixel_values": x}), pixels, seconds)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deploy", description=__doc__.splitlines()[0])
    parser.add_argument("--finetuned", help="the main job's model.keras (keras-vit finetune --out DIR)")
    parser.add_argument("--seconds", type=float, default=5.0, help="timing window per row (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=4, help="B/16 batch size (default: %(default)s)")
    parser.add_argument("--skip-b16", action="store_true")
    parser.add_argument(
        "--b16-formats", default="onnx", help="comma-separated formats for the B/16 rows (default: %(default)s)"
    )
    parser.add_argument(
        "--int8-only", action="store_true", help="only the int8 tables (benchmarks/deploy_int8.py), every runtime"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the int8 tables")
    parser.add_argument("--profile", action="store_true", help="int8 tables: per-op-type time shares")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    quiet.install()  # before Keras loads, after --help: no framework log lines
    from benchmarks import deploy_int8

    result = {"machine": machine(), "load_average_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as workdir:
        if args.finetuned:
            if not args.int8_only:
                result["digits"] = finetuned_rows(args.finetuned, workdir, args.seconds)
            result["digits_int8"] = deploy_int8.digits_comparison(
                args.finetuned, args.seconds, args.rounds, args.profile
            )
        if not args.skip_b16:
            if not args.int8_only:
                result["b16"] = b16_rows(workdir, args.seconds, args.batch, tuple(args.b16_formats.split(",")))
            result["b16_int8"] = deploy_int8.b16_comparison(args.seconds, args.rounds, args.profile, args.batch)
    result["load_average_at_end"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
