"""Distillation in the fine-tuning driver (--teacher_checkpoint): the teacher checked
and loaded before any work (a checkpoint of any layout we read, or a SavedModel export
called through its `serving_default`), its outputs on the training records computed
once and cached beside them (a student step runs no teacher, unless it learns the
teacher's hidden states or attention too: --distill_hidden_weight,
--distill_attention_weight), with --transfer_file's texts
labelled by it among them, the objective that mixes them with the labels, and the
student started from the teacher's weights where it is the teacher with fewer layer
passes (`albert_tf.training.distillation`)."""

from __future__ import annotations

import dataclasses
import heapq
import os
import tempfile

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio, names
from albert_tf.apps.extension import Extension
from albert_tf.apps.model_files import STUDENT_SHAPE, check_length, load_config, student_shape
from albert_tf.checkpoints import CheckpointError, release
from albert_tf.config import ConfigError
from albert_tf.data import augmentation, cache, records
from albert_tf.errors import UsageError
from albert_tf.modeling import common
from albert_tf.tasks.base import Task
from albert_tf.training import distillation
from albert_tf.training.loop import predict


@dataclasses.dataclass
class Teacher:
    model: object
    output: str      # the model output the student learns
    soft_loss: str   # `distillation.SOFT_LOSSES`


def distilling(options) -> bool:
    return bool(options.teacher_checkpoint)


def student_config(options, config):
    """The run's config, or with `model_files.STUDENT_SHAPE`'s flags the teacher's with
    fewer passes or groups or narrower FFNs (the config `check_setup` returns)."""
    shape = student_shape(options)
    if not shape:
        return config
    return distillation.student_config(config, **shape)


def _tokenizer_file(files_or_options) -> str | None:
    return files_or_options.spm_model_file or files_or_options.vocab_file


def check_teacher(task, options, config):
    """Before any work (a task that is not distilled has refused the options already:
    `session.check_distilled`): a teacher config whose vocabulary and tokenizer are the
    student's; returns the teacher's config."""
    if not options.distill_temperature > 0:
        raise UsageError(f"--distill_temperature={options.distill_temperature}: it must be "
                         "positive")
    if not 0.0 <= options.distill_alpha <= 1.0:
        raise UsageError(f"--distill_alpha={options.distill_alpha}: the soft targets' "
                         "weight is in [0, 1]")
    files = options.teacher_files
    teacher_config = load_config(options.teacher_config_file, files.layout)
    if teacher_config.vocab_size != config.vocab_size:
        raise UsageError(
            f"the teacher ({options.teacher_checkpoint}) has a vocabulary of "
            f"{teacher_config.vocab_size} and the student {config.vocab_size}: a student "
            "learns from its teacher's outputs on the same ids")
    ours, theirs = _tokenizer_file(options), _tokenizer_file(files)
    if ours and theirs and cache.file_sha256(ours) != cache.file_sha256(theirs):
        raise UsageError(
            f"the teacher's tokenizer {theirs} is not the student's {ours}: a student "
            "learns from its teacher's outputs on the same ids")
    check_length(options.max_seq_length, teacher_config, "the teacher's")
    layer_map(options, teacher_config, student_config(options, config))
    groups = teacher_groups(options)
    if groups is not None:
        if not student_shape(options):
            raise UsageError("--student_teacher_groups: the student starts from the "
                             "teacher's groups only where it is made of the teacher's "
                             f"weights ({', '.join('--' + n for n in STUDENT_SHAPE)})")
        student = student_config(options, teacher_config)
        try:
            distillation.group_map(teacher_config, student, groups)
        except ConfigError as e:
            raise UsageError(f"--student_teacher_groups={','.join(map(str, groups))}: "
                             f"{e}") from None
    return teacher_config


def layer_map(options, teacher_config, student) -> list[int] | None:
    """The layer map of --distill_hidden_weight and --distill_attention_weight
    (`distillation.hidden_layer_map`), checked against the teacher and the student
    (`student`: its config); None where both are off."""
    weights = {"distill_hidden_weight": options.distill_hidden_weight,
               "distill_attention_weight": options.distill_attention_weight}
    given = options.distill_hidden_layers
    for name, weight in weights.items():
        if weight < 0:
            raise UsageError(f"--{name}={weight}: a weight is at least 0")
    used = [name for name, weight in weights.items() if weight]
    if not used:
        if given:
            raise UsageError("--distill_hidden_layers maps layers for "
                             "--distill_hidden_weight or --distill_attention_weight, "
                             "neither of which is given")
        return None
    if options.teacher_files.layout == release.SAVEDMODEL:
        raise UsageError(f"--{used[0]}: the teacher {options.teacher_checkpoint} is a "
                         "SavedModel export, which gives no hidden states or attention")
    if weights["distill_attention_weight"] and (
            student.num_attention_heads != teacher_config.num_attention_heads):
        raise UsageError(
            f"--distill_attention_weight: the student has {student.num_attention_heads} "
            f"attention heads and the teacher {teacher_config.num_attention_heads}; their "
            "scores are compared head by head")
    try:
        layers = [int(x) for x in given] if given else None
        return distillation.hidden_layer_map(teacher_config.num_hidden_layers,
                                             student.num_hidden_layers, layers)
    except (ValueError, ConfigError) as e:
        raise UsageError(f"--distill_hidden_layers={','.join(given or ())}: {e}") from None


def teacher_groups(options) -> list[int] | None:
    """--student_teacher_groups as integers (None where not given)."""
    given = options.student_teacher_groups
    if not given:
        return None
    try:
        return [int(g) for g in given]
    except ValueError:
        raise UsageError(f"--student_teacher_groups={','.join(given)}: the teacher's "
                         "groups are integers") from None


def read_transfer(task, options) -> list:
    """--transfer_file's examples, read and checked before any work: a file of UTF-8
    text, not empty, each line one text (or, for a pair task, two separated by a tab),
    (text_a, text_b or None) per non-blank line; or, for a task that reads it in its own
    format (multiple choice: unlabeled questions), its examples (`Task.Teaching.read_transfer`)."""
    path = options.transfer_file
    if not path:
        return []
    if not distilling(options):
        raise UsageError("--transfer_file is text for a teacher to label: it needs "
                         "--teacher_checkpoint")
    if not tf.io.gfile.exists(path):
        raise UsageError(f"--transfer_file={path}: no such file")
    own = task.teaching.read_transfer(path)
    if own is not None:
        if not own:
            raise UsageError(f"--transfer_file={path} has no example")
        logging.info("%d transfer examples in %s", len(own), path)
        return own
    pair = task.teaching.transfer_is_pair()
    if pair is None:
        raise UsageError(f"--transfer_file: the task {task.name!r} takes no transfer text")
    text = fileio.read_text(path, UsageError)
    if "\0" in text:
        raise UsageError(f"{path}:{text[:text.index(chr(0))].count(chr(10)) + 1}: a NUL "
                         "byte: --transfer_file is a text file")
    texts = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t") if pair else [line]
        if pair and len(fields) != 2:
            raise UsageError(f"{path}:{number}: {len(fields)} tab-separated fields; a "
                             f"line of --transfer_file for {task.name} is a pair of texts")
        if not all(f.strip() for f in fields):
            raise UsageError(f"{path}:{number}: an empty text")
        texts.append((fields[0], fields[1] if pair else None))
    if not texts:
        raise UsageError(f"--transfer_file={path} has no text")
    logging.info("%d transfer examples in %s", len(texts), path)
    return texts


def check_augment(task, options) -> bool:
    """--distill_augment and its settings checked before any work; whether it is on."""
    copies = options.distill_augment
    if not copies:
        return False
    if copies < 0:
        raise UsageError(f"--distill_augment={copies}: the copies of each example are a "
                         "count, at least 0")
    if not distilling(options):
        raise UsageError("--distill_augment makes examples for a teacher to label: it "
                         "needs --teacher_checkpoint")
    if not 0 < options.distill_augment_probability <= 1:
        raise UsageError(f"--distill_augment_probability="
                         f"{options.distill_augment_probability}: a probability in (0, 1]")
    if options.distill_augment_neighbours < 1:
        raise UsageError(f"--distill_augment_neighbours={options.distill_augment_neighbours}"
                         ": at least 1")
    if not task.Teaching.labels_texts():
        raise UsageError(f"--distill_augment: the task {task.name!r} takes no examples "
                         "labelled by the teacher (it defines no `pseudo_label`)")
    if options.teacher_files.layout == release.SAVEDMODEL:
        raise UsageError(f"--distill_augment: the teacher {options.teacher_checkpoint} is a "
                         "SavedModel export, whose word embeddings are not read here; give "
                         "its checkpoint")
    return True


def augmenter(task, options, teacher: Teacher):
    """--distill_augment's `augmentation.Augmenter` (its settings checked before any
    work, `check_augment`), its candidates from the teacher's word embeddings, its
    draws seeded by --seed (None where it is off)."""
    if not options.distill_augment:
        return None
    return augmentation.Augmenter(
        task.tokenizer, teacher.model.encoder.word_embeddings.numpy(),
        options.distill_augment, options.distill_augment_probability,
        options.distill_augment_neighbours, options.seed)


class SavedModelTeacher:
    """A SavedModel export as a teacher: its `serving_default` called as a model is (the
    three model inputs in, its outputs by name)."""

    def __init__(self, path: str):
        import tensorflow_text  # noqa: F401  (a text export's tokenizer ops)

        self.path = path
        self.loaded = tf.saved_model.load(path)
        self.function = self.loaded.signatures["serving_default"]

    def __call__(self, inputs, training=False):
        del training
        return self.function(**{k: tf.cast(inputs[k], tf.int32) for k in names.MODEL_INPUTS})


def _load_savedmodel_teacher(task, options, teacher_output: str) -> SavedModelTeacher:
    """The export, after checking that it serves this task's kind, labels and output."""
    from albert_tf.export.base import read_export_info

    path = options.teacher_files.checkpoint
    info = read_export_info(path)
    kind = task.serving_kind.name if task.serving_kind else None
    labels = list(task.labels) if getattr(task, "labels", None) else None
    differ = []
    if info.get("kind") != kind:
        differ.append(f"it serves a {info.get('kind')} model, the task's is {kind}")
    elif labels and info.get("labels") and list(info["labels"]) != labels:
        differ.append(f"its labels are {info['labels']}, the task's {labels}")
    if differ:
        raise UsageError(f"--teacher_checkpoint={options.teacher_checkpoint} is not a model "
                         f"of this task and its labels ({'; '.join(differ)})")
    teacher = SavedModelTeacher(path)
    if teacher_output not in teacher.function.structured_outputs:
        raise UsageError(f"--teacher_checkpoint={options.teacher_checkpoint}: its "
                         f"serving_default has no {teacher_output!r} output")
    return teacher


def load_teacher(task, options, teacher_config, strategy) -> Teacher:
    """The teacher: the task's model of the teacher's config, every weight read from
    --teacher_checkpoint (a checkpoint of another kind or label set is refused), or a
    SavedModel export of the task's kind and labels."""
    if options.teacher_files.layout == release.SAVEDMODEL:
        return Teacher(_load_savedmodel_teacher(task, options, task.teaching.output),
                       task.teaching.output, task.teaching.soft_loss)
    with strategy.scope():
        model = task.build_model(teacher_config)
    try:
        report = release.load_checkpoint(model, options.teacher_files)
    except CheckpointError as e:
        differ = "; ".join(line.strip() for line in str(e).splitlines()[1:])
        raise UsageError(f"--teacher_checkpoint={options.teacher_checkpoint} is not a "
                         f"model of this task and its labels ({differ or e})") from None
    if report.missing:
        raise UsageError(
            f"--teacher_checkpoint={options.teacher_checkpoint} is not a fine-tuned model "
            f"of this task: it has no {', '.join(report.missing[:4])}"
            f"{' ...' if len(report.missing) > 4 else ''}")
    return Teacher(model, task.teaching.output, task.teaching.soft_loss)


# The training examples on which a narrower student's FFN units are chosen
# (`distillation.ffn_activity`): the first of the split, as many as this.
ACTIVITY_EXAMPLES = 512


def start_student(model, teacher: Teacher, options, output_dir: str, task: Task,
                  train) -> None:
    """A student of `model_files.STUDENT_SHAPE`'s flags starts from the teacher's
    weights (unless the run resumes); a narrower FFN's units are those most active on
    the first ACTIVITY_EXAMPLES of the training split `train` (as `read` gives it)."""
    if not student_shape(options):
        return
    if tf.train.latest_checkpoint(output_dir):
        return
    inputs = None
    with tempfile.TemporaryDirectory() as tmp:
        if model.config.intermediate_size < teacher.model.config.intermediate_size:
            if train is None:
                raise UsageError("--student_intermediate_size: the units kept are those "
                                 "most active on the training examples; there are none "
                                 "without --do_train")
            path = os.path.join(tmp, "activity.tf_record")
            task.data.write_records("train", task.data.head("train", train,
                                                            ACTIVITY_EXAMPLES), path)
            inputs = (names.to_model_inputs(features) for features in
                      task.data.dataset(path, options.predict_batch_size, False))
        report = distillation.init_student_from_teacher(model, teacher.model,
                                                        teacher_groups(options), inputs)
    logging.info("student started from the teacher: %d variables copied (%d of them the "
                 "narrower FFNs', of their most active units), %d initialized (%s)",
                 len(report.copied), len(report.narrowed), len(report.initialized),
                 ", ".join(report.initialized) or "none")


def teacher_records(task, options, teacher: Teacher, strategy, train, cache_dir: str,
                    transfer=(), augment=None):
    """The training records with the teacher's outputs of each (feature
    `distillation.TEACHER_LOGITS`), computed once: cached beside them, reused while the
    records, the teacher's files, the transfer text and the augmentation's settings are
    the same. A token task's are its real positions' (length x labels, flattened). The
    `transfer` texts (`read_transfer`) and `augment`'s copies of the training records
    (`augmenter`) become records too, labelled by the teacher (`pseudo_label`), all
    spread evenly among the training records. Returns (path, parsing spec)."""
    path = os.path.join(cache_dir, task.data.records_name("train") + ".teacher.tf_record")
    settings = _teacher_settings(options, train, transfer, augment)
    taught = _Taught(task, teacher, strategy, options.predict_batch_size)

    def write(target: str):
        unlabeled = f"{target}.transfer-{os.getpid()}"
        augmented = f"{target}.augmented-{os.getpid()}"
        try:
            parts, made, copies = [taught(train.path, label=False)], 0, 0
            if transfer:  # a record each (a token task's long text: one per window)
                made = task.teaching.write_transfer_records(transfer, unlabeled)
                parts.append(taught(unlabeled, label=True))
            if augment is not None:  # each copy a pass over the training records
                copies = records.write_records(augmented, (
                    record for _, _, record in augment.records(train.path)))
                logging.info("--distill_augment: %d copies of %d training records",
                             copies, train.num_examples)
                if copies:
                    parts.append(taught(augmented, label=True))
            # spread evenly by position: the shuffle buffer mixes them from the start
            merged = heapq.merge(*parts, key=lambda pair: pair[0])
            count = records.write_records(target, (record for _, record in merged))
        finally:
            fileio.remove_if_exists(unlabeled)
            fileio.remove_if_exists(augmented)
        if count != train.num_examples + made + copies:
            raise RuntimeError(f"{count} teacher outputs for {train.num_examples} records, "
                               f"{made} transfer records and {copies} augmented copies")
        return count, 0

    written = cache.cached_conversion(path, settings, write)
    logging.info("the teacher's outputs on %d training records: %s",
                 written.num_examples, written.path)
    return written.path, _teacher_spec(written.path, teacher.soft_loss)


def _teacher_settings(options, train, transfer, augment) -> dict:
    """What the teacher's cached outputs are made from: a difference computes them
    again."""
    weights = teacher_weight_files(options.teacher_files)
    settings = {"records": cache.read_cache_info(train.path),
                "teacher": {os.path.basename(f): cache.file_sha256(f) for f in sorted(weights)}}
    if transfer:
        settings["transfer"] = {"path": cache.abspath_or_url(options.transfer_file),
                                "sha256": cache.file_sha256(options.transfer_file)}
    if augment is not None:
        settings["augment"] = {"copies": augment.copies, "probability": augment.probability,
                               "neighbours": augment.neighbours, "seed": augment.seed}
    return settings


class _Taught:
    """Records with the teacher's outputs: called with a path, (position in [0, 1),
    record) of each record there, in order, the record with the teacher's outputs (and,
    with `label`, the teacher's labels: `Task.Teaching.pseudo_label`)."""

    def __init__(self, task, teacher: Teacher, strategy, batch_size: int):
        self.task, self.teacher, self.strategy = task, teacher, strategy
        self.batch_size = batch_size
        self.per_position = teacher.soft_loss in distillation.PER_POSITION

    def __call__(self, path: str, label: bool):
        dataset = self.task.data.dataset(path, self.batch_size, False)
        found = predict(self.strategy, self.teacher.model, dataset, [self.teacher.output],
                        [names.INPUT_MASK] if self.per_position else [])
        outputs = found[self.teacher.output]
        if self.per_position:  # [S, labels] of each example, padded per batch: its real part
            rows = [np.asarray(o, np.float32)[:int(np.sum(m))].reshape(-1)
                    for o, m in zip(outputs, found[names.INPUT_MASK])]
        else:
            rows = np.asarray(outputs, np.float32).reshape(len(outputs), -1)
        for i, (record, row) in enumerate(zip(
                tf.data.TFRecordDataset(path).as_numpy_iterator(), rows)):
            example = tf.train.Example.FromString(record)
            if label:
                self.task.teaching.pseudo_label(example, np.asarray(outputs[i]))
            example.features.feature[distillation.TEACHER_LOGITS].float_list.value \
                .extend(row.tolist())
            yield (i + 0.5) / len(rows), example.SerializeToString()


def _teacher_spec(path: str, soft_loss: str) -> dict:
    """How to parse the teacher's outputs in the records at `path`: their width read off
    the first record."""
    first = tf.train.Example.FromString(
        next(tf.data.TFRecordDataset(path).as_numpy_iterator())).features.feature
    width = len(first[distillation.TEACHER_LOGITS].float_list.value)
    if soft_loss in distillation.PER_POSITION:  # [real length, labels], padded per batch
        width //= sum(first[names.INPUT_MASK].int64_list.value)
        return {distillation.TEACHER_LOGITS: tf.io.FixedLenSequenceFeature(
            [width], tf.float32, allow_missing=True)}
    shape = [] if soft_loss == "regression" else [width]
    return {distillation.TEACHER_LOGITS: tf.io.FixedLenFeature(shape, tf.float32)}


def teacher_weight_files(files) -> list[str]:
    """The files whose bytes are the teacher (what its cached outputs are keyed by)."""
    if files.layout == release.SAVEDMODEL:
        return [os.path.join(files.checkpoint, "saved_model.pb"),
                *tf.io.gfile.glob(os.path.join(files.checkpoint, "variables", "*"))]
    return [f for f in tf.io.gfile.glob(files.checkpoint + "*")
            if not f.endswith(".meta.json")]


def student_objective(base, options, teacher: Teacher, student, teacher_config, strategy):
    """The student's objective: the soft targets mixed with `base`, the task's. With
    --distill_hidden_weight or --distill_attention_weight the teacher is kept for the
    student's steps (its layers' outputs) and both models give theirs; a student of
    another hidden size learns a projection to the teacher's (TinyBERT's W_h, made under
    `strategy`)."""
    layers = None
    mapped = layer_map(options, teacher_config, student.config)
    if mapped is not None:
        projection = None
        width = teacher_config.hidden_size
        if options.distill_hidden_weight and student.config.hidden_size != width:
            # its seeds from --seed + 3 (the student's encoder draws from the seed, its
            # head from + 1, LoRA's adapters from + 2)
            with strategy.scope():
                projection = common.dense(
                    width, name="distill_projection",
                    stddev=student.config.initializer_range,
                    seeds=common.SeedStream(options.seed + 3), dtype=student.dtype_policy)
                projection.build((None, None, student.config.hidden_size))
        layers = distillation.LayerTeacher(
            teacher.model, mapped, options.distill_hidden_weight,
            options.distill_attention_weight, projection)
        distillation.prepare_layer_outputs(student, layers)
    return distillation.DistillationObjective(
        base, soft_loss=teacher.soft_loss,
        temperature=options.distill_temperature, alpha=options.distill_alpha,
        output=teacher.output, layers=layers)


class Distillation(Extension):
    """--teacher_checkpoint as an extension of the run's stages: its options and inputs
    checked before any work; the teacher loaded once the student is built, and the
    student started from its weights; the training records with its outputs; the
    objective that mixes them with the labels; the student's layer outputs dropped
    after training."""

    def __init__(self, teacher_config, transfer: list):
        self.teacher_config, self.transfer = teacher_config, transfer
        self.teacher: Teacher | None = None

    @classmethod
    def for_run(cls, run) -> Distillation | None:
        """The run's distillation (None without --teacher_checkpoint); its flags given
        without one are refused."""
        task, options = run.task, run.options
        teacher_config = (check_teacher(task, options, run.config)
                          if distilling(options) else None)
        transfer = read_transfer(task, options)
        check_augment(task, options)
        return cls(teacher_config, transfer) if teacher_config is not None else None

    def started(self, run, model) -> None:
        self.teacher = load_teacher(run.task, run.options, self.teacher_config,
                                    run.strategy)
        start_student(model, self.teacher, run.options, run.output_dir, run.task,
                      run.data.get("train"))

    def train_records(self, run, records):
        return teacher_records(run.task, run.options, self.teacher, run.strategy, records,
                               run.cache_dir, self.transfer,
                               augmenter(run.task, run.options, self.teacher))

    def objective(self, run, objective):
        objective = student_objective(objective, run.options, self.teacher, run.model,
                                      self.teacher_config, run.strategy)
        if objective.layers is None:
            self.teacher.model = None  # its outputs are cached: the student's steps run none
        return objective

    def trained(self, run, model) -> None:
        distillation.stop_layer_outputs(model)  # evaluated and exported as any model
