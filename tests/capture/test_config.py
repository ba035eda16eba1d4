"""Capture config: JSON + --field=value overrides, typed validation, helpful errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tracekit.capture.config import CaptureConfig, load_config, parse_overrides, to_dict
from tracekit.errors import InputError


def test_file_then_overrides_with_sections_and_json_values(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"workload": "transformer", "nproc": 2, "profiler": {"active": 2}}))
    overrides = parse_overrides(["--nproc", "8", "--profiler.wait=0", '--workload_args={"layers": 1}', "--nvtx=false"])
    config = load_config(path, overrides)
    assert (config.workload, config.nproc, config.nvtx) == ("transformer", 8, False)
    assert (config.profiler.wait, config.profiler.active) == (0, 2)
    assert config.workload_args == {"layers": 1}
    assert to_dict(config)["profiler"]["active"] == 2


def test_memory_flags_are_bare_flags() -> None:
    config = load_config(None, parse_overrides(["--memory-snapshot", "--memory-timeline", "--nproc", "2"]))
    assert (config.memory_snapshot, config.memory_timeline, config.nproc) == (True, True, 2)
    assert config.memory_saved_tensors
    default = load_config(None)
    assert not default.memory_snapshot and not default.memory_timeline
    assert not load_config(None, parse_overrides(["--memory_saved_tensors=false"])).memory_saved_tensors


def test_bare_flag_and_stray_words() -> None:
    assert parse_overrides(["--nsys", "--out_dir", "x"]) == {"nsys": "true", "out_dir": "x"}
    with pytest.raises(InputError, match="unexpected argument"):
        parse_overrides(["oops"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"batchsize": "3"}, "--batchsize=3: unknown config key batchsize; did you mean --batch_size?"),
        (
            {"profiler.activ": "3"},
            "--profiler.activ=3: unknown config key profiler.activ; did you mean --profiler.active?",
        ),
        ({"nproc": "eight"}, "--nproc=eight: expected an integer"),
        ({"profiler.active": "x"}, "--profiler.active=x: expected an integer"),
        ({"mixed_precision": "fp8"}, "--mixed_precision=fp8: expected one of no, fp16, bf16"),
        ({"nproc": "0"}, "--nproc=0: out of range: must be at least 1"),
        ({"measured_steps": "1", "warmup_steps": "0"}, "the profiler schedule needs 5 steps"),
        ({"prefetch_factor": "2"}, "prefetch_factor needs num_workers > 0"),
        ({"ddp_bucket_cap_mb": "0"}, "--ddp_bucket_cap_mb=0: out of range: must be a finite number above 0, or null"),
        ({"ddp_bucket_cap_mb": "-25"}, "--ddp_bucket_cap_mb=-25: out of range"),
        ({"ddp_bucket_cap_mb": "Infinity"}, "--ddp_bucket_cap_mb=Infinity: out of range"),
        ({"ddp_bucket_cap_mb": "big"}, "--ddp_bucket_cap_mb=big: expected a number or null"),
        ({"ddp_gradient_as_bucket_view": "yes"}, "--ddp_gradient_as_bucket_view=yes: expected true or false"),
        ({"optimizer_impl": "apex"}, "--optimizer_impl=apex: expected one of default, foreach, fused"),
        ({"env": "[1]"}, "--env=[1]: expected an object"),
        ({"env": '{"A": null}'}, "env.A must be a string or a number, got null"),
        ({"env": '{"A": {"B": "1"}}'}, "env.A must be a string or a number, got an object"),
        ({"env.A.B": "1"}, "env.A must be a string or a number, got an object"),
        ({"env.MY-VAR": "1"}, "env key 'MY-VAR' is not a variable name (letters, digits and _, not a digit first)"),
        ({"env.2X": "1"}, "env key '2X' is not a variable name"),
        ({"env": '{"A": "x\\u0000y"}'}, "env.A holds a NUL character"),
        ({"env.RANK": "3"}, "env.RANK: tracekit sets RANK for its ranks itself"),
        ({"env.MASTER_PORT": "29500"}, "env.MASTER_PORT: tracekit sets MASTER_PORT for its ranks itself"),
        ({"env.TRACEKIT_CAPTURE_RUN": "x"}, "env.TRACEKIT_CAPTURE_RUN: tracekit sets the TRACEKIT_* variables"),
        ({"env.ACCELERATE_USE_FSDP": "true"}, "env.ACCELERATE_USE_FSDP: tracekit sets the ACCELERATE_* variables"),
    ],
)
def test_errors_name_the_field(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as info:
        load_config(None, overrides)
    assert "\n" not in info.value.message


def test_a_bad_override_is_named_by_its_flag_not_blamed_on_the_file(tmp_path: Path) -> None:
    from tests.conftest import SAMPLES

    config = SAMPLES / "configs" / "healthy.json"
    with pytest.raises(InputError) as info:
        load_config(config, {"batch_size": "abc"})
    assert info.value.message == "--batch_size=abc: expected an integer"
    with pytest.raises(InputError) as info:
        load_config(config, {"nproc": "0"})
    assert info.value.message == "--nproc=0: out of range: must be at least 1"
    with pytest.raises(InputError) as info:
        load_config(config, {"batchsize": "3"})
    assert info.value.message == "--batchsize=3: unknown config key batchsize; did you mean --batch_size?"


def test_a_bad_value_in_the_file_names_the_file_the_field_and_the_range(tmp_path: Path) -> None:
    bad = tmp_path / "cfg.json"
    bad.write_text(json.dumps({"nproc": 0}))
    with pytest.raises(InputError) as info:
        load_config(bad, {"batch_size": "8"})  # an override that is fine does not take the blame
    assert info.value.message == f"{bad}: invalid config: nproc is out of range: must be at least 1, got 0"
    bad.write_text(json.dumps({"cuda_memory_fraction": 1.5}))
    with pytest.raises(InputError, match=re.escape("must be above 0 and at most 1, or null, got 1.5")):
        load_config(bad)
    bad.write_text(json.dumps({"batch_size": "abc"}))
    with pytest.raises(InputError, match=re.escape(f"{bad}: invalid config: Expected `int`, got `str`")):
        load_config(bad)


def test_the_knobs_a_doctor_tries_from_the_command_line() -> None:
    args = ["--ddp_bucket_cap_mb=100", "--ddp-gradient-as-bucket-view", "--optimizer_impl", "fused"]
    args += ["--env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "--env.OMP_NUM_THREADS=2"]
    args += ["--env.TK_FLAG=true", "--env.TK_NUM", "1e3"]
    config = load_config(None, parse_overrides(args))
    assert (config.ddp_bucket_cap_mb, config.ddp_gradient_as_bucket_view, config.optimizer_impl) == (100, True, "fused")
    # a variable's value is the text as written, never read as JSON
    assert config.env == {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "OMP_NUM_THREADS": "2",
        "TK_FLAG": "true",
        "TK_NUM": "1e3",
    }
    # a variable's name is kept as written (a field's - is its _): a bad one is refused, not renamed
    assert parse_overrides(["--env.TK-VAR=1", "--ddp-bucket-cap-mb=5"]) == {"env.TK-VAR": "1", "ddp_bucket_cap_mb": "5"}
    with pytest.raises(InputError, match="env key 'TK-VAR' is not a variable name"):
        load_config(None, parse_overrides(["--env.TK-VAR=1"]))
    recorded = to_dict(config)  # summary.json's config
    assert recorded["env"] == config.env and recorded["optimizer_impl"] == "fused"
    assert recorded["ddp_bucket_cap_mb"] == 100 and recorded["ddp_gradient_as_bucket_view"] is True
    default = load_config(None)
    assert (default.ddp_bucket_cap_mb, default.ddp_gradient_as_bucket_view) == (None, False)
    assert (default.optimizer_impl, default.env) == ("default", {})


def test_env_in_a_file_writes_numbers_as_text_and_the_command_line_adds_to_it(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"env": {"OMP_NUM_THREADS": 2, "TK_RATIO": 0.5, "TK_ON": False, "TK_NAME": "x"}}))
    config = load_config(path, parse_overrides(["--env.TK_NAME=y", "--env.TK_MORE=1"]))
    assert config.env == {"OMP_NUM_THREADS": "2", "TK_RATIO": "0.5", "TK_ON": "false", "TK_NAME": "y", "TK_MORE": "1"}
    whole = load_config(None, parse_overrides(['--env={"TK_A": 1}']))  # a whole object is JSON
    assert whole.env == {"TK_A": "1"}


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(InputError, match="not valid JSON"):
        load_config(bad)
    bad.write_text("[1]")
    with pytest.raises(InputError, match="must be a JSON object"):
        load_config(bad)


def test_sample_configs_are_valid() -> None:
    from tests.conftest import SAMPLES

    configs = sorted((SAMPLES / "configs").glob("*.json"))
    assert {p.stem for p in configs} >= {"healthy", "data_bound", "straggler"}
    for path in configs:  # 8 ranks, but the gradient-heavy sample is the 4-rank DDP run
        assert load_config(path).nproc == (4 if path.stem == "comms_bound" else 8)


def test_a_sample_config_never_writes_into_the_shipped_samples() -> None:
    """The README's ``tracekit capture --config_path samples/configs/healthy.json`` (no --out_dir)
    captures into the default folder, not over ``samples/captures/healthy``."""
    from tests.conftest import SAMPLES

    for path in sorted((SAMPLES / "configs").glob("*.json")):
        assert "out_dir" not in json.loads(path.read_text()), path
        out = Path(load_config(path).out_dir).resolve()
        assert out == Path("tracekit-capture").resolve() and not out.is_relative_to(SAMPLES.resolve())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"batch_size": str(10**30)}, f"--batch_size={10**30}: out of range: must be at most 2,147,483,647"),
        ({"max_grad_norm": "-1"}, "--max_grad_norm=-1: out of range: must be a finite number above 0, or null"),
        ({"max_grad_norm": "NaN"}, "--max_grad_norm=NaN: out of range: must be a finite number above 0, or null"),
        ({"nproc": "100000"}, "--nproc=100000: out of range: must be at most 4,096"),
        ({"profiler.wait": "-1"}, "--profiler.wait=-1: out of range: must be at least 0"),
    ],
)
def test_absurd_sizes_and_negative_norms_are_refused(override: dict[str, str], message: str) -> None:
    with pytest.raises(InputError) as info:
        load_config(None, override)
    assert info.value.message == message


def test_the_profiler_api_accepts_and_refuses_what_the_cli_does(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    for options, refused in (
        ({"measured_steps": 0}, "Profiler: measured_steps is out of range: must be at least 1, got 0"),
        ({"warmup_steps": -1}, "Profiler: warmup_steps is out of range: must be at least 0, got -1"),
        ({"active": 0}, "Profiler: profiler.active is out of range: must be at least 1, got 0"),
    ):
        with pytest.raises(InputError) as info:
            Profiler(out_dir=tmp_path, **options)
        assert info.value.message == refused
    with pytest.raises(InputError, match="measured_steps is out of range"):
        Profiler(CaptureConfig(measured_steps=0))  # a config built by hand is held to the same ranges
    with pytest.raises(TypeError, match=r"config must be a CaptureConfig \(.*load_config.*\), not a str"):
        Profiler("cfg.json")  # type: ignore[arg-type]
