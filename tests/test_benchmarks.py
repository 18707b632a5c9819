"""benchmarks/bench_models.py runs and prints one well-formed Markdown table (a tiny
model, a few iterations, no peers: this checks the harness, it times nothing)."""

import json
import os
import pathlib
import sys

import pytest

from tests.helpers.forked import run_python
from tests.helpers.tiny import write_tiny_config

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = REPOSITORY / "benchmarks" / "bench_models.py"
GLUE = REPOSITORY / "tests" / "fixtures" / "glue"


def run_benchmark(name: str, *flags) -> str:
    """`python benchmarks/<name> flags...` from the repository root; asserts success,
    returns its stdout."""
    done = run_python([REPOSITORY / "benchmarks" / name, *flags], cwd=REPOSITORY,
                      timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _glue_task_dir():
    """A GLUE task folder with a dev.tsv among the test fixtures, if any."""
    for name in ("MRPC", "SST-2", "RTE", "CoLA"):
        if (GLUE / name / "dev.tsv").exists():
            return GLUE / name
    return None


def test_bench_models_prints_one_table(tmp_path):
    config = write_tiny_config(tmp_path)  # the SentencePiece fixture's vocabulary
    output = tmp_path / "results.json"
    task_dir = _glue_task_dir()
    flags = [f"--config={config}", "--peers=", "--rounds=1", "--repeats=1",
             "--train_steps=1", "--batch_size=2", "--seq_length=16", "--matmul_size=64",
             "--tokenize_texts=20", "--ours_variants=no_xla", "--e2e_batch_size=4",
             "--e2e_max_examples=8", "--max_seq_length=64", f"--json_output={output}"]
    if task_dir is not None:
        flags.append(f"--data_dir={task_dir}")
    lines = run_benchmark(SCRIPT.name, *flags).splitlines()
    assert lines[0].startswith("Machine: ")
    assert any(line.startswith("fp32 matmul peak: ") for line in lines)
    table = [line for line in lines if line.startswith("|")]
    # One table: its lines are contiguous, the header, the separator, then the rows.
    first = lines.index(table[0])
    assert lines[first:first + len(table)] == table
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header[:5] == ["benchmark", "implementation", "rate", "unit",
                          "ours (best) / this"]
    assert set(table[1].replace("|", "")) == {"-"}
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert all(len(row) == len(header) for row in rows)
    benchmarks = {row[0] for row in rows}
    assert {"forward", "train", "train:mixed_bfloat16", "tokenize",
            "create_pretraining_data"} <= benchmarks
    if task_dir is not None:
        assert f"end_to_end:{task_dir.name}" in benchmarks
    for row in rows:
        float(row[2].replace(",", ""))  # a number
    forward = [row for row in rows if row[0] == "forward"]
    assert forward[0][1] == "**ours, no XLA**" and forward[0][4] == "1.00x"
    assert forward[0][5] and forward[0][6].endswith("%")  # GFLOP/s and % of peak
    tokenize = {row[1] for row in rows if row[0] == "tokenize"}
    assert any("Python" in name for name in tokenize)
    assert any("in-graph" in name for name in tokenize)

    results = json.loads(output.read_text())
    assert results["peak_gflops"] > 0
    assert not results["skipped"]


def test_model_flops_formula():
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    try:
        import bench_models
    finally:
        sys.path.pop(0)
    from albert_tf import AlbertConfig

    base = AlbertConfig.from_json_file(REPOSITORY / "albert_tf" / "configs" /
                                       "albert_base_v2.json")
    # ALBERT-base, 128 tokens: ~22.4 GFLOP a sequence (12 blocks of 2 x 7.1 M
    # multiply-adds a token, the E -> H mapping, attention and the pooler).
    forward = bench_models.model_flops(base, 128)
    assert forward == pytest.approx(22.4e9, rel=0.01)
    assert bench_models.model_flops(base, 128, train=True) == 3 * forward


def test_bench_memory_compares_step_times_within_each_run():
    """bench_memory's time column: each run's own ratio at the largest batch timed in
    both, never one run's time against another's (the load differs between runs)."""
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    try:
        import bench_memory
    finally:
        sys.path.pop(0)

    def row(run, implementation, batch, seconds):
        return {"run": run, "name": "base", "seq": 128, "implementation": implementation,
                "batch": batch, "step_s": seconds}

    ours, recompute = ("base", 128, "ours"), ("base", 128, "ours_recompute")
    rows = [row("a.json", "ours", 4, 1.0), row("a.json", "ours_recompute", 4, 1.5),
            row("b.json", "ours", 4, 2.0), row("b.json", "ours_recompute", 4, 2.5),
            row("b.json", "ours", 1, 0.1), row("b.json", "ours_recompute", 1, 0.2),
            row("c.json", "ours_recompute", 8, 9.0)]  # no ours at batch 8: not compared
    assert bench_memory.time_ratios(rows, recompute, ours) == "1.50x, 1.25x (batch 4)"
    assert bench_memory.time_ratios(rows, ours, ours) == "1.00x, 1.00x (batch 4)"
    assert bench_memory.time_ratios(rows[:1], recompute, ours) == ""


def test_bench_resume_prints_its_table():
    """The harness of benchmarks/bench_resume.py on the small corpus (times nothing)."""
    from tests.helpers.paths import ALICE
    from tests.helpers.scripts import SPM

    stdout = run_benchmark(
        "bench_resume.py", f"--input_text={ALICE}", f"--spm_model_file={SPM}",
        "--batch_size=4", "--max_seq_length=32", "--max_predictions_per_seq=4",
        "--skips=0,3")
    rows = [line.split("|")[1:-1] for line in stdout.splitlines()
            if line.startswith("| records") or line.startswith("| input_text")]
    assert [(r[0].strip(), int(r[1])) for r in rows] == [
        ("records", 0), ("records", 3), ("input_text", 0), ("input_text", 3)]
    assert all(float(r[2]) > 0 for r in rows)
    assert "CPU flags:" in stdout


def test_profile_request_profiles_each_signature_in_the_settings_given(tmp_path):
    """The harness of benchmarks/profile_request.py (a tiny model, two requests; times
    nothing): each signature's ops per request and their time come from TensorFlow's
    profiler, in a process with the settings of its --environments entry (here oneDNN
    off: TensorFlow's own kernels run, none of oneDNN's)."""
    from tests.helpers.scripts import SPM

    output = tmp_path / "results.json"
    stdout = run_benchmark(
        "profile_request.py", f"--config={write_tiny_config(tmp_path)}",
        f"--spm_model_file={SPM}", f"--data_dir={GLUE / 'MRPC'}", "--examples=2",
        "--max_seq_length=64", "--environments=TF_ENABLE_ONEDNN_OPTS=0",
        f"--json_output={output}")
    (result,) = json.loads(output.read_text()).values()
    for signature in ("serve_text", "serving_default"):
        profile = result[signature]
        assert profile["p50_ms"] > 0 and profile["op_micros_per_request"] > 0
        ops = profile["ops"]
        assert profile["ops_per_request"] == pytest.approx(sum(c for c, _ in ops.values()))
        assert "_FusedMatMul" in ops and not any(op.startswith("_Mkl") for op in ops)
        assert f"{signature}: | settings |" in stdout
    # serve_text runs the tokenizer too: more ops than serving_default on its ids
    assert "TFText>FastSentencepieceTokenize" in result["serve_text"]["ops"]
    assert result["serve_text"]["ops_per_request"] > result["serving_default"][
        "ops_per_request"]
    assert "| TF_ENABLE_ONEDNN_OPTS=0 |" in stdout


@pytest.mark.skipif(not os.environ.get("ALBERT_TF_SERVING_PYTHON"),
                    reason="set ALBERT_TF_SERVING_PYTHON to an interpreter with "
                           "benchmarks/requirements-serving-compat.txt")
def test_every_export_loads_and_answers_the_same_under_tf_serving_2_20(tmp_path):
    """benchmarks/check_serving_compat.py (about 5 minutes on 2 cores: every kind,
    float32 and bfloat16, exported and called in both interpreters); its last figures
    are in BENCHMARKS.md."""
    stdout = run_benchmark("check_serving_compat.py",
                           f"--serving_python={os.environ['ALBERT_TF_SERVING_PYTHON']}",
                           f"--work_dir={tmp_path}")
    assert "served with TensorFlow 2.20" in stdout and "FAILED" not in stdout


def test_bench_memory_measures_each_row_in_a_process_and_sizes_batches(tmp_path):
    """The harness of benchmarks/bench_memory.py on a tiny model (its figures mean
    nothing here): one process per row, TensorFlow's allocator statistics for ours,
    the step time the best of --time_steps steps after the warm-up, the memory per
    sequence from the two batches and the largest batch per capacity from it; with LoRA,
    the weights it trains and the optimizer's state of them alone; ours with and without
    recompute timed in one process; a peer that does not import is skipped with a
    note."""
    # (wide enough that the activations, not the weights' gradients, make the peak)
    config = write_tiny_config(tmp_path, hidden_size=64, num_attention_heads=4,
                               intermediate_size=256, max_position_embeddings=128)
    output = tmp_path / "memory.json"
    stdout = run_benchmark(
        "bench_memory.py", f"--sizes={config}", "--seq_lengths=128", "--batch_sizes=2,6",
        "--implementations=ours_lora,transformers", "--time_steps=2", "--lora_rank=2",
        "--lora_ffn", "--paired_rounds=2", f"--json_output={output}")
    assert "CPU flags:" in stdout
    results = json.loads(output.read_text())
    rows = {(r["implementation"], r["batch"]): r for r in results["rows"]}
    paired = rows.pop(("ours_paired", 6))
    assert paired["kept_s"] > 0 and paired["recompute_s"] > 0 and paired["rounds"] == 2
    assert f"| albert_config.json | 128 | 6 | {paired['kept_s']:.2f} | " \
        f"{paired['recompute_s']:.2f} | {paired['ratio']:.2f}x (2 pairs) |" in stdout
    peers = {"transformers"} if any(k[0] == "transformers" for k in rows) else set()
    assert set(rows) == {(i, b) for i in ("ours_lora", *peers) for b in (2, 6)}
    if not peers:
        assert "- transformers skipped: transformers is not importable here" in stdout
    for (implementation, batch), row in rows.items():
        assert row["step_mb"] > 0 and row["step_s"] > 0 and row["time_steps"] == 2
        assert row["measured_by"] == ("RSS" if implementation == "transformers"
                                      else "TF allocator")
        assert f"| albert_config.json | 128 | {batch} | {implementation} | " in stdout
    lora = rows[("ours_lora", 6)]
    assert lora["step_mb"] > rows[("ours_lora", 2)]["step_mb"]
    # Trained, with AdamW's two slots each: the adapters (rank 2 on the one group's
    # query and value: 2 x (64 x 2 + 2 x 64); with --lora_ffn on its FFN's two denses:
    # (64 x 2 + 2 x 256) + (256 x 2 + 2 x 64)), the biases of those four denses
    # (2 x 64 + 256 + 64) and the head (2 x 64 + 2); the rest of the encoder frozen.
    assert (lora["lora_rank"], lora["lora_ffn"]) == (2, True)
    assert lora["parameters"] == 512 + 1280 + 448 + 130
    assert lora["all_parameters"] > 20 * lora["parameters"]
    assert lora["optimizer_mb"] == pytest.approx(2 * 4 * lora["parameters"] / 2**20,
                                                 abs=1e-4)
    assert f"| ours_lora | {lora['step_mb']:,.0f} | TF allocator | " \
        f"{lora['step_s']:.2f} | {lora['parameters']:,} | {lora['optimizer_mb']:,.1f} |" \
        in stdout
    for entry in results["per_sequence"]:
        small, large = rows[(entry["implementation"], 2)], rows[(entry["implementation"], 6)]
        assert entry["per_sequence_mb"] == pytest.approx(
            (large["step_mb"] - small["step_mb"]) / 4)
        if entry["implementation"].startswith("ours") and entry["per_sequence_mb"] > 0:
            # the weights and AdamW's two slots of those trained, float32, then what
            # stays, then sequences
            state = (entry["all_parameters"] * 4 + entry["parameters"] * 8) / 2**20
            free = 16 * 1024 - state - entry["fixed_mb"]
            assert f"| {int(free // entry['per_sequence_mb'])} | " in stdout


def test_bench_anchor_fine_tunes_a_bert_directory_with_lora(tmp_path):
    """The harness of benchmarks/bench_anchor.py without its peer (times nothing): a
    tiny BERT directory in transformers' layout fine-tuned with LoRA through
    run_classifier.py on the GLUE fixture, its dev accuracy in the table; without
    --peer_python the transformers row is left out and says so."""
    from tests.helpers.layouts import BERT, bert_state_dict, write_bert_directory

    bert = write_bert_directory(tmp_path / "bert", BERT, bert_state_dict(BERT, base=""),
                                "BertModel")
    stdout = run_benchmark(
        "bench_anchor.py", f"--init_checkpoint={bert}", f"--glue_dir={GLUE}",
        f"--work_dir={tmp_path / 'work'}", "--tasks=MRPC", "--steps=MRPC:2",
        "--rows=ours_lora,transformers", "--batch_size=4", "--max_seq_length=12",
        "--lora_ffn")
    assert "CPU flags:" in stdout and "no --peer_python" in stdout
    (row,) = [line.split("|")[1:-1] for line in stdout.splitlines()
              if line.startswith("| MRPC |")]
    assert [c.strip() for c in row[:4]] == ["MRPC", "ours_lora", "2", "0.001"]
    assert 0 <= float(row[4]) <= 1 and 0 <= float(row[5]) <= 1
    import numpy as np

    with np.load(tmp_path / "work" / "MRPC_ours_lora" / "lora_adapter.npz") as adapter:
        assert any("ffn" in name and "lora" in name for name in adapter.files), adapter.files


def test_bench_distill_teaches_students_of_a_bert_directory(tmp_path):
    """The harness of benchmarks/bench_distill.py (times nothing that is asserted): a
    tiny BERT directory fine-tuned as the teacher on the GLUE fixture, then its student
    of fewer passes distilled (the layers' losses first, then the soft targets from that
    checkpoint, both with augmented copies) and on the labels alone (for steps of their
    own), each with its dev accuracy, parameters, FLOPs and a LiteRT file; the teacher's
    outputs computed once per run."""
    from tests.helpers.layouts import BERT, bert_state_dict, write_bert_directory

    bert = write_bert_directory(tmp_path / "bert", BERT, bert_state_dict(BERT, base=""),
                                "BertModel")
    work = tmp_path / "work"
    stdout = run_benchmark(
        "bench_distill.py", f"--init_checkpoint={bert}", f"--glue_dir={GLUE}",
        f"--work_dir={work}", "--tasks=MRPC", "--steps=MRPC:2", "--student_steps=MRPC:3",
        "--students=passes", "--hidden_weight=0.5", "--attention_weight=2", "--two_stage",
        "--augment=2",
        "--student_layers=1", "--seeds=1", "--batch_size=4", "--max_seq_length=12",
        "--precisions=float32", "--latency_texts=3")
    assert "CPU flags:" in stdout
    rows = {cells[1]: cells for cells in ([c.strip() for c in line.split("|")[1:-1]]
                                           for line in stdout.splitlines()
                                           if line.startswith("| MRPC |"))}
    students = ["passes_distilled_hidden0.5_attention2_augment2_twostage_3steps",
                "passes_labels_3steps"]
    assert sorted(rows) == [*students, "teacher"]
    # the two-stage student: its first stage, then its second from that checkpoint
    first_stage = f"{students[0]}_stage1_seed1"
    for name, steps in (("teacher", 2), *((name + "_seed1", 3) for name in students),
                        (first_stage, 3)):
        assert f"global_step = {steps}" in (work / "MRPC" / name / "eval_results.txt"
                                            ).read_text()
    for cells in rows.values():
        assert 0 <= float(cells[3]) <= 1 and 0 <= float(cells[5]) <= 1
    # the student is the teacher with fewer passes (of a BERT's 3 groups, 1): fewer
    # parameters and FLOPs
    million = [float(rows[r][6].rstrip("M")) for r in (students[0], "teacher")]
    assert 0 < million[0] < million[1]
    assert 0 < float(rows[students[0]][7]) < float(rows["teacher"][7])
    assert rows["teacher"][-1] == "1.00x"
    assert len(list((work / "MRPC_cache").glob("*.teacher.tf_record"))) == 1
    assert sorted(p.name for p in (work / "litert").glob("*.tflite")) == [
        f"MRPC_{name}_float32.tflite" for name in sorted(rows)]


def test_bench_distill_scores_a_ner_student_by_its_f1(tmp_path):
    """The same harness on CLUENER (Chinese, the fixture's sentences) through
    run_ner.py: the teacher and its distilled 1-pass student of narrower FFNs (the
    training sentences and unlabeled ones of --transfer_files), each scored by seqeval's
    F1 (the metric column; no F1 column of its own), with a LiteRT file of the token
    classifier timed on the dev sentences. Run again with another setting, a finished
    run is refused."""
    from tests.helpers.layouts import BERT, bert_state_dict, write_bert_directory

    bert = write_bert_directory(tmp_path / "bert", BERT, bert_state_dict(BERT, base=""),
                                "BertModel")
    cluener = tmp_path / "ner" / "cluener"
    cluener.mkdir(parents=True)
    for split in ("train", "dev"):
        (cluener / f"{split}.json").write_bytes(
            (REPOSITORY / "tests" / "fixtures" / "ner" / f"cluener_{split}.json").read_bytes())
    transfer = tmp_path / "transfer.txt"  # two unlabeled sentences, a window each
    transfer.write_text("张三在北京工作。\n\n李四去了上海。\n", encoding="utf-8")
    work = tmp_path / "work"
    flags = [f"--init_checkpoint={bert}", f"--ner_dir={tmp_path / 'ner'}",
             f"--work_dir={work}", "--tasks=CLUENER", "--steps=CLUENER:2",
             "--students=passes", "--kinds=distilled", "--hidden_weight=1",
             "--hidden_layers=0", f"--transfer_files=CLUENER:{transfer}",
             "--student_layers=1", "--student_intermediate_size=10", "--seeds=1",
             "--batch_size=4", "--max_seq_length=12", "--precisions=float32",
             "--latency_texts=3"]
    stdout = run_benchmark("bench_distill.py", *flags)
    rows = {cells[1]: cells for cells in ([c.strip() for c in line.split("|")[1:-1]]
                                           for line in stdout.splitlines()
                                           if line.startswith("| CLUENER |"))}
    student = "passes_distilled_hidden1_transfer"
    assert sorted(rows) == [student, "teacher"]
    for name, run in (("teacher", "teacher"), (student, f"{student}_seed1")):
        scores = dict(line.split(" = ") for line in
                      (work / "CLUENER" / run / "eval_results.txt").read_text().splitlines())
        assert scores["global_step"] == "2"
        assert rows[name][3] == f"{float(scores['f1']):.3f}" and rows[name][5] == ""
    assert float(rows[student][7]) < float(rows["teacher"][7])
    # 1 pass of FFNs of 10 units, the teacher's most active of 24
    student_config = json.loads(
        (work / "CLUENER" / f"{student}_seed1" / "albert_config.json").read_text())
    assert (student_config["num_hidden_layers"], student_config["intermediate_size"]) == (1, 10)
    # its layer learns the teacher's first (the default: the last of 3)
    command = json.loads((work / "CLUENER" / f"{student}_seed1" / "bench_command.json")
                         .read_text())
    assert "--distill_hidden_layers=0" in command
    # the student trained on the training records and the transfer text's two windows,
    # labelled by the teacher
    (taught,) = (work / "CLUENER_cache").glob("*.teacher.tf_record.meta.json")
    train = taught.parent / taught.name.replace(".teacher", "")
    assert (json.loads(taught.read_text())["num_examples"]
            == json.loads(train.read_text())["num_examples"] + 2)
    assert sorted(p.name for p in (work / "litert").glob("*.tflite")) == [
        f"CLUENER_{name}_float32.tflite" for name in sorted(rows)]
    # a row's name does not say its --distill_alpha: a finished run of another is
    # refused, not reported as this one's
    done = run_python([REPOSITORY / "benchmarks" / "bench_distill.py", *flags,
                       "--distill_alpha=0.9"], cwd=REPOSITORY, timeout=300,
                      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode != 0
    assert f"{work / 'CLUENER' / student}_seed1 was trained by another command" in done.stderr


def test_bench_long_text_truncates_and_windows_the_same_documents(tmp_path):
    """The harness of benchmarks/bench_long_text.py (times nothing that is asserted): a
    few documents built from a tiny SST-2-like folder and the demo's novel excerpt, a
    tiny model trained truncating and in windows, each run's row, and its export's
    answers equal to its predictions; the windows runs' pooling columns, weighted 1 /
    windows, whole and capped at two windows a text in training."""
    from tests.helpers.paths import ALICE

    sst2 = tmp_path / "SST-2"
    sst2.mkdir()
    sentences = {0: ["a dull , lifeless film", "bad acting and worse writing"],
                 1: ["a warm and funny film", "the best film of the year"]}
    for split in ("train", "dev"):
        (sst2 / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(
            f"{s} \t{label}\n" for label, group in sentences.items() for s in group))
    work = tmp_path / "work"
    stdout = run_benchmark(
        "bench_long_text.py", f"--sst2_dir={sst2}", f"--filler_text={ALICE}",
        f"--work_dir={work}", "--config=tiny", "--seeds=1", "--train_steps=4",
        "--batch_size=4", "--train_docs=8", "--dev_docs=6", "--max_seq_length=32",
        "--min_pieces=40", "--max_pieces=60", "--min_words=1", "--serve_repeats=1",
        "--window_weights=inverse", "--window_caps=0,2")
    assert "CPU flags:" in stdout
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in stdout.splitlines()
            if line.startswith("| 1 |")]
    assert [row[1:4] for row in rows] == [
        ["truncate", "-", "-"], ["windows", "inverse", "0"], ["windows", "inverse", "2"]]
    for row in rows:
        assert all(0 <= float(x) <= 1 for x in row[4:7])
        assert float(row[7]) > 0 and float(row[9]) > 0 and float(row[10]) <= 1e-5
    # the pooling rules of each windows run's window logits (none for truncating)
    assert rows[0][11:] == ["-"] * 3
    for row in rows[1:]:
        assert all(0 <= float(x) <= 1 for x in row[11:14])
        assert float(row[11]) == float(row[4])  # the mean of logits is the run's rule
    # the cap: at most two training windows a text, every dev window
    capped, uncapped = (json.loads((work / f"windows_inverse{cap}_seed1" /
                                    "classification_train.tf_record.meta.json").read_text())
                        for cap in ("_cap2", ""))
    assert capped["settings"]["max_windows_per_text"] == 2
    assert capped["num_examples"] <= min(2 * 8, uncapped["num_examples"])
    assert (work / "windows_inverse_cap2_seed1" / "export").is_dir()
    assert "the runs' classes: yes" in stdout
    assert "6 of 6 cut" in stdout and "(within 1e-5)" in stdout
    assert (work / "windows_inverse_seed1" / "export").is_dir()
    # every document holds the SST-2 sentences of its label, in a passage of the novel
    documents = [json.loads(line) for line in
                 (work / "data" / "train.jsonl").read_text().splitlines()]
    assert len(documents) == 8 and sorted(d["label"] for d in documents) == [0] * 4 + [1] * 4
    for document in documents:
        assert sum(s in document["text"] for s in sentences[document["label"]]) == 2
        assert not any(s in document["text"] for s in sentences[1 - document["label"]])
