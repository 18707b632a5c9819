"""How far the reduced-precision exports' answers are from float32's, on fine-tuned models:
the bfloat16 SavedModel and the LiteRT files (float32, float16, dynamic-range int8).

For each GLUE task folder of `--data_dir` (e.g. ../shared/data/glue/SST-2,
../shared/data/glue/MRPC): `run_classifier.py` fine-tunes a small ALBERT (`--layers`,
`--hidden`, from random weights: predictions that are not trivial, in minutes on a CPU)
for `--train_steps` steps, evaluates it and exports it (`--export_dir`, float32, version
1); `export_savedmodel.py --serving_precision=bfloat16` exports its model.ckpt-best, the
same weights (version 2), and `export_savedmodel.py --export_tflite` writes them as a
LiteRT file of each of `--litert_precisions` (the first in the bfloat16 export's run).
Both SavedModels answer the dev set through `serve_text` in one process, which has the
environment their export_info.json names (the bfloat16 export's `serving_environment`;
the runs that train never get it); the LiteRT
files answer it through `ai_edge_litert` (XNNPACK), the texts tokenized by
`FullTokenizer` and packed by `packing.pack_batch` as a LiteRT client does. Printed per
task and export: the dev accuracy, the share of each class among the float32
predictions (non-trivial predictions use more than one), the share of dev examples whose
predictions agree with the float32 SavedModel's, and the largest and mean |probability
difference| from it.

With `--squad_file` (e.g. ../shared/data/squad/dev-v1.1.json, the only SQuAD with
answers among the shared data): its first `--squad_train_articles` articles train a
model of the same size with `run_squad.py` (about `--squad_train_steps` steps), which exports
float32 (version 1); a second `run_squad.py --do_predict --serving_precision=bfloat16`
on the same output folder exports bfloat16 (version 2), and `run_squad.py --do_predict
--export_tflite` the LiteRT files. Every question of the other articles
is asked (the context cut to one window of `--squad_max_seq_length`, as serve_text
does): the SavedModels through `serve_text`, the LiteRT files on the token ids that the
float32 `serve_text` packed (the same window), `postprocess_serve_text` reading the
answers of each; printed: exact match and F1 of each against the gold answers, and the
share of questions whose answers are the same text as the float32 SavedModel's.

Without bfloat16 instructions the CPU rounds the matmul inputs to bfloat16 and
accumulates in float32 as bfloat16 hardware does (up to summation order): the agreement
carries over, the speed does not (bench_serving.py). A task whose output folder in
`--work_dir` holds a finished run is not trained again (the scripts resume), and its
files are not written again.

    python benchmarks/bench_precision_agreement.py \\
        --data_dir=../shared/data/glue/SST-2,../shared/data/glue/MRPC \\
        --squad_file=../shared/data/squad/dev-v1.1.json
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from absl import app, flags

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)
from benchmarks import children  # noqa: E402

flags.DEFINE_list("data_dir", [], "GLUE task folders (the folder name is the task).")
flags.DEFINE_string("spm_model_file", os.path.join(
    REPOSITORY, "tests", "fixtures", "spm", "albert_en_30k_reconstructed.model"),
    "SentencePiece model.")
flags.DEFINE_integer("train_steps", 600, "Fine-tuning steps.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate (10% warmup, then linear "
                   "decay). From random weights, 5e-4 left these models at chance.")
flags.DEFINE_integer("layers", 4, "Layers of the small model.")
flags.DEFINE_integer("hidden", 256, "Hidden size of the small model (E = H / 2).")
flags.DEFINE_list("max_seq_length", ["SST-2:64", "MRPC:128"], "max_seq_length of "
                  "training and serving: TASK:LENGTH entries; 128 for a task not named.")
flags.DEFINE_string("squad_file", None, "SQuAD v1.1 JSON with answers: its first "
                    "--squad_train_articles articles train, the others are asked.")
flags.DEFINE_integer("squad_train_articles", 40, "Articles of --squad_file that train.")
flags.DEFINE_integer("squad_max_seq_length", 192, "SQuAD's max_seq_length.")
flags.DEFINE_integer("squad_train_steps", 300, "SQuAD's fine-tuning steps (about: "
                     "run_squad.py counts epochs).")
flags.DEFINE_integer("batch_size", 32, "Training batch and serving request size.")
flags.DEFINE_integer("max_examples", 0, "Dev examples (0: all).")
flags.DEFINE_string("work_dir", None, "Where the runs go (default: a temporary folder).")
flags.DEFINE_integer("seed", 0, "Seed of the weights and of the data order.")
flags.DEFINE_list("litert_precisions", ["float32", "float16", "int8"], "LiteRT files "
                  "written from the same checkpoint and compared (none: SavedModels only).")
flags.DEFINE_list("keras_quantize", ["int8"], "Modes of Keras' own model.quantize "
                  "applied to the same checkpoint's model (in memory) and compared.")
flags.DEFINE_string("json_output", None, "Also write the results to this file.")

FLAGS = flags.FLAGS


def small_config(path: str) -> str:
    with open(os.path.join(REPOSITORY, "albert_tf", "configs", "albert_base_v2.json")) as f:
        config = json.load(f)
    config.update(num_hidden_layers=FLAGS.layers, hidden_size=FLAGS.hidden,
                  embedding_size=FLAGS.hidden // 2, intermediate_size=4 * FLAGS.hidden,
                  num_attention_heads=max(1, FLAGS.hidden // 64),
                  max_position_embeddings=max([FLAGS.squad_max_seq_length, 128] + [
                      seq_length(task) for task in FLAGS.data_dir]))
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def seq_length(task_dir: str) -> int:
    """The task's --max_seq_length entry (TASK:LENGTH), 128 if it has none."""
    lengths = dict(entry.rsplit(":", 1) for entry in FLAGS.max_seq_length)
    return int(lengths.get(os.path.basename(task_dir.rstrip("/")), 128))


# The environment this process started with: the runs that train get it unchanged
# (serve_texts sets what the exports ask for in this process alone).
STARTED_WITH = dict(os.environ)


def run(script: str, *args) -> None:
    done = children.run([sys.executable, os.path.join(REPOSITORY, script), *args],
                          capture_output=True, text=True, cwd=REPOSITORY,
                          env=dict(STARTED_WITH, TF_CPP_MIN_LOG_LEVEL="2"))
    if done.returncode:
        sys.exit(f"{script} failed:\n{done.stderr[-3000:]}")


def serve_texts(export_dir: str):
    """(precision, serve_text) of the float32 (version 1) and bfloat16 (version 2)
    exports, each checked against its export_info.json, served as a server would: in the
    environment their export_info.json names (`serving_environment`), set before this
    process runs its first TensorFlow kernel, which reads it (the first call of
    serve_texts; every export of a run asks for the same)."""
    from albert_tf.export import read_export_info

    paths = {precision: os.path.join(export_dir, version)
             for version, precision in (("1", "float32"), ("2", "bfloat16"))}
    for precision, path in paths.items():
        info = read_export_info(path)
        assert info["serving_precision"] == precision, path
        os.environ.update(info["serving_environment"])
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the ops serve_text needs)

    for precision, path in paths.items():
        yield precision, tf.saved_model.load(path).signatures["serve_text"]


def litert_path(tflite_dir: str, precision: str) -> str:
    return os.path.join(tflite_dir, f"{precision}.tflite")


def litert_runners(tflite_dir: str):
    """(export name, serving_default runner) of each --litert_precisions file."""
    from ai_edge_litert.interpreter import Interpreter

    for precision in FLAGS.litert_precisions:
        yield f"LiteRT {precision}", Interpreter(
            model_path=litert_path(tflite_dir, precision),
            num_threads=os.cpu_count()).get_signature_runner()


def agreement(reference, other) -> dict:
    """Predictions (argmax) of `other` agreeing with `reference`'s, and the probability
    differences, over rows of class probabilities."""
    import numpy as np

    difference = np.abs(reference - other)
    return {"agreement": float((reference.argmax(-1) == other.argmax(-1)).mean()),
            "max_abs_probability_difference": float(difference.max()),
            "mean_abs_probability_difference": float(difference.mean())}


def directory_mb(path: str) -> float:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names) / 2**20


def keras_quantized(config_file: str, checkpoint: str, num_labels: int, mode: str):
    """The checkpoint's classifier after Keras' `model.quantize(mode)` (in memory), and
    its weights' MB as quantized (int8 kernels and their scales; what Keras does not
    quantize stays float32: the embeddings, LayerNorm)."""
    import warnings

    from albert_tf import AlbertClassifier, AlbertConfig, load_tf1_checkpoint

    model = AlbertClassifier(AlbertConfig.from_json_file(config_file), num_labels)
    load_tf1_checkpoint(model, checkpoint, strict=True)
    with warnings.catch_warnings():  # "Layer LayerNorm / Dropout does not have a
        warnings.simplefilter("ignore")  # `quantize` method": nothing there to quantize
        model.quantize(mode)
    return model, sum(v.numpy().nbytes for v in model.weights) / 2**20


def compare(task_dir: str, export_dir: str, tflite_dir: str, config_file: str,
            checkpoint: str) -> dict:
    import numpy as np
    import tensorflow as tf

    from albert_tf.data import glue
    from albert_tf.packing import pack_batch
    from albert_tf.tokenization import FullTokenizer

    task = glue.get_task(os.path.basename(task_dir.rstrip("/")))
    examples = glue.GlueProcessor(task).get_dev_examples(os.path.dirname(task_dir))
    if FLAGS.max_examples:
        examples = examples[:FLAGS.max_examples]
    batches = [examples[start:start + FLAGS.batch_size]
               for start in range(0, len(examples), FLAGS.batch_size)]
    labels = np.array([task.labels.index(e.label) for e in examples])
    probabilities, weights_mb = {}, {}
    for precision, serve in serve_texts(export_dir):
        weights_mb[precision] = directory_mb(os.path.join(
            export_dir, "1" if precision == "float32" else "2", "variables"))
        rows = []
        for batch in batches:
            inputs = {"text_a": tf.constant([e.text_a for e in batch])}
            if task.is_pair:
                inputs["text_b"] = tf.constant([e.text_b for e in batch])
            rows.append(serve(**inputs)["probabilities"].numpy())
        probabilities[precision] = np.concatenate(rows)
    tokenizer = FullTokenizer(spm_model_file=FLAGS.spm_model_file, do_lower_case=True)
    ids = {"cls_id": tokenizer.special_id("[CLS]"), "sep_id": tokenizer.special_id("[SEP]")}
    packed = [pack_batch([[tokenizer.encode(text) for text in (e.text_a, e.text_b)
                           if text is not None] for e in batch], seq_length(task_dir), **ids)
              for batch in batches]
    for name, runner in litert_runners(tflite_dir):
        weights_mb[name] = os.path.getsize(litert_path(
            tflite_dir, name.split()[-1])) / 2**20
        probabilities[name] = np.concatenate([runner(**inputs)["probabilities"]
                                              for inputs in packed])
    from albert_tf.modeling import real_tokens

    for mode in FLAGS.keras_quantize:  # the model itself, on the same packed ids
        model, weights_mb[f"Keras {mode}"] = keras_quantized(
            config_file, checkpoint, len(task.labels), mode)
        with real_tokens.inference_graph():  # as every export computes
            probabilities[f"Keras {mode}"] = np.concatenate([
                model(inputs)["probabilities"].numpy() for inputs in packed])
    reference = probabilities["float32"]
    shares = np.bincount(reference.argmax(-1), minlength=len(task.labels)) / len(examples)
    return {"task": task.dir_name, "examples": len(examples),
            "float32_prediction_shares": {label: float(share) for label, share in
                                          zip(task.labels, shares)},
            "exports": {name: dict(agreement(reference, p),
                                   accuracy=float((p.argmax(-1) == labels).mean()),
                                   weights_mb=weights_mb[name])
                        for name, p in probabilities.items()}}


def served_in() -> str:
    """The variables of this process that exports may ask for, as NAME=value."""
    from albert_tf.export import serving_environment_now

    return " ".join(f"{k}={v}" for k, v in serving_environment_now().items())


def finished(export_dir: str, tflite_dir: str) -> bool:
    """Both SavedModels (float32 version 1, bfloat16 version 2) and the LiteRT files are
    there: a finished run."""
    return all(os.path.exists(os.path.join(export_dir, v, "saved_model.pb")) for v in "12") \
        and all(os.path.exists(litert_path(tflite_dir, p)) for p in FLAGS.litert_precisions)


def export_bfloat16_and_litert(tflite_dir: str, script: str, args, savedmodel) -> None:
    """`script` (with `args`) writing the bfloat16 SavedModel (where `savedmodel`'s flags
    say) and the first of --litert_precisions in one run, then a run with
    `--export_tflite` for each other precision."""
    for index, precision in enumerate(FLAGS.litert_precisions or [None]):
        litert = [] if precision is None else [
            "--tflite_precision=" + precision,
            "--export_tflite=" + litert_path(tflite_dir, precision)]
        run(script, *args, *litert,
            *(savedmodel + ["--serving_precision=bfloat16"] if index == 0 else []))


def split_squad(path: str, work: str) -> tuple[str, str]:
    """--squad_file's first --squad_train_articles articles, and the others, as files."""
    with open(path) as f:
        document = json.load(f)
    articles = document["data"]
    if not 0 < FLAGS.squad_train_articles < len(articles):
        raise app.UsageError(f"--squad_train_articles: 1 to {len(articles) - 1} (the "
                             f"{path} has {len(articles)} articles)")
    files = []
    for part, chosen in (("train", articles[:FLAGS.squad_train_articles]),
                         ("asked", articles[FLAGS.squad_train_articles:])):
        files.append(os.path.join(work, f"squad_{part}.json"))
        with open(files[-1], "w") as f:
            json.dump(dict(document, data=chosen), f)
    return files[0], files[1]


def compare_squad(asked_file: str, export_dir: str, tflite_dir: str) -> dict:
    import tensorflow as tf

    from albert_tf import names
    from albert_tf.data.squad.examples import read_squad_examples
    from albert_tf.evaluation.squad_metrics import evaluate_v1
    from albert_tf.evaluation.squad_postprocess import postprocess_serve_text

    questions = read_squad_examples(asked_file, is_training=False)
    batches = [questions[start:start + FLAGS.batch_size]
               for start in range(0, len(questions), FLAGS.batch_size)]
    outputs = {}  # export -> each batch's serve_text outputs (LiteRT's logits in them)
    for precision, serve in serve_texts(export_dir):
        outputs[precision] = []
        for batch in batches:
            served = serve(question=tf.constant([e.question_text for e in batch]),
                           context=tf.constant([e.paragraph_text for e in batch]))
            outputs[precision].append({k: v.numpy() for k, v in served.items()})
    for name, runner in litert_runners(tflite_dir):
        outputs[name] = [dict(served, **runner(**{k: served[k] for k in names.MODEL_INPUTS}))
                         for served in outputs["float32"]]
    answers = {}
    for name, served_batches in outputs.items():
        answers[name] = {}
        for batch, served in zip(batches, served_batches):
            answers[name].update(postprocess_serve_text(
                [e.question_text for e in batch], [e.paragraph_text for e in batch],
                served, qas_ids=[e.qas_id for e in batch]).predictions)
    reference = answers["float32"]
    exports = {}
    for name, predicted in answers.items():
        scores = evaluate_v1(questions, predicted)
        exports[name] = {"exact_match": scores["exact_match"], "f1": scores["f1"],
                         "answer_agreement": sum(reference[i] == predicted[i]
                                                 for i in reference) / len(reference)}
    return {"task": "SQuAD v1.1", "examples": len(questions), "exports": exports}


def main(argv):
    del argv
    if not FLAGS.data_dir and not FLAGS.squad_file:
        raise app.UsageError("--data_dir (GLUE task folders) and/or --squad_file")
    work = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_precision_")
    os.makedirs(work, exist_ok=True)
    config = small_config(os.path.join(work, "albert_config.json"))
    model = [f"--albert_config_file={config}", f"--spm_model_file={FLAGS.spm_model_file}",
             f"--seed={FLAGS.seed}", f"--learning_rate={FLAGS.learning_rate}"]
    results = []
    for task_dir in FLAGS.data_dir:
        task_dir = os.path.abspath(task_dir)
        name = os.path.basename(task_dir.rstrip("/"))
        out, export_dir = os.path.join(work, name), os.path.join(work, name, "export")
        tflite_dir = os.path.join(out, "litert")
        if not finished(export_dir, tflite_dir):
            shutil.rmtree(export_dir, ignore_errors=True)  # versions 1 and 2 from here
            common = model + [f"--max_seq_length={seq_length(task_dir)}"]
            run("run_classifier.py", *common, f"--task_name={name}", "--do_train",
                "--do_eval", f"--data_dir={os.path.dirname(task_dir)}",
                f"--output_dir={out}", f"--train_step={FLAGS.train_steps}",
                f"--warmup_step={FLAGS.train_steps // 10}",
                f"--train_batch_size={FLAGS.batch_size}",
                f"--save_checkpoints_steps={FLAGS.train_steps}",
                f"--export_dir={export_dir}")
            exporting = [*common[:2], "--kind=classifier",
                         f"--max_seq_length={seq_length(task_dir)}", f"--task_name={name}",
                         f"--checkpoint={os.path.join(out, 'model.ckpt-best')}"]
            export_bfloat16_and_litert(tflite_dir, "export_savedmodel.py", exporting,
                                       [f"--export_dir={export_dir}", "--version=2"])
        results.append(compare(task_dir, export_dir, tflite_dir, config,
                               os.path.join(out, "model.ckpt-best")))
    squad = None
    if FLAGS.squad_file:
        train_file, asked_file = split_squad(FLAGS.squad_file, work)
        out, export_dir = os.path.join(work, "squad"), os.path.join(work, "squad", "export")
        tflite_dir = os.path.join(out, "litert")
        if not finished(export_dir, tflite_dir):
            from albert_tf.data.squad.examples import read_squad_examples

            count = len(read_squad_examples(train_file, is_training=False))
            shutil.rmtree(export_dir, ignore_errors=True)
            common = model + [f"--max_seq_length={FLAGS.squad_max_seq_length}",
                              f"--output_dir={out}", f"--predict_file={asked_file}",
                              "--do_predict"]
            run("run_squad.py", *common, "--do_train", f"--train_file={train_file}",
                f"--train_batch_size={FLAGS.batch_size}",
                f"--num_train_epochs={FLAGS.squad_train_steps * FLAGS.batch_size / count}",
                f"--save_checkpoints_steps={FLAGS.squad_train_steps}",
                f"--export_dir={export_dir}")
            # (run_squad.py keeps its weights in the run's checkpoint alone: its own
            # --export_tflite writes the files, predicting once more each time)
            export_bfloat16_and_litert(tflite_dir, "run_squad.py", common,
                                       [f"--export_dir={export_dir}"])
        squad = compare_squad(asked_file, export_dir, tflite_dir)
    print(f"Small ALBERT: {FLAGS.layers} layers, H {FLAGS.hidden}, E {FLAGS.hidden // 2}, "
          f"about {FLAGS.train_steps} fine-tuning steps of {FLAGS.batch_size} from random "
          f"weights, learning rate {FLAGS.learning_rate:g} (seed {FLAGS.seed}); "
          "float32 (v1) and bfloat16 (v2) SavedModels of one checkpoint through serve_text "
          f"in a process with {served_in() or 'no variable the exports ask for'}; LiteRT "
          f"files ({', '.join(FLAGS.litert_precisions) or 'none'}) of the same checkpoint")
    if results:
        print()
        print("| task | max_seq_length | dev examples | fp32 predictions by class | export "
              "| weights MB | accuracy | predictions agreeing with fp32 SavedModel "
              "| max abs prob. difference | mean abs prob. difference |")
        print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|")
        for r in results:
            shares = ", ".join(f"{label} {100 * share:.0f}%" for label, share in
                               r["float32_prediction_shares"].items())
            for name, e in r["exports"].items():
                print(f"| {r['task']} | {seq_length(r['task'])} | {r['examples']} | "
                      f"{shares} | {export_label(name)} | {e['weights_mb']:.2f} | "
                      f"{e['accuracy']:.4f} | "
                      f"{100 * e['agreement']:.2f}% | "
                      f"{e['max_abs_probability_difference']:.4f} | "
                      f"{e['mean_abs_probability_difference']:.5f} |")
    if squad:
        print()
        print(f"SQuAD v1.1 ({os.path.basename(FLAGS.squad_file)}: "
              f"{FLAGS.squad_train_articles} articles train for about "
              f"{FLAGS.squad_train_steps} steps, {squad['examples']} questions "
              f"of the others asked, max_seq_length {FLAGS.squad_max_seq_length}):")
        print()
        print("| export | exact match | F1 | answers identical to fp32 SavedModel's |")
        print("|---|---:|---:|---:|")
        for name, e in squad["exports"].items():
            print(f"| {export_label(name)} | {e['exact_match']:.2f} | {e['f1']:.2f} | "
                  f"{100 * e['answer_agreement']:.2f}% |")
    if FLAGS.json_output:
        with open(FLAGS.json_output, "w") as f:
            json.dump({"classification": results, "squad": squad,
                       "served_in": served_in()}, f, indent=1)


def export_label(name: str) -> str:
    """How a table names an export: the SavedModels by precision, LiteRT files as such,
    Keras' quantized model by its mode."""
    if name in ("float32", "bfloat16"):
        return f"SavedModel {name}"
    return f"Keras quantize(\"{name.split()[-1]}\")" if name.startswith("Keras ") else name


if __name__ == "__main__":
    app.run(main)
