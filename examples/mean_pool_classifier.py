"""A task of your own in one file: text classification on the mean of the token vectors.

    python run_classifier.py --task_module=examples/mean_pool_classifier.py \\
        --train_file=train.jsonl --dev_file=dev.jsonl --test_file=test.jsonl ...

reads JSON lines `{"text": ..., "label": ...}` and puts a head of its own on ALBERT:
the masked mean of the sequence output, then a dense layer (TF1 variables
`cls/mean_pool/dense/kernel` and `/bias`). `run_classifier.py` trains, evaluates every
kept checkpoint (accuracy picks `model.ckpt-best`), predicts and exports it
(`--export_dir`, `--export_tflite`) as it does its own tasks, and `export_savedmodel.py`
and `python -m albert_tf.convert` take the same `--task_module`; see "Your own task
in one file" in docs/your-own-task.md. The one registration is `@tasks.register` on
the task: the task names its serving kind, the kind its model, the model its head.
"""

import dataclasses
import json
import os

import numpy as np
import tensorflow as tf

from albert_tf import names, task_heads, tasks
from albert_tf.data import tabular
from albert_tf.data.report import SkipLog
from albert_tf.export import LabelRule, ServingKind, serving_text, tflite_text
from albert_tf.modeling import AlbertTaskModel
from albert_tf.training.objectives import MeanObjective

# The head, defined once: a dense layer H -> num_labels under its TF1 scope (no Hugging
# Face key). The model builds its layer from it; its variables (`cls/mean_pool/dense/
# kernel`, `/bias`) and their shapes tell this model in a checkpoint, for convert.
HEAD = task_heads.Head("mean_pool", (
    task_heads.Dense("cls/mean_pool/dense", lambda config, n: config.hidden_size,
                     lambda config, n: n),))


class MeanPoolClassifier(AlbertTaskModel):
    """logits = dense(mean of sequence_output over the real tokens): [B, num_labels]."""

    heads = (HEAD,)
    outputs_argument = "num_labels"  # what the head's size in a checkpoint gives
    reads_pooled_output = False  # the pooler is neither used nor needed in a checkpoint

    def __init__(self, config, num_labels, seed=None, **kwargs):
        super().__init__(config, seed, **kwargs)
        self.num_labels = num_labels
        layers = self.head_layers(HEAD, num_labels)  # built as its parts say
        self.dense = layers["cls/mean_pool/dense"]
        layers.build()

    def call(self, inputs, training=None):
        sequence = self.encoder(inputs, training=training)[names.SEQUENCE_OUTPUT]
        # (expand_dims: LiteRT has no strided slice that adds an axis)
        mask = tf.expand_dims(tf.cast(inputs[names.INPUT_MASK], sequence.dtype), -1)  # [B, S, 1]
        mean = tf.reduce_sum(sequence * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1)
        logits = tf.cast(self.dense(mean), tf.float32)  # [B, num_labels]
        probabilities = tf.nn.softmax(logits, -1)
        return {names.LOGITS: logits, names.PROBABILITIES: probabilities,
                names.PREDICTIONS: tf.argmax(logits, -1, output_type=tf.int32)}

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels}


# What --export_dir and --export_tflite write: the classifier's signatures, text in (in
# the LiteRT file too, --tflite_text). (its name is the model's for `convert --kind`)
SERVING_KIND = ServingKind(
    "mean_pool_classifier", MeanPoolClassifier,
    (names.LOGITS, names.PROBABILITIES, names.PREDICTIONS),
    serving_text.sentence_specs, serving_text.pack_sentences,
    model_arguments=("num_labels",), labels=LabelRule("num_labels", str),
    model_info=("num_labels",), lite_pack_text=tflite_text.pack_sentences)


@tasks.register  # the one registration: the scripts, the export and convert find it
class MeanPoolTask(tasks.Task):
    name = "mean_pool"
    metric = "eval_accuracy"
    serving_kinds = (SERVING_KIND,)

    @dataclasses.dataclass(frozen=True)
    class Options(tasks.Task.Options):  # its options: flags of the scripts too
        text_key: str = tasks.option("text", "mean_pool: the JSON key of the text.")

    def read(self, split, paths):
        rows = []
        for path in paths:
            # Each line read whole or skipped, named by file and line and counted (the
            # run's data_report.json, --max_skipped_rows), as the built-in tasks do.
            skips = SkipLog(f"{split} row", path)
            for where, row, _ in tabular.rows(path, skips):
                text, label = row.get(self.options.text_key), row.get("label")
                if not isinstance(text, str):
                    skips.skip(where, "missing field", f"no {self.options.text_key!r} text")
                elif split != "test" and not (isinstance(label, str) and label):
                    skips.skip(where, "no label", f"label {label!r}")
                elif split != "test" and self.labels and label not in self.labels:
                    skips.skip(where, "unknown label", f"label {label!r}")
                else:
                    rows.append((f"{split}-{len(rows)}", text, label))
                    skips.keep(*([label] if label is not None else []))
        return rows

    class Data(tasks.Task.Data):  # its labels: those of the training split (labels.txt)
        def discover_labels(self, examples):
            return sorted({label for _, _, label in examples if label is not None})

    def features(self, example):
        _, text, label = example
        return {**self.data.pack(text),
                names.LABEL_IDS: [self.labels.index(label) if label is not None else 0]}

    def build_model(self, config):
        return MeanPoolClassifier(config, len(self.labels), seed=self.options.seed)

    def objective(self):
        def loss(outputs, features):  # per example [B]
            return tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.reshape(features[names.LABEL_IDS], [-1]), outputs[names.LOGITS])

        return MeanObjective(loss)

    def metrics(self, examples, outputs):
        gold = np.reshape(outputs[names.LABEL_IDS], [-1])
        return {"eval_accuracy": float(np.mean(outputs[names.PREDICTIONS] == gold))}

    def write_predictions(self, examples, outputs, output_dir, step):
        path = os.path.join(output_dir, "mean_pool_predictions.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for (guid, _, _), prediction in zip(examples, outputs[names.PREDICTIONS]):
                f.write(json.dumps({"id": guid, "label": self.labels[prediction]}) + "\n")
        return path

    def export_options(self):
        return {"is_pair": False}  # serve_text takes text_a alone
