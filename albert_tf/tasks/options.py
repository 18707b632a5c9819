"""A run's options: frozen dataclasses with real field types, one per task, defined once
here and in the task modules, and read as attributes (`options.max_seq_length`).

    @dataclasses.dataclass(frozen=True)
    class Options(Task.Options):
        threshold: float | None = option(None, "A label is predicted at this probability.")

    options = MultiLabelTask.Options.build({"output_dir": "out", "do_train": True, ...})

A field is an option; `option(default, help, choices=...)` gives its default and what
the flag's help says. The options come in typed groups, the same for every run
(`GROUPS`): the model files, the data, training, evaluation, the exports, LoRA,
distillation and the runtime; `RunOptions` has them all (pretraining's options),
`FineTuningOptions` grows the data, training and evaluation groups by what the
fine-tuning driver reads (the task, the training length, prediction), and `TaskOptions`
by the split files and labels of `Task.Data`'s defaults: a task's `Options` derives from
it, or from `FineTuningOptions` where it reads its data its own way. The fields stay
flat (`options.learning_rate`), as the flags do; `options.group(TrainingOptions)` gives
a group as its own typed dataclass. The scripts' absl flags are made from these fields,
and their values filled back, by one adapter (`albert_tf.apps.options`); from Python no
flag is needed: `build` takes a mapping, and the class itself takes keywords.

Checked when made (`OptionsError`, before any work): an option that is no field (with
the closest names), a value of the wrong type or outside its choices, two options that
exclude each other (`exclusive`). A list option is kept as a tuple; an integer given for
a float, as a float. What needs more than the values (files that exist, options that
fit together) is checked by `validate`, which the run calls before any work.

A module of the tasks' layer: no absl flags, no scripts (`albert_tf.apps`).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, ClassVar, Mapping

from albert_tf import packing
from albert_tf.data.report import DEFAULT_MAX_SKIPPED
from albert_tf.errors import UserError
from albert_tf.export.savedmodel import SERVING_PRECISIONS
from albert_tf.export.tflite import TFLITE_PRECISIONS
from albert_tf.modeling.recompute import UNITS as RECOMPUTE_UNITS
from albert_tf.tasks.checks import check_run
from albert_tf.training.distribute import STRATEGIES as DISTRIBUTION_STRATEGIES

# Training's precisions: float32, or a Keras mixed-precision policy.
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


class OptionsError(UserError):
    """Options that cannot make a run: reported before any work."""


def option(default: Any = None, help: str | None = None, *,  # noqa: A002 (absl's word)
           choices: tuple | None = None, minimum: float | None = None,
           flag: bool = True) -> Any:
    """A field of an options class: its `default`, its flag's `help` (None: the help of
    the field it redeclares, in a base class), the values it takes (`choices`), the
    least number it takes (`minimum`: a count, a size; a field that redeclares another
    keeps its minimum), and whether it is a flag at all (`flag=False`: a value the run
    derives)."""
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": tuple(choices) if choices else None, "minimum": minimum,
        "flag": flag})


@dataclasses.dataclass(frozen=True)
class Options:
    """Base of every options class; see the module's docstring."""

    # Pairs of options that cannot both be given (both true).
    exclusive: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __post_init__(self):
        hints = _hints(type(self))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            checked = _checked_value(value, hints[field.name],
                                     field.metadata.get("choices"))
            if isinstance(checked, _Problem):
                raise OptionsError(f"--{field.name}={value!r}: expected {checked.expected}")
            least = self._declared(field.name, "minimum")
            if least is not None and checked is not None and checked < least:
                raise OptionsError(f"--{field.name}={value!r}: expected at least {least}")
            if checked is not value:
                object.__setattr__(self, field.name, checked)
        for a, b in self.exclusive:
            if getattr(self, a) and getattr(self, b):
                raise OptionsError(f"--{a} and --{b} exclude each other")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every option's name, in order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def flag_fields(cls) -> tuple[dataclasses.Field, ...]:
        """The fields that are flags (all but the values a run derives)."""
        return tuple(field for field in dataclasses.fields(cls)
                     if field.metadata.get("flag", True))

    @classmethod
    def help_of(cls, name: str) -> str:
        """The help of option `name`: its own, else that of the field it redeclares."""
        return cls._declared(name, "help") or ""

    @classmethod
    def _declared(cls, name: str, key: str):
        """The `key` of option `name`'s metadata: its own, else that of the field it
        redeclares (None where none says)."""
        for klass in cls.__mro__:
            field = vars(klass).get("__dataclass_fields__", {}).get(name)
            if field is not None and field.metadata.get(key) is not None:
                return field.metadata[key]
        return None

    @classmethod
    def type_of(cls, name: str) -> tuple[type | None, bool]:
        """(the value's type: bool, int, float, str or tuple (of strings), else None for
        anything else; whether None is allowed) of option `name`."""
        return _kind(_hints(cls)[name])

    @classmethod
    def build(cls, values: Mapping[str, Any] | Options | None = None, **more):
        """The options of `values` (a mapping, or options of this class) and `more`:
        unknown names are named with the closest known ones; what is left out takes
        its default."""
        if isinstance(values, cls) and not more:
            return values
        if isinstance(values, Options):
            values = {name: getattr(values, name) for name in values.names()}
        values = {**(values or {}), **more}
        known = cls.names()
        unknown = [name for name in values if name not in known]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, known, n=1)
                hints.append(name + (f" (did you mean {close[0]}?)" if close else ""))
            raise OptionsError(f"unknown option(s) of {cls.__qualname__}: "
                               f"{', '.join(hints)}")
        return cls(**values)

    def replace(self, **changes):
        """A copy with `changes`, checked again."""
        return dataclasses.replace(self, **changes)

    def group(self, kind: type[Options]) -> Options:
        """The options of group `kind` (`GROUPS`: `TrainingOptions`, ...) as that
        group's own typed dataclass: the most derived class of the group among these
        options' bases (a fine-tuning run's `FineTuningTraining` for
        `TrainingOptions`)."""
        for klass in type(self).__mro__:
            if isinstance(klass, type) and issubclass(klass, kind) and \
                    dataclasses.is_dataclass(klass) and klass in _group_classes():
                return klass(**{f.name: getattr(self, f.name)
                                for f in dataclasses.fields(klass)})
        raise TypeError(f"{type(self).__qualname__} has no {kind.__qualname__}")

    def validate(self) -> None:
        """Raises `albert_tf.errors.UsageError` for options that cannot make a run,
        beyond their types and choices (checked when made): called by the run before any
        work, as Model Garden's configs' `validate`. A task's options that check more
        call their base's first."""


def _group_classes() -> set[type]:
    """The groups' classes, the fine-tuning ones among them."""
    return {*GROUPS, FineTuningData, FineTuningTraining, FineTuningEvaluation}


class _Problem(typing.NamedTuple):
    expected: str


_HINTS: dict[type, dict] = {}


def _hints(cls) -> dict:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _kind(hint) -> tuple[type | None, bool]:
    args = typing.get_args(hint) if typing.get_origin(hint) in (
        typing.Union, types.UnionType) else (hint,)
    optional = type(None) in args
    rest = [a for a in args if a is not type(None)]
    if len(rest) != 1:
        return None, optional
    base = typing.get_origin(rest[0]) or rest[0]
    return (base if base in (bool, int, float, str, tuple) else None), optional


_EXPECTED = {bool: "true or false", int: "an integer", float: "a number",
             str: "a string", tuple: "a list of strings"}


def _checked_value(value, hint, choices):
    """`value` as the field of type `hint` keeps it (a list as a tuple, an int as a
    float where a float is expected), or a `_Problem`."""
    kind, optional = _kind(hint)
    if value is None:
        return value if optional or kind is None else _Problem(_EXPECTED[kind])
    if choices is not None and value not in choices:
        return _Problem(f"one of {', '.join(map(str, choices))}")
    if kind is None:
        return value
    if kind is bool:
        return value if isinstance(value, bool) else _Problem(_EXPECTED[bool])
    if isinstance(value, bool):
        return _Problem(_EXPECTED[kind])
    if kind is int:
        return value if isinstance(value, int) else _Problem(_EXPECTED[int])
    if kind is float:
        return float(value) if isinstance(value, (int, float)) else _Problem(_EXPECTED[float])
    if kind is tuple:
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
        return _Problem(_EXPECTED[tuple])
    return value if isinstance(value, kind) else _Problem(_EXPECTED[kind])


# ------------------------------------------------------------------ the common options
@dataclasses.dataclass(frozen=True)
class ModelFileOptions(Options):
    """The model and its tokenizer, as every script takes them (training or export);
    `albert_tf.apps.model_files.load_config` reads `albert_config_file`."""

    albert_config_file: str | None = option(
        None, "albert_config.json of the model (or a shipped name such as albert_base_v2).")
    spm_model_file: str | None = option(None, "SentencePiece model (30k-clean.model).")
    vocab_file: str | None = option(None, "WordPiece vocabulary (Chinese models).")
    do_lower_case: bool | None = option(
        None, "Lowercase the input text (default: what the tokenizer_config.json of the "
        "--init_checkpoint directory says, else true).")


@dataclasses.dataclass(frozen=True)
class LiteRTOptions(Options):
    """The LiteRT export every script that exports has."""

    export_tflite: str | None = option(
        None, "Also write the model as one LiteRT (TFLite) file at this path, token ids "
        "in, with <path>.json beside it (as the original's albert_model.tflite); see "
        "albert_tf.export.export_tflite.")
    tflite_precision: str = option(
        "float32", "What the --export_tflite file stores its weights in: float32, float16 "
        "(half the size) or int8 (dynamic-range quantization: a quarter of the size, int8 "
        "matmuls).", choices=TFLITE_PRECISIONS)
    tflite_text: bool = option(
        False, "Give the --export_tflite file serve_text too: raw text in (text_a, "
        "text_b), tokenized inside the file with --spm_model_file or --vocab_file by "
        "TensorFlow Text's LiteRT tokenizer ops, custom ops the app's runtime registers "
        "(<path>.json names them). For the kinds that pack one text or a pair "
        "(classifier, regression, multi-label, encoder, mlm); see "
        "albert_tf.export.export_tflite.")


@dataclasses.dataclass(frozen=True)
class SkipOptions(Options):
    """How many bad rows a split may lose before a run stops."""

    max_skipped_rows: str = option(
        DEFAULT_MAX_SKIPPED, "The most rows of a split that may be skipped as unreadable "
        "(more or fewer fields than the header, a broken quote, invalid UTF-8, an unknown "
        "label, ...) before the run stops, before training: a fraction of the split's "
        "rows (0.01 or 1%) or a count (0, 25). What was read and skipped is in "
        "<output_dir>/data_report.json.")


@dataclasses.dataclass(frozen=True)
class LoRAOptions(Options):
    """LoRA: adapters trained in place of the encoder's weights (every run has the group;
    a run that cannot train adapters refuses it)."""

    lora_rank: int | None = option(
        None, "LoRA: train adapters of this rank on each attention's query and value "
        "(and the head), the rest of the encoder frozen; the best adapter is kept as "
        "lora_adapter.npz, the TF1 checkpoints and exports hold the merged weights.")
    lora_ffn: bool = option(False, "With --lora_rank: adapters on the FFN's denses too.")


@dataclasses.dataclass(frozen=True)
class DistillationOptions(Options):
    """Distillation: a teacher's outputs learned beside the labels, and a student made of
    the teacher's weights (every run has the group; a task that is not distilled
    refuses it)."""

    teacher_checkpoint: str | None = option(
        None, "Distil: a model of this task fine-tuned on the same labels (any layout "
        "--init_checkpoint reads, or a SavedModel export of the task), whose outputs on "
        "the training examples (computed once and cached) the model learns beside the "
        "labels.")
    teacher_config_file: str | None = option(
        None, "The teacher's albert_config.json, where none lies beside "
        "--teacher_checkpoint.")
    distill_temperature: float = option(
        2.0, "With --teacher_checkpoint: the softmax temperature of the soft targets.")
    distill_alpha: float = option(
        0.5, "With --teacher_checkpoint: the soft targets' weight; the labels' loss has "
        "1 - alpha.")
    student_num_hidden_layers: int | None = option(
        None, "With --teacher_checkpoint: the student is the teacher with this many layer "
        "passes, started from the teacher's weights (its groups: the last of each equal "
        "block of the teacher's); without it, --init_checkpoint / --albert_config_file "
        "give the student.")
    student_num_hidden_groups: int | None = option(
        None, "With --student_num_hidden_layers: the student's groups (default: the "
        "teacher's, or fewer where the student has fewer layers).")
    student_intermediate_size: int | None = option(
        None, "With --teacher_checkpoint: the student is the teacher (with "
        "--student_num_hidden_layers' passes, where given) with FFNs of this many units, "
        "each block keeping its teacher block's most active on the first training "
        "examples (mean |activation| times the norm of its output weights), the mean "
        "of the others' output added to its bias.")
    student_teacher_groups: tuple[str, ...] | None = option(
        None, "With --student_num_hidden_layers: the teacher's groups (0-based) that the "
        "student's groups start from, in order, one per student group (e.g. 0,1 for a "
        "teacher's bottom layers; default: the last of each equal block).")
    distill_hidden_weight: float = option(
        0.0, "With --teacher_checkpoint: the weight of TinyBERT's hidden-state loss, the "
        "mean squared difference of each student layer's output and its teacher layer's "
        "over the real tokens (a student of another hidden size through a projection "
        "learned with it); the teacher then runs in every student step. 0: off.")
    distill_attention_weight: float = option(
        0.0, "With --teacher_checkpoint: the weight of TinyBERT's attention loss, the "
        "mean squared difference of each student layer's attention scores (before the "
        "softmax) and its teacher layer's, over the heads and the pairs of real tokens "
        "(the same number of heads); the teacher then runs in every student step. 0: off.")
    distill_hidden_layers: tuple[str, ...] | None = option(
        None, "With --distill_hidden_weight or --distill_attention_weight: the teacher's "
        "layer (0-based) that each student layer learns, in order, one per student layer "
        "(default: the last of each equal block, e.g. 2,5 for 2 of 6).")
    transfer_file: str | None = option(
        None, "With --teacher_checkpoint: unlabeled UTF-8 text that the teacher labels, "
        "trained on beside the training split (its soft targets, and its classes as "
        "labels): one example per line, a text, or for a pair task two texts separated "
        "by a tab; blank lines are skipped.")
    distill_augment: int = option(
        0, "With --teacher_checkpoint: this many copies of each training example, each "
        "word replaced (with --distill_augment_probability) by one of its nearest words in "
        "the teacher's word embeddings, trained on beside it, labelled by the teacher as "
        "--transfer_file's texts are (TinyBERT's augmentation, the teacher's embeddings "
        "giving the candidates). 0: off.")
    distill_augment_probability: float = option(
        0.4, "With --distill_augment: the chance that each word of a copy is replaced.")
    distill_augment_neighbours: int = option(
        15, "With --distill_augment: how many of a word's nearest words (by cosine in the "
        "teacher's word embeddings) it may be replaced by, each as likely.")
    # Derived before any work (`complete_model_files`): --teacher_checkpoint described.
    teacher_files: Any = option(None, flag=False)


@dataclasses.dataclass(frozen=True)
class DataOptions(SkipOptions):
    """The data: how long a sequence is, and how many bad rows a split may lose."""

    max_seq_length: int = option(512, "Maximum sequence length.", minimum=3)


@dataclasses.dataclass(frozen=True)
class TrainingOptions(Options):
    """Training: where it starts and writes, its batches, optimizer, checkpoints and
    seed."""

    init_checkpoint: str | None = option(
        None, "Weights to start from, unless output_dir already has a checkpoint: a TF1 "
        "checkpoint (Google's model.ckpt-best, brightmart's albert_model.ckpt), a Hugging "
        "Face directory or model.safetensors, or a release directory of any of them (its "
        "config and tokenizer files are then used when not given), or a training run's "
        "output_dir (its model.ckpt-best, else its newest model.ckpt-<step>).")
    output_dir: str | None = option(None, "Where checkpoints, summaries and results go.")
    do_train: bool = option(False, "Train.")
    train_batch_size: int = option(32, "Global training batch size.", minimum=1)
    learning_rate: float = option(5e-5, "Peak learning rate.")
    optimizer: str = option("adamw", "adamw or lamb.")
    save_checkpoints_steps: int = option(1000, "Checkpoint every N steps.", minimum=1)
    keep_checkpoint_max: int = option(5, "How many checkpoints to keep.", minimum=1)
    iterations_per_loop: int = option(
        100, "Training steps per tf.function call (and between progress lines).",
        minimum=1)
    gradient_accumulation_steps: int = option(
        1, "Micro-batches per optimizer step (train_batch_size is the total).", minimum=1)
    seed: int = option(12345, "Seed of every random choice (weights, data order).")
    # Derived before any work (`albert_tf.apps.model_files.complete_model_files`): the
    # --init_checkpoint described once (`albert_tf.checkpoints.release.ReleaseFiles`:
    # its layout and files), read by the config and the load.
    init_files: Any = option(None, flag=False)


@dataclasses.dataclass(frozen=True)
class EvaluationOptions(Options):
    """Evaluation (and, for fine-tuning, prediction)."""

    do_eval: bool = option(False, "Evaluate on the dev set.")
    eval_batch_size: int = option(8, "Global evaluation batch size.", minimum=1)


@dataclasses.dataclass(frozen=True)
class ExportOptions(LiteRTOptions):
    """The exports a run writes at its end: a SavedModel for TF Serving, a LiteRT file,
    a Hugging Face directory."""

    export_dir: str | None = option(
        None, "Also export a SavedModel for TF Serving to <export_dir>/<version>/ at the "
        "end (see export_savedmodel.py).")
    serving_precision: str = option(
        "float32", "What the --export_dir SavedModel computes in: bfloat16 runs its "
        "matmuls in bfloat16 (for CPUs with AVX512_BF16 or AMX), LayerNorm, softmax and "
        "outputs in float32.", choices=SERVING_PRECISIONS)
    export_hf_dir: str | None = option(
        None, "Also write the trained model as a Hugging Face directory (config.json, "
        "model.safetensors, tokenizer files) that transformers loads; it must not exist "
        "yet.")


@dataclasses.dataclass(frozen=True)
class RuntimeOptions(Options):
    """Where and how the work runs: the strategy and its devices, the threads, the
    precision, XLA and recomputation."""

    distribution_strategy: str = option(
        "one_device", "How to spread the work: one device, the GPUs of this host, "
        "several hosts (TF_CONFIG) or a TPU (--tpu).", choices=DISTRIBUTION_STRATEGIES)
    tpu: str | None = option(None, "TPU name or address for distribution_strategy=tpu.")
    num_gpus: int | None = option(
        None, "mirrored: the first N GPUs of this host (default: all of them; on a host "
        "without GPUs, its CPU).", minimum=1)
    intra_op_threads: int | None = option(
        None, "Threads one op may use (default: TensorFlow's, every core); set before "
        "TensorFlow starts in the process.", minimum=1)
    inter_op_threads: int | None = option(
        None, "Ops that may run at once (default: TensorFlow's); set before TensorFlow "
        "starts in the process.", minimum=1)
    heartbeat_timeout: float | None = option(
        None, "multi_worker_mirrored: the seconds a worker may stay silent before the "
        "others stop with an error naming it (default: TensorFlow's, 10); give every "
        "worker the same.")
    precision: str = option("float32", "float32, or Keras mixed precision (float16 with "
                            "loss scaling).", choices=PRECISIONS)
    enable_xla: bool = option(False, "Compile the gradient computation with XLA.")
    recompute: bool = option(
        False, "Keep only each encoder block's input in the forward pass and run the "
        "block again in the backward pass: the same gradients, a fraction of the "
        "activation memory, 13-28% more time a step as measured (docs/large-models.md).")
    recompute_unit: str = option(
        "layer", "With --recompute: each block (layer) or each run of a layer group's "
        "inner_group_num blocks (group) is one recomputed unit.", choices=RECOMPUTE_UNITS)


@dataclasses.dataclass(frozen=True)
class RunOptions(ModelFileOptions, DataOptions, TrainingOptions, EvaluationOptions,
                 ExportOptions, LoRAOptions, DistillationOptions, RuntimeOptions):
    """What every run has, in its groups (`GROUPS`), with the original names where the
    original has them: the model files, the data, training, evaluation, the exports,
    LoRA, distillation and the runtime. Pretraining's options are these."""


# Every run's option groups, in the order a reader meets them; `Options.group` gives
# one of them typed.
GROUPS = (ModelFileOptions, DataOptions, TrainingOptions, EvaluationOptions, ExportOptions,
          LoRAOptions, DistillationOptions, RuntimeOptions)


@dataclasses.dataclass(frozen=True)
class FineTuningData(DataOptions):
    """Fine-tuning's data: the task that reads it and where its records are cached."""

    task_name: str | None = option(
        None, "The task: the name of a registered task (or of a data set it runs).")
    task_module: str | None = option(
        None, "A task of your own: a Python file (or module) that registers an "
        "albert_tf.tasks.Task subclass (@albert_tf.tasks.register); its flags are added "
        "to these.")
    cached_dir: str | None = option(
        None, "Where converted TFRecords are cached (default: output_dir).")


@dataclasses.dataclass(frozen=True)
class FineTuningTraining(TrainingOptions):
    """Fine-tuning's training length: --train_step, else --num_train_epochs over the
    examples; its warmup."""

    train_step: int | None = option(
        None, "Training steps (none: --num_train_epochs over the examples).", minimum=1)
    num_train_epochs: float = option(
        3.0, "Training epochs (over the examples), when --train_step is not given.",
        minimum=0)
    warmup_step: int | None = option(
        None, "Warmup steps (none: --warmup_proportion of the steps).", minimum=0)
    warmup_proportion: float = option(0.1, "Fraction of the steps spent warming up.",
                                      minimum=0)


@dataclasses.dataclass(frozen=True)
class FineTuningEvaluation(EvaluationOptions):
    """Fine-tuning's evaluation and prediction of the test split."""

    do_predict: bool = option(False, "Predict the test set.")
    predict_batch_size: int = option(8, "Global prediction batch size.", minimum=1)


@dataclasses.dataclass(frozen=True)
class FineTuningOptions(FineTuningData, FineTuningTraining, FineTuningEvaluation,
                        RunOptions):
    """What the fine-tuning driver (`albert_tf.apps.driver`) reads: `RunOptions`' groups,
    its data, training and evaluation groups grown by the task, the lengths and the
    training length."""

    def validate(self) -> None:
        """Something to do, the tokenizer's file, and a trained model for --do_eval /
        --do_predict without --do_train (`albert_tf.tasks.checks.check_run`)."""
        check_run(self)


@dataclasses.dataclass(frozen=True)
class TaskOptions(FineTuningOptions):
    """What `albert_tf.tasks.Task`'s default hooks read beside `FineTuningOptions`: the
    split files, the labels and the head's dropout. A task's `Options` derives from
    it."""

    data_dir: str | None = option(
        None, "Folder of the task's files: {train,dev,test}.csv / .tsv / .jsonl.")
    train_file: str | None = option(
        None, "The training file (comma-separated for several), instead of --data_dir's.")
    dev_file: str | None = option(None, "As --train_file, for --do_eval.")
    test_file: str | None = option(None, "As --train_file, for --do_predict.")
    labels: tuple[str, ...] | None = option(
        None, "The labels, comma-separated (default: those of the training file, sorted, "
        "saved as labels.txt in --output_dir).")
    dropout_prob: float = option(0.1, "Dropout of the task's head.")


@dataclasses.dataclass(frozen=True)
class LongTextOptions(Options):
    """What becomes of a text longer than `--max_seq_length`: the options of the tasks
    that can read it in windows (classification, regression, multi-label, multiple
    choice but RACE), defined once; each task checks them against its packing
    (`albert_tf.tasks.checks.check_long_text`)."""

    long_text: str = option(
        packing.TRUNCATE, "classification, regression, multi_label and multiple choice "
        "(c3, swag, multiple_choice; not race): what becomes of a text longer than "
        "--max_seq_length. truncate: it is cut, as the original cuts it. windows: it is "
        "read whole, in windows of --max_seq_length every --window_stride pieces, cut at "
        "word starts where possible (a pair: the windows slide over its longer text, the "
        "other kept whole up to half the length; multiple choice: over the context, "
        "beside each of the question's choices); each window trains with its text's "
        "label, and a text's answer is pooled over its windows (the mean of their "
        "logits; for multi_label, the max of each label's probability).",
        choices=packing.LONG_TEXT_MODES)
    window_stride: int | None = option(
        None, "With --long_text=windows: the pieces from one window's start to the "
        "next's, as SQuAD's --doc_stride (default: half the window); smaller than the "
        "window.", minimum=1)
    window_weight: str = option(
        packing.WINDOW_WEIGHT_ONE, "With --long_text=windows (classification and "
        "regression): what each training window weighs in the loss. one: 1 (a text of "
        "more windows weighs more). inverse: 1 / its text's windows (each text weighs "
        "1; the loss the weighted mean).", choices=packing.WINDOW_WEIGHTS)
    max_windows_per_text: int = option(
        0, "With --long_text=windows, at training only: a text of more windows trains on "
        "this many of them, evenly spaced over it, its first and last always among them "
        "(1: its first); the same ones every run, no randomness. Evaluation, prediction "
        "and serving still read every window. 0: no cap.", minimum=0)
