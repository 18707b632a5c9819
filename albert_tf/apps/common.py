"""What the absl scripts share before a run: flags with the original names, the errors
that mean bad input, the config and model files, and the checks made before any work.

The scripts (`run_pretraining.py`, `run_classifier.py`, `run_squad.py`, `run_ner.py`)
only define flags and call `albert_tf.apps.<script>.run`; everything they do is
reachable from Python. `export_savedmodel.py` takes the model and tokenizer flags
defined here too, so every script reads `--albert_config_file` (a file or a shipped
name) the same way. The run itself (strategy, trainer, best checkpoint, exports) is
`albert_tf.apps.session`.
"""

from __future__ import annotations

import collections.abc
import os

import tensorflow as tf
from absl import flags, logging

from albert_tf import fileio
from albert_tf.apps import options
from albert_tf.checkpoints import release
from albert_tf.config import AlbertConfig
from albert_tf.errors import UsageError, UserError
from albert_tf.export.savedmodel import SERVING_PRECISIONS, ExportError
from albert_tf.export.tflite import TFLITE_PRECISIONS, check_tflite_path
from albert_tf.modeling.recompute import UNITS as RECOMPUTE_UNITS
from albert_tf.tasks.checks import (  # noqa: F401 (the tasks' checks, the scripts' too)
    BEST_CHECKPOINT,
    check_file,
    check_run,
    wanted_splits,
    with_changes,
)
from albert_tf.training import distribute

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
LABELS_FILE = "labels.txt"  # beside the checkpoints: the model's labels, one per line


def user_errors() -> tuple[type[Exception], ...]:
    """The errors that mean bad flags or input, or a batch that does not fit in memory
    (reported as one line, not a traceback):
    kinds of error, not one per task: every `albert_tf.errors.UserError` (`UsageError`,
    `OptionsError`, `TaskModuleError`, `CheckpointError`, `ConfigError`, `DataError`,
    `TokenizerError`, `ExportError`, `DistributionError`, `OutputDirLocked`; every
    task's data errors are `DataError`s), a missing file, `TrainingOutOfMemory`."""
    from albert_tf.training.loop import TrainingOutOfMemory

    return (UserError, FileNotFoundError, TrainingOutOfMemory)


def run_script(run, flag_names) -> None:
    """The body of every script's `main`: the flags to `run`, bad input to one line,
    `error: <why>` on stderr, once (exit status 1)."""
    try:
        run(flag_values(flag_names))
    except user_errors() as e:
        raise SystemExit(f"error: {e}") from None


def define_model_file_flags():
    """The model and its tokenizer, as every script takes them (training or export);
    `load_config` reads `--albert_config_file`."""
    flags.DEFINE_string("albert_config_file", None,
                        "albert_config.json of the model (or a shipped name such as "
                        "albert_base_v2).")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (30k-clean.model).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (Chinese models).")
    flags.DEFINE_bool("do_lower_case", None,
                      "Lowercase the input text (default: what the tokenizer_config.json "
                      "of the --init_checkpoint directory says, else true).")


def define_tflite_flags():
    """`--export_tflite`, `--tflite_precision` and `--tflite_text`: every script that
    exports has them."""
    flags.DEFINE_string("export_tflite", None,
                        "Also write the model as one LiteRT (TFLite) file at this path, "
                        "token ids in, with <path>.json beside it (as the original's "
                        "albert_model.tflite); see albert_tf.export.export_tflite.")
    flags.DEFINE_enum("tflite_precision", "float32", list(TFLITE_PRECISIONS),
                      "What the --export_tflite file stores its weights in: float32, "
                      "float16 (half the size) or int8 (dynamic-range quantization: a "
                      "quarter of the size, int8 matmuls).")
    flags.DEFINE_bool("tflite_text", False,
                      "Give the --export_tflite file serve_text too: raw text in "
                      "(text_a, text_b), tokenized inside the file with --spm_model_file "
                      "or --vocab_file by TensorFlow Text's LiteRT tokenizer ops, custom "
                      "ops the app's runtime registers (<path>.json names them). For the "
                      "kinds that pack one text or a pair (classifier, regression, "
                      "multi-label, encoder, mlm); see albert_tf.export.export_tflite.")


def checked_tflite_path(path):
    """`--export_tflite`, checked before any work starts (None when not given)."""
    if not path:
        return None
    try:
        return check_tflite_path(path)
    except ExportError as e:
        raise UsageError(f"--export_tflite: {e}") from None


def define_model_flags(*, learning_rate: float = 5e-5, optimizer: str = "adamw"):
    """Flags every training script has, with the original names where the original has
    them (and each script's original defaults for the learning rate and the
    optimizer): the model files of `define_model_file_flags`, then the run's."""
    define_model_file_flags()
    flags.DEFINE_string("init_checkpoint", None,
                        "Weights to start from, unless output_dir already has a "
                        "checkpoint: a TF1 checkpoint (Google's model.ckpt-best, "
                        "brightmart's albert_model.ckpt), a Hugging Face directory or "
                        "model.safetensors, or a release directory of any of them (its "
                        "config and tokenizer files are then used when not given), or a "
                        "training run's output_dir (its model.ckpt-best, else its newest "
                        "model.ckpt-<step>).")
    flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results go.")
    flags.DEFINE_bool("do_train", False, "Train.")
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set.")
    flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.")
    flags.DEFINE_string("optimizer", optimizer, "adamw or lamb.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every N steps.")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "How many checkpoints to keep.")
    flags.DEFINE_integer("iterations_per_loop", 100,
                         "Training steps per tf.function call (and between progress lines).")
    flags.DEFINE_enum("distribution_strategy", "one_device", list(distribute.STRATEGIES),
                      "How to spread the work: one device, the GPUs of this host, several "
                      "hosts (TF_CONFIG) or a TPU (--tpu).")
    flags.DEFINE_string("tpu", None, "TPU name or address for distribution_strategy=tpu.")
    flags.DEFINE_float("heartbeat_timeout", None,
                       "multi_worker_mirrored: the seconds a worker may stay silent before "
                       "the others stop with an error naming it (default: TensorFlow's, "
                       "10); give every worker the same.")
    flags.DEFINE_enum("precision", "float32", list(PRECISIONS),
                      "float32, or Keras mixed precision (float16 with loss scaling).")
    flags.DEFINE_bool("enable_xla", False, "Compile the gradient computation with XLA.")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per optimizer step (train_batch_size is the total).")
    flags.DEFINE_bool("recompute", False,
                      "Keep only each encoder block's input in the forward pass and run "
                      "the block again in the backward pass: the same gradients, a "
                      "fraction of the activation memory, 13-28% more time a step as "
                      "measured (README \"Fitting large models\").")
    flags.DEFINE_enum("recompute_unit", "layer", list(RECOMPUTE_UNITS),
                      "With --recompute: each block (layer) or each run of a layer "
                      "group's inner_group_num blocks (group) is one recomputed unit.")
    flags.DEFINE_integer("seed", 12345, "Seed of every random choice (weights, data order).")
    flags.DEFINE_string("export_dir", None,
                        "Also export a SavedModel for TF Serving to <export_dir>/<version>/ "
                        "at the end (see export_savedmodel.py).")
    flags.DEFINE_enum("serving_precision", "float32", list(SERVING_PRECISIONS),
                      "What the --export_dir SavedModel computes in: bfloat16 runs its "
                      "matmuls in bfloat16 (for CPUs with AVX512_BF16 or AMX), LayerNorm, "
                      "softmax and outputs in float32.")
    define_tflite_flags()
    flags.DEFINE_string("export_hf_dir", None,
                        "Also write the trained model as a Hugging Face directory "
                        "(config.json, model.safetensors, tokenizer files) that "
                        "transformers loads; it must not exist yet.")


def define_skip_flag() -> None:
    """`--max_skipped_rows`: how many bad rows a split may lose before a run stops."""
    from albert_tf.data.report import DEFAULT_MAX_SKIPPED

    flags.DEFINE_string("max_skipped_rows", DEFAULT_MAX_SKIPPED,
                        "The most rows of a split that may be skipped as unreadable (more "
                        "or fewer fields than the header, a broken quote, invalid UTF-8, "
                        "an unknown label, ...) before the run stops, before training: a "
                        "fraction of the split's rows (0.01 or 1%) or a count (0, 25). "
                        "What was read and skipped is in <output_dir>/data_report.json.")


def define_fine_tuning_flags(*, max_seq_length: int, predict_help: str,
                             length_help: str = "Maximum sequence length.",
                             eval_batch: bool = True, train_step: int | None | bool = None,
                             warmup_step: int | None = None, epochs: bool = True) -> None:
    """The flags every fine-tuning script has beside the model's, with each script's
    defaults: --max_seq_length, --do_predict, the batch sizes and the training length.
    The length: `train_step` (an int: --train_step and --warmup_step with those
    defaults; None: both, unset, with --num_train_epochs and --warmup_proportion
    filling in; False: no step flags) and `epochs` (--num_train_epochs and
    --warmup_proportion)."""
    flags.DEFINE_integer("max_seq_length", max_seq_length, length_help)
    define_skip_flag()
    flags.DEFINE_bool("do_predict", False, predict_help)
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
    if eval_batch:
        flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
    flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
    by_epochs = " (default: --num_train_epochs over the examples)" if epochs else ""
    if train_step is not False:
        flags.DEFINE_integer("train_step", train_step, f"Training steps{by_epochs}.")
    if epochs:
        flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs (over the examples)"
                           + (", when --train_step is not given." if train_step is None
                              else "."))
    if train_step is not False:
        flags.DEFINE_integer("warmup_step", warmup_step, "Warmup steps" + (
            " (default: --warmup_proportion of the steps)." if epochs else "."))
    if epochs:
        flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps spent warming up.")


class FlagNames(collections.abc.Sequence):
    """The names of the flags that some modules define, read when used from absl's
    record of which module defined each flag: no list restates the definitions, and an
    app module can name its flags before its `define_flags` has run (the scripts call
    it after importing the module)."""

    def __init__(self, *modules: str):
        self.modules = modules

    def _names(self) -> tuple[str, ...]:
        # a module is a name, or a function giving names (modules loaded at run time)
        modules = [name for m in self.modules for name in (m() if callable(m) else [m])]
        return tuple(flag.name for module in modules
                     for flag in flags.FLAGS.get_flags_for_module(module))

    def __getitem__(self, index):
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __add__(self, other: FlagNames) -> FlagNames:
        return FlagNames(*self.modules, *other.modules)

    def __repr__(self) -> str:
        return f"FlagNames({', '.join(map(repr, self.modules))})"


# The flags `define_model_flags` defines (those of this module), which every script
# passes to its `run`; an app adds its own: `MODEL_FLAG_NAMES + FlagNames(__name__)`.
MODEL_FLAG_NAMES = FlagNames(__name__)


def flag_values(names) -> dict:
    return {name: flags.FLAGS[name].value for name in names}


def load_config(albert_config_file, checkpoint_layout: str = "google") -> AlbertConfig:
    """`--albert_config_file`: a shipped config name (`albert_base_v2`, ...) or the path
    of an albert_config.json (or a Hugging Face config.json); the error for neither
    lists the shipped names. For brightmart weights (`checkpoint_layout`), the
    Google-layout equivalent of the config."""
    if not albert_config_file:
        raise UsageError("--albert_config_file is required")
    return release.layout_config(AlbertConfig.from_name_or_file(albert_config_file),
                                 checkpoint_layout)


def typed_options(settings, flag_names, *, exclusive=()) -> options.Options:
    """The run's options as a frozen dataclass of the script's flags
    (`albert_tf.apps.options`): unknown options, values of the wrong type and options
    that exclude each other are named before any work; options left out take the
    flags' defaults."""
    return options.build(settings, options.options_class(flag_names, exclusive=exclusive))


def complete_model_files(settings: dict) -> dict:
    """The settings with what `--init_checkpoint` brings: the layout of its weights
    (`checkpoint_layout`), and the config and tokenizer files found beside them where
    the flags give none (a release directory of any layout), `do_lower_case` too. A
    copy (of the same type: typed options stay typed); checked before any work starts."""
    given, settings = settings, dict(settings)
    if not settings.get("init_checkpoint"):
        if "do_lower_case" in settings and settings["do_lower_case"] is None:
            settings["do_lower_case"] = True
        return with_changes(given, **settings)
    files = release.describe_checkpoint(settings["init_checkpoint"])
    settings["checkpoint_layout"] = files.layout
    if not settings.get("albert_config_file"):
        if files.config_file is None:
            raise UsageError(
                f"--albert_config_file is required: there is no config beside "
                f"--init_checkpoint={settings['init_checkpoint']}")
        settings["albert_config_file"] = files.config_file
        logging.info("config: %s", files.config_file)
    if "spm_model_file" in settings and not (
            settings.get("spm_model_file") or settings.get("vocab_file")):
        if files.spm_model_file:
            settings["spm_model_file"] = files.spm_model_file
        elif files.vocab_file:
            settings["vocab_file"] = files.vocab_file
        logging.info("tokenizer: %s", settings["spm_model_file"] or settings["vocab_file"])
    said = files.do_lower_case
    if "do_lower_case" in settings:
        if settings["do_lower_case"] is None:
            settings["do_lower_case"] = True if said is None else said
        elif said is not None and settings["do_lower_case"] != said:
            logging.warning("--do_lower_case=%s, but %s says do_lower_case=%s",
                            settings["do_lower_case"], files.directory, said)
    return with_changes(given, **settings)


def resolve_labels(settings: dict, output_dir: str, discover) -> list[str]:
    """A model's labels: `--labels`, else the labels.txt of a model in `output_dir`,
    else `discover()` (the training file's). A training run whose labels differ from
    those already saved is refused (they would not fit its checkpoints). Nothing is
    written: `save_labels` keeps them once the data is checked."""
    path = os.path.join(output_dir, LABELS_FILE)
    saved = fileio.read_bytes(path).decode("utf-8").splitlines() \
        if tf.io.gfile.exists(path) else None
    if settings.get("labels"):
        labels = list(settings["labels"])
    elif saved is not None:
        labels = saved
    else:
        labels = list(discover())
    if len(set(labels)) != len(labels) or not labels:
        raise UsageError(f"the labels must be distinct and not empty: {labels}")
    if settings["do_train"] and saved is not None and saved != labels:
        raise UsageError(
            f"{path} holds other labels ({', '.join(saved)}) than this run's "
            f"({', '.join(labels)}): use another --output_dir")
    logging.info("labels: %s", ", ".join(labels))
    return labels


def save_labels(settings: dict, output_dir: str, labels: list[str]) -> None:
    """A training run's labels as labels.txt (atomically), unless it is there."""
    path = os.path.join(output_dir, LABELS_FILE)
    if settings["do_train"] and not tf.io.gfile.exists(path):
        fileio.write_text_atomically(path, "".join(f"{label}\n" for label in labels))


def check_labels_known(settings: dict) -> None:
    """Without --do_train, the labels come from --labels or the labels.txt of the model
    in --output_dir: a UsageError when neither is there."""
    path = os.path.join(settings["output_dir"] or "", LABELS_FILE)
    if not settings["do_train"] and not settings["labels"] and not tf.io.gfile.exists(path):
        raise UsageError(f"no {LABELS_FILE} in --output_dir={settings['output_dir']}: "
                         f"give --labels")


def app_main(app_module):
    """The `main(argv)` of a run_* script: no positional arguments, the flags to
    `app_module.run` (`run_script`)."""
    def main(argv):
        from absl import app

        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
        run_script(app_module.run, app_module.FLAG_NAMES)
    return main


def program(main, doc: str, required=("output_dir",)) -> None:
    """Runs an absl script's `main` with `required` flags, whether started as
    `python <script>.py` or as its installed command: `--help` shows `doc` and the
    program's flags (absl shows the __main__ module's docstring and the flags it
    defines; here the modules of albert_tf define them). An `app.UsageError` of `main`
    is one line, `error: <why>` (exit status 1), as the other bad input."""
    import sys

    from absl import app

    sys.modules["__main__"].__doc__ = doc
    from albert_tf.tasks import loaded_modules

    task_modules = set(loaded_modules())  # a --task_module's flags are the program's too
    for module, defined in flags.FLAGS.flags_by_module_dict().items():
        if module.startswith("albert_tf.") or module in task_modules:
            for flag in defined:
                flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    for name in required:
        flags.mark_flag_as_required(name)

    def one_line_usage_errors(argv):
        # absl would print the usage and every flag's help before an app.UsageError
        try:
            return main(argv)
        except app.UsageError as e:
            raise SystemExit(f"error: {e}") from None

    app.run(one_line_usage_errors)
