"""Bad input fails before anything is written; reruns are no-ops; a killed run leaves no <N>-gpu behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.tritonft.convert.conftest import subprocess_cli
from tests.tritonft.convert.models import Model, gpt2_model, gptj_model, t5_model


def assert_nothing_written(out) -> None:
    assert not any(p.name.endswith("-gpu") for p in out.glob("*")) if out.exists() else True


def test_truncated_safetensors_is_refused_naming_the_file(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    weights = src / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1)
    assert code == 1
    assert f"{weights} is truncated or corrupt; re-download it" in err
    assert "needs bytes up to" in err
    assert not (tmp_path / "ft" / "1-gpu").exists()


def test_missing_tensor_is_named(cli, tmp_path):
    model = gptj_model()
    del model.tensors["transformer.h.1.mlp.fc_in.bias"]
    src = model.save(tmp_path / "hf")
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 2)
    assert code == 1
    assert "transformer.h.1.mlp.fc_in.bias: missing from the checkpoint (expected shape [256])" in err
    assert_nothing_written(tmp_path / "ft")


def test_wrong_shape_is_named_with_both_shapes(cli, tmp_path):
    model = gpt2_model()
    model.tensors["transformer.h.0.mlp.c_fc.weight"] = np.zeros((64, 100), dtype=np.float32)
    src = model.save(tmp_path / "hf")
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1)
    assert code == 1
    assert "transformer.h.0.mlp.c_fc.weight: shape [64, 100] but config.json implies [64, 192]" in err
    assert_nothing_written(tmp_path / "ft")


def test_unknown_tensor_is_an_error_not_silently_dropped(cli, tmp_path):
    model = t5_model()
    model.tensors["classifier.weight"] = np.zeros((2, 64), dtype=np.float32)
    src = model.save(tmp_path / "hf")
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1)
    assert code == 1
    assert "classifier.weight: not a t5 tensor FasterTransformer can load" in err


@pytest.mark.parametrize("family", ["t5", "gpt2", "gptj"])
def test_tp_that_does_not_divide_the_heads_is_refused(cli, tmp_path, family):
    builders: dict[str, Callable[[], Model]] = {"t5": t5_model, "gpt2": gpt2_model, "gptj": gptj_model}
    model = builders[family]()
    src = model.save(tmp_path / "hf")
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 3)
    assert code == 1
    assert "is not divisible by --tp 3" in err
    assert "(attention heads)" in err
    assert not (tmp_path / "ft").exists()


def test_unsupported_activation_is_refused(cli, tmp_path):
    model = t5_model()
    model.config["feed_forward_proj"] = "gated-gelu_new"
    code, _, err = cli("convert", "--input", model.save(tmp_path / "hf"), "--output", tmp_path / "ft", "--tp", 1)
    assert code == 1
    assert "feed_forward_proj = 'gated-gelu_new' is not supported" in err


def test_family_contradicting_model_type_is_refused(cli, tmp_path):
    src = gpt2_model().save(tmp_path / "hf")
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1, "--family", "gptj")
    assert code == 1
    assert "--family gptj contradicts config.json model_type = 'gpt2'" in err


def test_pytorch_bin_only_without_torch_says_what_to_install(cli, tmp_path):
    src = tmp_path / "hf"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(gpt2_model().config))
    (src / "pytorch_model.bin").write_bytes(b"not read")
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1)
    assert code == 1
    assert "install torch" in err
    assert "or provide model.safetensors" in err


def test_rerun_with_same_inputs_is_a_no_op(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    args = ("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 2)
    assert cli(*args)[0] == 0
    target = tmp_path / "ft" / "2-gpu"
    before = {p.name: p.stat().st_mtime_ns for p in target.iterdir()}
    code, out, _ = cli(*args)
    assert code == 0
    assert "up to date" in out
    assert {p.name: p.stat().st_mtime_ns for p in target.iterdir()} == before


def test_touched_but_identical_source_is_still_a_no_op(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    args = ("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1)
    assert cli(*args)[0] == 0
    os.utime(src / "model.safetensors", ns=(1, 1))
    assert "up to date" in cli(*args)[1]


def test_changed_dtype_replaces_the_previous_conversion(cli, tmp_path):
    src = gpt2_model().save(tmp_path / "hf")
    assert cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1)[0] == 0
    code, out, _ = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1, "--dtype", "fp16")
    assert code == 0
    assert "converted" in out
    manifest = json.loads((tmp_path / "ft" / "1-gpu" / "manifest.json").read_text())
    assert manifest["weight_data_type"] == "fp16"
    assert sorted(p.name for p in (tmp_path / "ft").iterdir()) == [".1-gpu.lock", "1-gpu"]


def test_foreign_directory_in_the_way_is_never_replaced(cli, tmp_path):
    src = gpt2_model().save(tmp_path / "hf")
    foreign = tmp_path / "ft" / "1-gpu"
    foreign.mkdir(parents=True)
    (foreign / "model.wte.bin").write_bytes(b"precious")
    code, _, err = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1)
    assert code == 1
    assert "was not written by `tritonft convert`" in err
    assert (foreign / "model.wte.bin").read_bytes() == b"precious"


def test_verify_passes_then_catches_a_flipped_byte_and_a_stray_file(cli, tmp_path):
    src = gptj_model().save(tmp_path / "hf")
    assert cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 2)[0] == 0
    target = tmp_path / "ft" / "2-gpu"
    code, out, _ = cli("verify", target)
    assert code == 0
    assert out.startswith(f"ok: {target}: 32 files")  # 31 .bin + config.ini
    victim = target / "model.layers.1.attention.dense.weight.0.bin"
    data = bytearray(victim.read_bytes())
    data[100] ^= 0xFF
    victim.write_bytes(bytes(data))
    (target / "model.lm_head.weight.0.bin").write_bytes(b"")
    code, _, err = cli("verify", target)
    assert code == 1
    assert "model.layers.1.attention.dense.weight.0.bin: content differs from the manifest" in err
    assert "model.lm_head.weight.0.bin: not in the manifest" in err


def catch_mid_write(proc: subprocess.Popen[str], out: Path, pattern: str) -> None:
    """Wait until ``proc`` has written a weight file into its partial directory, then freeze it (SIGSTOP).

    Frozen, it cannot finish between this check and the signal the test sends next (on a loaded machine this
    polling loop may not run for a while; the conversion must not complete meanwhile, hence the large model).
    """
    deadline = time.monotonic() + 60
    while not (out.exists() and any(out.glob(pattern))):
        assert proc.poll() is None, "the conversion finished before it could be interrupted"
        assert time.monotonic() < deadline, "the conversion never started writing"
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGSTOP)
    assert proc.poll() is None, "the conversion finished before it could be interrupted"


def _big_gpt2(tmp_path: Path) -> Path:
    """Large enough (~240 MB: 0.2-0.5 s of converting) that a run is still going when the test catches it.

    The values do not matter to these tests, so the tensors are constant (instant to build)."""
    model = gpt2_model()
    d, layers = 640, 12
    model.config.update(n_embd=d, n_layer=layers, n_inner=None, n_head=8, vocab_size=8000, n_positions=64)

    def r(*shape: int) -> np.ndarray:
        return np.full(shape, 0.5, dtype=np.float32)

    t = {"transformer.wte.weight": r(8000, d), "transformer.wpe.weight": r(64, d)}
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = r(d), r(d)
    for i in range(layers):
        h = f"transformer.h.{i}"
        for ln in ("ln_1", "ln_2"):
            t[f"{h}.{ln}.weight"], t[f"{h}.{ln}.bias"] = r(d), r(d)
        t[f"{h}.attn.c_attn.weight"], t[f"{h}.attn.c_attn.bias"] = r(d, 3 * d), r(3 * d)
        t[f"{h}.attn.c_proj.weight"], t[f"{h}.attn.c_proj.bias"] = r(d, d), r(d)
        t[f"{h}.mlp.c_fc.weight"], t[f"{h}.mlp.c_fc.bias"] = r(d, 4 * d), r(4 * d)
        t[f"{h}.mlp.c_proj.weight"], t[f"{h}.mlp.c_proj.bias"] = r(4 * d, d), r(d)
    model.tensors, model.extra = t, {}
    return model.save(tmp_path / "hf")


@pytest.mark.slow
def test_killed_run_leaves_no_gpu_dir_and_a_rerun_completes(tmp_path):
    src = _big_gpt2(tmp_path)
    out = tmp_path / "ft"
    args = ("convert", "--input", src, "--output", out, "--tp", 2, "--workers", 1)
    proc = subprocess_cli(*args)
    catch_mid_write(proc, out, ".2-gpu.partial-*/*.bin")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "2-gpu").exists()

    rerun = subprocess_cli(*args)
    stdout, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stderr
    assert "converted gpt2 TP=2" in stdout
    assert sorted(p.name for p in out.iterdir()) == [".2-gpu.lock", "2-gpu"]  # the leftover was cleaned up
    check = subprocess_cli("verify", out / "2-gpu")
    assert check.communicate(timeout=60)[0].startswith("ok:")


@pytest.mark.slow
def test_sigterm_removes_the_partial_directory(tmp_path):
    src = _big_gpt2(tmp_path)
    out = tmp_path / "ft"
    proc = subprocess_cli("convert", "--input", src, "--output", out, "--tp", 1, "--workers", 1)
    catch_mid_write(proc, out, ".1-gpu.partial-*/*.bin")
    proc.send_signal(signal.SIGTERM)
    os.kill(proc.pid, signal.SIGCONT)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert sorted(p.name for p in out.iterdir()) == [".1-gpu.lock"]


@pytest.fixture
def readonly_dir(tmp_path):
    """A directory nobody can create entries in: mode 0555, plus the immutable flag when running as root (root
    ignores permission bits)."""
    import subprocess

    path = tmp_path / "ro"
    path.mkdir()
    path.chmod(0o555)
    as_root = os.geteuid() == 0
    if as_root:
        subprocess.run(["chattr", "+i", str(path)], check=True)
    yield path
    if as_root:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    path.chmod(0o755)


def test_read_only_output_directory_is_a_clear_error(cli, tmp_path, readonly_dir):
    src = gpt2_model().save(tmp_path / "hf")
    code, _, err = cli("convert", "--input", src, "--output", readonly_dir, "--tp", 1)
    assert code == 1
    assert err.startswith(f"error: cannot write to --output {readonly_dir}: ")
    assert err.rstrip().endswith("choose a writable directory")
    assert list(readonly_dir.iterdir()) == []


def test_an_in_process_conversion_gives_back_the_callers_sigterm_handling(cli, tmp_path):
    """SIGTERM unwinds a conversion while it runs; afterwards the process handles SIGTERM as before (a test run
    converting in-process must still stop when its own runner sends SIGTERM)."""

    def callers_handler(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    previous = signal.signal(signal.SIGTERM, callers_handler)
    try:
        src = t5_model().save(tmp_path / "hf")
        code, _, _ = cli("convert", "--input", src, "--output", tmp_path / "ft", "--tp", 1, "--workers", 1)
        assert code == 0
        assert signal.getsignal(signal.SIGTERM) is callers_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
