"""The harness of benchmarks/bench_serving.py (a tiny model; it times nothing): in a
module of its own, the longest of the benchmark harnesses, so that the two test workers
can share them."""

import json

import pytest

from tests.helpers.tiny import write_tiny_config
from tests.test_benchmarks import _glue_task_dir, run_benchmark


def test_bench_serving_serves_the_exports_in_fresh_processes(tmp_path):
    """The harness of benchmarks/bench_serving.py (a tiny model, no peers; times
    nothing): the export served in a fresh process computes one position per real token,
    the padded export and the in-process pipeline more, the bfloat16 export one too,
    served in the environment its export_info.json names (`savedmodel_bf16_env`; the
    row without it, `savedmodel_bf16`, is the same child in another environment, left
    out: a fresh process each), the LiteRT files one too (the int8 file on
    Python-tokenized ids, the float32 file's serve_text on the raw texts: the two code
    paths of the four LiteRT rows); the batch-1 split of the latency into tokenizer and
    model is printed."""
    from albert_tf.export import SERVING_ENVIRONMENTS

    task_dir = _glue_task_dir()
    if task_dir is None:
        pytest.skip("no GLUE dev.tsv among the fixtures")
    from tests.helpers.scripts import SPM

    output = tmp_path / "results.json"
    stdout = run_benchmark(
        "bench_serving.py", f"--config={write_tiny_config(tmp_path)}",
        f"--spm_model_file={SPM}", f"--data_dir={task_dir}", "--peers=", "--rounds=1",
        "--repeats=1", "--matmul_size=64", "--batch_sizes=1,2", "--max_seq_length=64",
        "--length_multiple=8", f"--json_output={output}",
        "--ours=savedmodel,savedmodel_padded,savedmodel_bf16_env,"
        "litert_int8,litert_float32_text,keras_int8,in_process")
    assert "CPU flags:" in stdout and "bf16" in stdout
    assert "in-graph tokenizer" in stdout
    table = [line.split("|")[1:-1] for line in stdout.splitlines()
             if line.startswith(f"| {task_dir.name} |")]
    per_token = {(row[2].strip(), int(row[1])): float(row[-1]) for row in table}
    savedmodel = "ours, SavedModel serve_text"
    assert per_token[(savedmodel, 1)] == per_token[(savedmodel, 2)] == 1.0
    padded = [v for (name, batch), v in per_token.items() if "padded (real" in name]
    assert len(padded) == 2 and min(padded) == 1.0 < max(padded)  # batch 1: no padding
    assert any("in process" in name and v > 1.0 for (name, _), v in per_token.items())
    bfloat16 = "ours, SavedModel serve_text, bfloat16 export"
    for litert in ("ours, LiteRT int8 (Python tokenizer)",  # real tokens only
                   "ours, LiteRT float32 (raw text, tokenized in the file)",
                   'ours, Keras export after quantize("int8") (Python tokenizer)'):
        assert per_token[(litert, 1)] == per_token[(litert, 2)] == 1.0
        assert f"{litert}, one text per request: p50 " in stdout
    in_environment = f"{bfloat16}, served in its serving_environment"
    assert per_token[(in_environment, 1)] == per_token[(in_environment, 2)] == 1.0
    assert (f"{task_dir.name} batch 2: the bfloat16 export, in its serving_environment, "
            "serves ") in stdout
    results = json.loads(output.read_text())
    rows = results["rows"]
    # the FLOP bound of each request size's p50 request, at the measured peaks
    bounds = {b["batch"]: b for b in results["flop_bounds"]}
    assert sorted(bounds) == [1, 2] and 0 < bounds[1]["gflop"] <= bounds[2]["gflop"]
    for b in bounds.values():
        assert b["fp32_ms"] == pytest.approx(b["gflop"] / results["fp32_gflops"] * 1e3)
        assert b["bf16_ms"] == pytest.approx(b["gflop"] / results["bf16_gflops"] * 1e3)
        assert f"| {task_dir.name} | {b['batch']} | {b['gflop']:.3f} | " in stdout
    assert {r["variant"]: r["environment"] for r in rows if "SavedModel" in r["variant"]
            } == {savedmodel: {}, in_environment: SERVING_ENVIRONMENTS[
                "bfloat16"], f"{savedmodel}, padded (real-token inference off)": {}}
    assert all(r["rate"] > 0 for r in rows)
    assert len({r["examples"] for r in rows}) == 1 and rows[0]["examples"] > 2
    assert all(r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] for r in rows if "p50_ms" in r)
