"""The harness of benchmarks/bench_precision_agreement.py (a 1-layer model, a few
steps; it measures nothing): in a module of its own, so that the two test workers can
share the benchmark harnesses."""

import json

from tests.test_benchmarks import GLUE, REPOSITORY, run_benchmark


def test_bench_precision_agreement_compares_every_export_of_one_checkpoint(tmp_path):
    """The harness of benchmarks/bench_precision_agreement.py (a 1-layer model, a few
    steps; its figures mean nothing here): a GLUE task and SQuAD are fine-tuned and
    exported in float32 and bfloat16 SavedModels and an int8 LiteRT file, and every
    export answers every dev example and question, the SavedModels
    served in the environment the bfloat16 export names; the GLUE model also after
    Keras' own quantize("int8"), its int8 kernels smaller than the float32 weights."""
    from albert_tf.export import SERVING_ENVIRONMENTS, read_export_info, read_tflite_info

    task_dir = GLUE / "MRPC"
    squad = REPOSITORY / "tests" / "fixtures" / "squad" / "dev-v1.1-excerpt.json"
    output = tmp_path / "results.json"
    stdout = run_benchmark(
        "bench_precision_agreement.py", f"--data_dir={task_dir}", f"--squad_file={squad}",
        "--squad_train_articles=1", "--squad_max_seq_length=96", "--squad_train_steps=2",
        "--train_steps=4", "--batch_size=4", "--layers=1", "--hidden=64",
        "--max_seq_length=MRPC:32", "--litert_precisions=int8",
        f"--work_dir={tmp_path / 'work'}", f"--json_output={output}")
    results = json.loads(output.read_text())
    (glue,) = results["classification"]
    dev_rows = len((task_dir / "dev.tsv").read_text().splitlines()) - 1
    # (one LiteRT precision: each costs two more script runs; test_tflite checks all)
    exports = ["float32", "bfloat16", "LiteRT int8"]
    assert glue["task"].endswith("MRPC") and glue["examples"] == dev_rows
    assert list(glue["exports"]) == [*exports, "Keras int8"]
    weights = {name: e["weights_mb"] for name, e in glue["exports"].items()}
    # The vocabulary's float32 table (30,000 x 32) is most of this model, which Keras
    # keeps as it is; its dense kernels become int8.
    assert weights["LiteRT int8"] < weights["Keras int8"] < weights["float32"]
    assert glue["exports"]["float32"]["agreement"] == 1.0
    for name in exports:
        assert 0 <= glue["exports"][name]["agreement"] <= 1
        assert 0 <= glue["exports"][name]["max_abs_probability_difference"] <= 1
    for version in ("1", "2"):  # float32, then bfloat16, of the same checkpoint
        info = read_export_info(tmp_path / "work" / "MRPC" / "export" / version)
        assert info["serving_precision"] == ("float32" if version == "1" else "bfloat16")
    for task, kind in (("MRPC", "classifier"), ("squad", "squad_v1")):
        info = read_tflite_info(tmp_path / "work" / task / "litert" / "int8.tflite")
        assert (info["kind"], info["precision"]) == (kind, "int8")
    assert results["squad"]["examples"] == 9  # the questions of the other two articles
    assert list(results["squad"]["exports"]) == exports
    assert results["squad"]["exports"]["float32"]["answer_agreement"] == 1.0
    assert all(0 <= e["answer_agreement"] <= 1 for e in results["squad"]["exports"].values())
    assert results["served_in"] == " ".join(
        f"{k}={v}" for k, v in sorted(SERVING_ENVIRONMENTS["bfloat16"].items()))
    assert "| SavedModel float32 |" in stdout and "| LiteRT int8 |" in stdout
    assert '| Keras quantize("int8") |' in stdout
    assert f"| {glue['task']} | 32 | {dev_rows} | " in stdout
