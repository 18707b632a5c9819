"""How far a bfloat16 export's answers are from the float32 export's, on fine-tuned models.

For each GLUE task folder of `--data_dir` (e.g. ../shared/data/glue/SST-2,
../shared/data/glue/MRPC): `run_classifier.py` fine-tunes a small ALBERT (`--layers`,
`--hidden`, from random weights: predictions that are not trivial, in minutes on a CPU)
for `--train_steps` steps, evaluates it and exports it (`--export_dir`, float32, version
1); `export_savedmodel.py --serving_precision=bfloat16` exports its model.ckpt-best, the
same weights (version 2). Both SavedModels then answer the dev set through `serve_text`
in one process; printed per task: the dev accuracy of each, the share of dev examples
whose predictions agree, and the largest and mean |probability difference|. Without
bfloat16 instructions the CPU rounds the matmul inputs to bfloat16 and accumulates in
float32 as bfloat16 hardware does (up to summation order): the agreement carries over,
the speed does not (bench_serving.py).

    python benchmarks/bench_bf16_agreement.py \\
        --data_dir=../shared/data/glue/SST-2,../shared/data/glue/MRPC
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from absl import app, flags

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

flags.DEFINE_list("data_dir", [], "GLUE task folders (the folder name is the task).")
flags.DEFINE_string("spm_model_file", os.path.join(
    REPOSITORY, "tests", "fixtures", "spm", "albert_en_30k_reconstructed.model"),
    "SentencePiece model.")
flags.DEFINE_integer("train_steps", 300, "Fine-tuning steps.")
flags.DEFINE_integer("layers", 4, "Layers of the small model.")
flags.DEFINE_integer("hidden", 256, "Hidden size of the small model (E = H / 2).")
flags.DEFINE_integer("max_seq_length", 128, "max_seq_length of training and serving.")
flags.DEFINE_integer("batch_size", 32, "Training batch and serving request size.")
flags.DEFINE_integer("max_examples", 0, "Dev examples (0: all).")
flags.DEFINE_string("work_dir", None, "Where the runs go (default: a temporary folder).")
flags.DEFINE_integer("seed", 0, "Seed of the weights and of the data order.")

FLAGS = flags.FLAGS


def small_config(path: str) -> str:
    with open(os.path.join(REPOSITORY, "albert_tf", "configs", "albert_base_v2.json")) as f:
        config = json.load(f)
    config.update(num_hidden_layers=FLAGS.layers, hidden_size=FLAGS.hidden,
                  embedding_size=FLAGS.hidden // 2, intermediate_size=4 * FLAGS.hidden,
                  num_attention_heads=max(1, FLAGS.hidden // 64),
                  max_position_embeddings=max(FLAGS.max_seq_length, 128))
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def run(script: str, *args) -> None:
    done = subprocess.run([sys.executable, os.path.join(REPOSITORY, script), *args],
                          capture_output=True, text=True, cwd=REPOSITORY,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if done.returncode:
        sys.exit(f"{script} failed:\n{done.stderr[-3000:]}")


def compare(task_dir: str, export_dir: str) -> dict:
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the ops serve_text needs)

    from albert_tf.data import glue

    task = glue.get_task(os.path.basename(task_dir.rstrip("/")))
    examples = glue.GlueProcessor(task).get_dev_examples(os.path.dirname(task_dir))
    if FLAGS.max_examples:
        examples = examples[:FLAGS.max_examples]
    labels = np.array([task.labels.index(e.label) for e in examples])
    probabilities = {}
    for version, precision in (("1", "float32"), ("2", "bfloat16")):
        path = os.path.join(export_dir, version)
        with open(os.path.join(path, "assets.extra", "export_info.json")) as f:
            assert json.load(f)["serving_precision"] == precision, path
        serve = tf.saved_model.load(path).signatures["serve_text"]
        rows = []
        for start in range(0, len(examples), FLAGS.batch_size):
            batch = examples[start:start + FLAGS.batch_size]
            inputs = {"text_a": tf.constant([e.text_a for e in batch])}
            if task.is_pair:
                inputs["text_b"] = tf.constant([e.text_b for e in batch])
            rows.append(serve(**inputs)["probabilities"].numpy())
        probabilities[precision] = np.concatenate(rows)
    p32, p16 = probabilities["float32"], probabilities["bfloat16"]
    difference = np.abs(p32 - p16)
    return {"task": task.dir_name, "examples": len(examples),
            "accuracy_float32": float((p32.argmax(-1) == labels).mean()),
            "accuracy_bfloat16": float((p16.argmax(-1) == labels).mean()),
            "agreement": float((p32.argmax(-1) == p16.argmax(-1)).mean()),
            "max_abs_probability_difference": float(difference.max()),
            "mean_abs_probability_difference": float(difference.mean())}


def main(argv):
    del argv
    if not FLAGS.data_dir:
        raise app.UsageError("--data_dir: one GLUE task folder or more")
    work = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_bf16_")
    config = small_config(os.path.join(work, "albert_config.json"))
    results = []
    for task_dir in FLAGS.data_dir:
        task_dir = os.path.abspath(task_dir)
        name = os.path.basename(task_dir.rstrip("/"))
        out, export_dir = os.path.join(work, name), os.path.join(work, name, "export")
        common = [f"--albert_config_file={config}", f"--spm_model_file={FLAGS.spm_model_file}",
                  f"--max_seq_length={FLAGS.max_seq_length}"]
        run("run_classifier.py", *common, f"--task_name={name}", "--do_train", "--do_eval",
            f"--data_dir={os.path.dirname(task_dir)}", f"--output_dir={out}",
            f"--train_step={FLAGS.train_steps}", f"--warmup_step={FLAGS.train_steps // 10}",
            f"--train_batch_size={FLAGS.batch_size}", "--learning_rate=5e-4",
            f"--seed={FLAGS.seed}", f"--save_checkpoints_steps={FLAGS.train_steps}",
            f"--export_dir={export_dir}")
        run("export_savedmodel.py", *common, "--kind=classifier", f"--task_name={name}",
            f"--checkpoint={os.path.join(out, 'model.ckpt-best')}",
            f"--export_dir={export_dir}",
            "--serving_precision=bfloat16")
        results.append(compare(task_dir, export_dir))
    print(f"Small ALBERT: {FLAGS.layers} layers, H {FLAGS.hidden}, E {FLAGS.hidden // 2}, "
          f"{FLAGS.train_steps} fine-tuning steps of {FLAGS.batch_size} from random "
          f"weights (seed {FLAGS.seed}); dev sets through serve_text, float32 (v1) and "
          "bfloat16 (v2) exports of one checkpoint")
    print()
    print("| task | dev examples | accuracy fp32 | accuracy bf16 | predictions agreeing "
          "| max abs prob. difference | mean abs prob. difference |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['task']} | {r['examples']} | {r['accuracy_float32']:.4f} | "
              f"{r['accuracy_bfloat16']:.4f} | {100 * r['agreement']:.2f}% | "
              f"{r['max_abs_probability_difference']:.4f} | "
              f"{r['mean_abs_probability_difference']:.5f} |")


if __name__ == "__main__":
    app.run(main)
