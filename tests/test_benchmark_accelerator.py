"""`python -m benchmarks.accelerator` on a CPU (torch run): the turn-taking protocol, a tiny interleaved run of real
worker processes, a failing and a late worker reported without a hang, the summary's ratios and the table. No
timing is asserted."""

import json

import keras
import pytest

from benchmarks import accelerator, accelerator_worker

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="the workers are processes of their own: run once, in the torch run"
)

TINY = {"patch_size": 8, "hidden_dim": 16, "num_layers": 1, "num_heads": 2, "mlp_dim": 32}


def _spec(kind="keras_vit", backend="torch", jit_compile=False, remat=False, optimizer="sync-free"):
    return {
        "kind": kind,
        "backend": backend,
        "jit_compile": jit_compile,
        "remat": remat,
        "optimizer": optimizer,
        "precision": "float32",
        "variant": TINY,
        "image_size": 16,
        "classes": 3,
        "train_batch_size": 2,
        "inference_batch_size": 3,
        "absent_frameworks": ["jax", "jaxlib", "jax_plugins"],
    }


class _Session(accelerator_worker.Session):
    def __init__(self):
        self.calls = []
        super().__init__(
            train=lambda count: self.calls.append(("train", count)),
            infer=lambda count: self.calls.append(("infer", count)),
            peak_bytes=lambda: 1024,
            reset_peak=lambda: True,
            device="test device",
        )


def _protocol_lines(text):
    prefix = accelerator_worker.PROTOCOL_PREFIX
    return [json.loads(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]


def test_the_worker_answers_each_command_with_one_protocol_line(capfd):
    session = _Session()
    ready = accelerator_worker.warm_up(session)
    assert ready["device"] == "test device" and ready["train_peak_bytes"] == 1024
    assert session.calls == [("train", 1)] * 2 + [("infer", 1)] * 2  # the first of each timed alone, then one more
    session.calls.clear()
    accelerator_worker.serve(session, ["train 3\n", "infer 2\n", "\n", "train many\n", "quit\n", "train 1\n"])
    answers = _protocol_lines(capfd.readouterr().out)
    assert [answer["event"] for answer in answers] == ["done", "done", "error"]
    assert answers[0]["peak_bytes"] == 1024 and answers[0]["peak_restarted"] is True
    assert "train many" in answers[2]["error"]
    assert session.calls == [("train", 3), ("infer", 2)]  # one window each; nothing after quit


def test_a_failing_window_is_reported_and_ends_the_worker(capfd):
    session = _Session()
    session.train = lambda count: 1 / 0
    accelerator_worker.serve(session, ["train 1\n", "infer 1\n"])
    answers = _protocol_lines(capfd.readouterr().out)
    assert len(answers) == 1 and answers[0]["event"] == "error" and "ZeroDivisionError" in answers[0]["error"]


def test_the_profile_sorts_kernels_by_kind():
    assert accelerator_worker.kernel_kind("sm90_xmma_gemm_bf16bf16_bf16f32") == "matrix products"
    assert accelerator_worker.kernel_kind("pytorch_flash::flash_fwd_kernel") == "attention"
    assert accelerator_worker.kernel_kind("triton_per_fused_native_layer_norm_0") == "compiled fusions"
    # A fusion is named after the ops it fused: not a copy, not attention.
    assert accelerator_worker.kernel_kind("triton_poi_fused__to_copy_add_gelu_view_11") == "compiled fusions"
    assert accelerator_worker.kernel_kind("triton_poi_fused__scaled_dot_product_cudnn_attention_clone_6") == (
        "compiled fusions"
    )
    assert accelerator_worker.kernel_kind("void at::native::direct_copy_kernel_cuda") == "copies"
    assert accelerator_worker.kernel_kind("void at::native::elementwise_kernel<128, 4>") == "other"
    import torch

    left = torch.ones(64, 64)
    measured = accelerator_worker.profile(lambda count: [left @ left for _ in range(count)], count=2)
    assert measured["wall_ms"] > 0 and measured["device_ms"] > 0 and measured["top"]
    assert sum(measured["kinds_ms"].values()) == pytest.approx(measured["device_ms"])


def test_a_tiny_interleaved_run_of_real_workers(tmp_path):
    specs = {
        "keras_vit torch eager": _spec(),
        "keras_vit torch eager remat": _spec(remat=True, optimizer="keras"),
        "timm eager": _spec(kind="timm"),
        "broken": _spec(kind="no such kind"),
        accelerator.CEILING: {"kind": "ceiling", "backend": "torch", "matmul_size": 64},
    }
    messages = []
    rounds_seen = []
    records = accelerator.measure(
        specs,
        rounds=2,
        steps=2,
        calls=1,
        ready_timeout=240,
        window_timeout=120,
        log_folder=str(tmp_path),
        log=messages.append,
        after_round=lambda records: rounds_seen.append(len(records["keras_vit torch eager"]["train_s"])),
        profile_calls=1,
    )
    assert rounds_seen == [1, 2]  # the report can be written after every round
    for name in ("keras_vit torch eager", "keras_vit torch eager remat", "timm eager"):
        record = records[name]
        assert record["status"] == "ok" and len(record["train_s"]) == len(record["inference_s"]) == 2
        assert record["flash_attention"] == "no"  # no GPU
        assert set(record["profile"]) == {"train", "infer"} and record["profile"]["train"]["device_ms"] > 0
    assert records["broken"]["status"] == "failed" and "KeyError" in records["broken"]["error"]
    assert any(message.startswith("broken: FAILED") for message in messages)
    assert len(records[accelerator.CEILING]["train_s"]) == 2 and not records[accelerator.CEILING]["inference_s"]

    flops = {"training": 3e6, "forward": 1e6}
    summary = accelerator.summarize(records, steps=2, calls=1, flops=flops)
    assert summary["matmul_tflops"] > 0 and set(summary["rows"]) == set(specs) - {accelerator.CEILING}
    row = summary["rows"]["keras_vit torch eager"]
    assert row["train_images_per_s"] > 0 and row["train_vs_timm"] is None  # no timm row, no ratio
    table = accelerator.format_table(summary, 2, 3)
    assert "| broken | failed |" in table and "| keras_vit torch eager remat |" in table
    assert "keras_vit torch eager remat | train |" in accelerator.format_profiles(records)


def test_a_worker_still_compiling_at_the_deadline_is_stopped_and_reported(tmp_path):
    records = accelerator.measure(
        {"late": _spec()},
        rounds=1,
        steps=1,
        calls=1,
        ready_timeout=0.01,
        window_timeout=1,
        log_folder=str(tmp_path),
        log=lambda message: None,
    )
    assert records["late"]["status"] == "not ready" and "not ready within" in records["late"]["error"]


def test_summary_ratios_and_share_of_the_matrix_product_rate():
    def record(train_s, inference_s, **extra):
        spec = {"train_batch_size": 10, "inference_batch_size": 20}
        return {"spec": spec, "status": "ok", "train_s": train_s, "inference_s": inference_s, **extra}

    records = {
        accelerator.REFERENCE: record([1.0, 2.0, 3.0], [1.0], train_peak_bytes=2**30),  # median 2 s
        "mine": record([1.0], [0.5], device="a GPU", flash_attention="yes"),
        accelerator.CEILING: {"spec": {"matmul_size": 10}, "status": "ok", "train_s": [2e-6], "inference_s": []},
    }
    summary = accelerator.summarize(records, steps=2, calls=4, flops={"training": 3e3, "forward": 1e3})
    assert summary["matmul_tflops"] == pytest.approx(2 * 10**3 * 2 / 2e-6 / 1e12)
    timm, mine = summary["rows"][accelerator.REFERENCE], summary["rows"]["mine"]
    assert timm["train_images_per_s"] == 10 and mine["train_images_per_s"] == 20  # batch * steps / median
    assert mine["train_vs_timm"] == 2.0 and mine["inference_vs_timm"] == 2.0
    assert timm["train_peak_gib"] == 1.0 and mine["train_peak_gib"] is None
    assert mine["train_percent_of_peak"] == pytest.approx(100 * 20 * 3e3 / (summary["matmul_tflops"] * 1e12))
    assert summary["device"] == "a GPU"


def test_unknown_configurations_and_variants_are_refused_in_one_line(capsys):
    for argv, message in (
        (["--configurations", "keras_vit jax,nonsense"], "unknown configurations ['nonsense']"),
        (["--variant", "Z/99"], "unknown --variant 'Z/99'"),
    ):
        with pytest.raises(SystemExit) as raised:
            accelerator.main(argv)
        assert raised.value.code == 2 and message in capsys.readouterr().err


def test_the_worker_takes_exactly_one_spec(capsys):
    assert accelerator_worker.main([]) == 2
    assert "usage: python -m benchmarks.accelerator_worker '<json spec>'" in capsys.readouterr().err
