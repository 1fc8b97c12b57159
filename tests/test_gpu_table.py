"""A GPU type is one row of llmctl.hardware.TABLE: a row added there (and
nowhere else) is offered by plan and gen-config, read by validate, sized with
its own memory and traits, and selected by its node label in kuberay
manifests."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from llmctl import hardware

# A Ray accelerator type llmctl does not list (ray.util.accelerators has it).
NEW = hardware.GPUType(
    "RTX-PRO-6000", "RTX-PRO-6000", 94.5, "96 GB", 8, "test row", (12, 0), 188, "pcie",
    aliases=("rtx pro 6000",), gke_label="nvidia-rtx-pro-6000", gfd_label="NVIDIA-RTX-PRO-6000",
)


@pytest.fixture
def new_row(monkeypatch):
    # the sizing-only "RTX PRO 6000" row (published logs' traits) steps aside for the offered test row
    rest = tuple(g for g in hardware.TABLE if g.name.replace(" ", "-").lower() != NEW.name.lower())
    monkeypatch.setattr(hardware, "TABLE", rest + (NEW,))
    return NEW


def test_a_new_row_is_offered_and_found(new_row):
    assert "RTX-PRO-6000" in hardware.GPUS
    assert hardware.get_gpu("rtx pro 6000") is new_row
    assert hardware.by_ray_type("RTX-PRO-6000") is new_row
    assert hardware.find_device("NVIDIA RTX PRO 6000 Blackwell Server Edition") is new_row


def test_plan_sizes_the_new_row_with_its_memory(new_row, monkeypatch):
    import llmctl

    table = llmctl.plan("qwen2.5-7b-instruct", gpu="RTX-PRO-6000", tp=1, max_model_len=8192)
    row = table.rows[0]
    assert row["gpu"] == "RTX-PRO-6000"
    assert row["gpu_memory_gib"] == pytest.approx(new_row.memory_gib, abs=0.01)
    everything = llmctl.plan("qwen2.5-7b-instruct", max_model_len=8192)
    assert "RTX-PRO-6000" in {r["gpu"] for r in everything.rows}
    # the same model on a row of half the memory holds fewer KV tokens: the row's memory is used
    half = dataclasses.replace(new_row, name="HALF", ray_type=None, memory_gib=new_row.memory_gib / 2, aliases=())
    monkeypatch.setattr(hardware, "TABLE", hardware.TABLE + (half,))
    smaller = llmctl.plan("qwen2.5-7b-instruct", gpu="HALF", tp=1, max_model_len=8192).rows[0]
    assert smaller["kv_cache_tokens"] < row["kv_cache_tokens"]


def test_gen_config_validate_and_kuberay_use_the_new_row(new_row, tmp_path):
    import llmctl
    from llmctl.kuberay.manifest import KubeOptions

    gen = llmctl.generate("qwen2.5-7b-instruct", gpu="RTX-PRO-6000", max_replicas=2, output_dir=tmp_path,
                          kuberay=KubeOptions(node_selector="gke"))
    model = yaml.safe_load(gen.model_files[0].read_text())
    assert model["accelerator_type"] == "RTX-PRO-6000"
    assert not [d for d in llmctl.validate_files([gen.serve_file]) if d.is_error]
    manifest = yaml.safe_load(gen.manifest.text)
    groups = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert [g["template"]["spec"]["nodeSelector"] for g in groups] == [{"cloud.google.com/gke-accelerator": "nvidia-rtx-pro-6000"}]
    # and validate reads that label back as this GPU (a selector for another GPU is an error)
    assert not [d for d in llmctl.validate_files([gen.manifest.path]) if d.is_error]
    other = gen.manifest.text.replace("nvidia-rtx-pro-6000", "nvidia-l4")
    path = tmp_path / "other.yaml"
    path.write_text(other)
    assert [d for d in llmctl.validate_files([path]) if d.is_error]


def test_validate_sizes_with_the_new_row(new_row, tmp_path):
    """validate's fit check uses the row's memory: a 70B model at TP 1 does
    not fit a 94.5 GiB card (bf16 weights alone are ~131 GiB)."""
    import llmctl

    cfg = {
        "model_loading_config": {"model_id": "big", "model_source": "meta-llama/Llama-3.1-70B-Instruct"},
        "accelerator_type": "RTX-PRO-6000",
        "engine_kwargs": {"tensor_parallel_size": 1, "max_model_len": 8192},
    }
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(cfg))
    diags = llmctl.validate_files([path])
    fit = [d for d in diags if d.code == "does-not-fit"]
    assert fit and fit[0].is_error, [str(d) for d in diags]
    assert "94.5" in fit[0].message or "RTX-PRO-6000" in fit[0].message
