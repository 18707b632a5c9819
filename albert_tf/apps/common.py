"""What the absl scripts share: flags with the original names, and the set-up steps.

The scripts (`run_pretraining.py`, `run_classifier.py`, `run_squad.py`) only define
flags and call `albert_tf.apps.<task>.run`; everything they do is reachable from
Python here. `export_savedmodel.py` takes the model and tokenizer flags defined here
too, so every script reads `--albert_config_file` (a file or a shipped name) the same
way.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os

import keras
import tensorflow as tf
from absl import flags, logging

from albert_tf import checkpoints, fileio, release
from albert_tf.config import AlbertConfig
from albert_tf.export.savedmodel import SERVING_PRECISIONS, ExportError, refuse_frozen_weights
from albert_tf.export.tflite import TFLITE_PRECISIONS, check_tflite_path
from albert_tf.training import distribute
from albert_tf.training.loop import Trainer, predict
from albert_tf.training.optimizers import create_optimizer

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
BEST_CHECKPOINT = "model.ckpt-best"  # the original's name for the kept checkpoint
LABELS_FILE = "labels.txt"  # beside the checkpoints: the model's labels, one per line


class UsageError(ValueError):
    """Flags or files that cannot make a run: reported before any training starts."""


def user_errors() -> tuple[type[Exception], ...]:
    """The errors that mean bad flags or input (reported as one line, not a traceback)."""
    from albert_tf.checkpoints import CheckpointError
    from albert_tf.config import ConfigError
    from albert_tf.data.glue import GlueDataError
    from albert_tf.data.ner import NerDataError
    from albert_tf.data.pretraining import PretrainingDataError
    from albert_tf.data.race import RaceDataError
    from albert_tf.data.squad import SquadError
    from albert_tf.tasks import TaskModuleError
    from albert_tf.tokenization import TokenizerError
    from albert_tf.training.lock import OutputDirLocked

    return (OutputDirLocked, UsageError, TaskModuleError, CheckpointError, ConfigError,
            GlueDataError, NerDataError, PretrainingDataError, RaceDataError, SquadError,
            TokenizerError, distribute.DistributionError, FileNotFoundError)


def run_script(run, flag_names) -> None:
    """The body of every script's `main`: the flags to `run`, bad input to one line."""
    try:
        run(flag_values(flag_names))
    except user_errors() as e:
        logging.error("%s", e)
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
    """`--export_tflite` and `--tflite_precision`: every script that exports has them."""
    flags.DEFINE_string("export_tflite", None,
                        "Also write the model as one LiteRT (TFLite) file at this path, "
                        "token ids in, with <path>.json beside it (as the original's "
                        "albert_model.tflite); see albert_tf.export.export_tflite.")
    flags.DEFINE_enum("tflite_precision", "float32", list(TFLITE_PRECISIONS),
                      "What the --export_tflite file stores its weights in: float32, "
                      "float16 (half the size) or int8 (dynamic-range quantization: a "
                      "quarter of the size, int8 matmuls).")


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
                        "config and tokenizer files are then used when not given).")
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
    flags.DEFINE_enum("precision", "float32", list(PRECISIONS),
                      "float32, or Keras mixed precision (float16 with loss scaling).")
    flags.DEFINE_bool("enable_xla", False, "Compile the gradient computation with XLA.")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per optimizer step (train_batch_size is the total).")
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


@dataclasses.dataclass
class RunContext:
    """The strategy, the config and the helpers of one run."""

    strategy: tf.distribute.Strategy
    config: AlbertConfig
    output_dir: str


def check_file(path, flag: str) -> str:
    if not path:
        raise UsageError(f"--{flag} is required")
    path = os.fspath(path)
    if not fileio.exists(path):
        raise UsageError(f"--{flag}={path} does not exist")
    return path


def load_config(albert_config_file, checkpoint_layout: str = "google") -> AlbertConfig:
    """`--albert_config_file`: a shipped config name (`albert_base_v2`, ...) or the path
    of an albert_config.json (or a Hugging Face config.json); the error for neither
    lists the shipped names. For brightmart weights (`checkpoint_layout`), the
    Google-layout equivalent of the config."""
    if not albert_config_file:
        raise UsageError("--albert_config_file is required")
    return release.layout_config(AlbertConfig.from_name_or_file(albert_config_file),
                                 checkpoint_layout)


def complete_model_files(settings: dict) -> dict:
    """The settings with what `--init_checkpoint` brings: the layout of its weights
    (`checkpoint_layout`), and the config and tokenizer files found beside them where
    the flags give none (a release directory of any layout), `do_lower_case` too. A
    copy; checked before any work starts."""
    settings = dict(settings)
    if not settings.get("init_checkpoint"):
        if "do_lower_case" in settings and settings["do_lower_case"] is None:
            settings["do_lower_case"] = True
        return settings
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
    return settings


def setup(*, albert_config_file, output_dir, distribution_strategy="one_device", tpu=None,
          precision="float32", seed=12345, max_seq_length=None,
          checkpoint_layout="google", export_tflite=None, **_) -> RunContext:
    """Config, strategy, precision and seeds; errors before any work starts."""
    if not output_dir:
        raise UsageError("--output_dir is required")
    checked_tflite_path(export_tflite)
    # Training, and evaluating one checkpoint after another, change the weights.
    refuse_frozen_weights("this script", UsageError)
    config = load_config(albert_config_file, checkpoint_layout)
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise UsageError(
            f"--max_seq_length={max_seq_length} is longer than the model's "
            f"max_position_embeddings ({config.max_position_embeddings}) in "
            f"{albert_config_file}")
    keras.utils.set_random_seed(seed)
    keras.mixed_precision.set_dtype_policy(precision)
    strategy = distribute.get_strategy(distribution_strategy, tpu=tpu)
    tf.io.gfile.makedirs(output_dir)
    if distribute.is_chief(strategy):  # one run per output directory
        from albert_tf.training import lock

        lock.acquire(output_dir)
    logging.info("%s with %d replicas; precision %s", type(strategy).__name__,
                 strategy.num_replicas_in_sync, precision)
    return RunContext(strategy, config, os.fspath(output_dir))


def start(settings: dict) -> tuple[RunContext, object]:
    """`setup`, the batch sizes checked against the replicas, and the run's Python
    tokenizer (`--spm_model_file` or `--vocab_file`, `--do_lower_case`)."""
    from albert_tf.tokenization import FullTokenizer

    context = setup(**settings)
    for flag in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
        if flag in settings:
            distribute.per_replica_batch_size(settings[flag], context.strategy, flag)
    tokenizer = FullTokenizer(vocab_file=settings["vocab_file"],
                              do_lower_case=settings["do_lower_case"],
                              spm_model_file=settings["spm_model_file"])
    return context, tokenizer


def make_optimizer(*, learning_rate, num_train_steps, num_warmup_steps, optimizer="adamw",
                   precision="float32", **kwargs):
    """The original optimizer; wrapped for loss scaling under float16."""
    result = create_optimizer(learning_rate, num_train_steps, num_warmup_steps,
                              optimizer=optimizer, **kwargs)
    if precision == "mixed_float16":
        result = keras.optimizers.LossScaleOptimizer(result)
    return result


def make_trainer(settings: dict, strategy, model, optimizer, objective, output_dir: str,
                 train_steps: int):
    """The run's `Trainer`: checkpoints, loop length, accumulation, XLA and the seed of
    its random draws (dropout) from the common flags."""
    return Trainer(
        strategy=strategy, model=model, optimizer=optimizer, objective=objective,
        output_dir=output_dir, train_steps=train_steps,
        steps_per_loop=settings["iterations_per_loop"],
        save_checkpoints_steps=settings["save_checkpoints_steps"],
        keep_checkpoint_max=settings["keep_checkpoint_max"],
        gradient_accumulation_steps=settings["gradient_accumulation_steps"],
        enable_xla=settings["enable_xla"], seed=settings["seed"])


def train(trainer, dataset_fn):
    """`trainer.train(dataset_fn)`; when it reached its last step, the chief then keeps
    the final weights as the original's `model.ckpt-<step>` (TF1 names, as its
    Estimator wrote them): what `export_savedmodel.py --checkpoint`, `--init_checkpoint`
    and the original code read. (The run's own `ckpt-N` are object-based checkpoints for
    resuming, with the optimizer's slots.) Returns the `TrainResult`."""
    result = trainer.train(dataset_fn)
    if not result.stopped_by_signal and distribute.is_chief(trainer.strategy):
        path = os.path.join(trainer.output_dir, f"model.ckpt-{result.step}")
        checkpoints.save_tf1_checkpoint(trainer.model, path, global_step=result.step)
        logging.info("TF1 checkpoint of the trained model: %s", path)
    return result


def initialize_from(model, init_checkpoint, output_dir) -> None:
    """Loads `init_checkpoint` (any layout, by name: `release.load_checkpoint`) unless
    `output_dir` holds a checkpoint to resume from (which then wins, as in the
    original)."""
    if not init_checkpoint:
        return
    if tf.train.latest_checkpoint(output_dir):
        logging.info("not loading %s: resuming from %s", init_checkpoint, output_dir)
        return
    report = release.load_checkpoint(model, init_checkpoint)
    logging.info("initialized from %s:\n%s", init_checkpoint, report)


def write_results(path: str, results: dict, title: str = "Eval results",
                  summary_step: int | None = None) -> None:
    """`key = value` lines, as the original's eval_results.txt; also logged, and with
    `summary_step` written as TensorBoard scalars under `<dir>/eval`."""
    logging.info("***** %s *****", title)
    for key, value in sorted(results.items()):
        logging.info("  %s = %s", key, value)
    fileio.write_text_atomically(path, "".join(f"{k} = {v}\n" for k, v in sorted(results.items())))
    if summary_step is not None:
        writer = tf.summary.create_file_writer(os.path.join(os.path.dirname(path), "eval"))
        with writer.as_default(step=summary_step):
            for key, value in results.items():
                if key != "global_step":
                    tf.summary.scalar(key, float(value))
        writer.flush()


# The flags that each ask for the trained model in some form (`export_if_asked`).
EXPORT_FLAGS = ("export_dir", "export_tflite", "export_hf_dir")


def exporting(settings: dict) -> bool:
    """Whether the run writes its model in any form at the end."""
    return any(settings.get(flag) for flag in EXPORT_FLAGS)


def export_if_asked(settings: dict, strategy, model, kind: str, *, labels=None,
                    **options) -> str | None:
    """With `--export_hf_dir`, writes `model` as a Hugging Face directory (`labels` name
    a classifier's outputs); with `--export_dir`, exports it as `kind` (see
    `albert_tf.export`) with the run's tokenizer and `max_seq_length`; with
    `--export_tflite`, writes it as one LiteRT file (`tflite_precision`). The chief
    alone writes. Returns the SavedModel version directory written."""
    if not distribute.is_chief(strategy):
        return None
    if settings.get("export_hf_dir"):
        from albert_tf.huggingface import save_hf_checkpoint

        save_hf_checkpoint(model, settings["export_hf_dir"],
                           spm_model_file=settings["spm_model_file"],
                           vocab_file=settings["vocab_file"],
                           do_lower_case=settings["do_lower_case"], labels=labels)
        logging.info("wrote the Hugging Face directory %s", settings["export_hf_dir"])
    if settings.get("export_tflite"):
        from albert_tf.export import export_tflite

        export_tflite(model, settings["export_tflite"], kind=kind,
                      precision=settings["tflite_precision"], labels=labels,
                      task_name=options.get("task_name"),
                      max_seq_length=settings["max_seq_length"],
                      do_lower_case=settings["do_lower_case"])
        logging.info("wrote the LiteRT file %s", settings["export_tflite"])
    if not settings.get("export_dir"):
        return None
    if labels is not None:
        options["labels"] = labels
    from albert_tf.export import export_savedmodel

    path = export_savedmodel(
        model, settings["export_dir"], kind=kind, spm_model_file=settings["spm_model_file"],
        vocab_file=settings["vocab_file"], do_lower_case=settings["do_lower_case"],
        max_seq_length=settings["max_seq_length"],
        serving_precision=settings["serving_precision"], **options)
    logging.info("exported the SavedModel to %s", path)
    return path


def resolve_labels(settings: dict, output_dir: str, discover) -> list[str]:
    """A model's labels: `--labels`, else the labels.txt of a model in `output_dir`,
    else `discover()` (the training file's). Saved as labels.txt (atomically) when
    training; a training run whose labels differ from those already saved is refused
    (they would not fit its checkpoints)."""
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
    if settings["do_train"]:
        if saved is not None and saved != labels:
            raise UsageError(
                f"{path} holds other labels ({', '.join(saved)}) than this run's "
                f"({', '.join(labels)}): use another --output_dir")
        if saved is None:
            fileio.write_text_atomically(path, "".join(f"{label}\n" for label in labels))
    logging.info("labels: %s", ", ".join(labels))
    return labels


def wanted_splits(settings: dict) -> list[str]:
    """The splits a fine-tuning run reads: train, dev, test for --do_train, --do_eval,
    --do_predict."""
    return [s for s, on in (("train", settings["do_train"]), ("dev", settings["do_eval"]),
                            ("test", settings["do_predict"])) if on]


def check_run(settings: dict) -> None:
    """What run_classifier.py and run_ner.py check first: something to do, a tokenizer
    file that exists, and a trained model in --output_dir (a checkpoint or
    model.ckpt-best) for --do_eval / --do_predict without --do_train."""
    if not wanted_splits(settings):
        raise UsageError("nothing to do: give --do_train, --do_eval or --do_predict")
    if not (settings["spm_model_file"] or settings["vocab_file"]):
        raise UsageError("give --spm_model_file (or --vocab_file for WordPiece)")
    for flag in ("spm_model_file", "vocab_file"):
        if settings[flag]:
            check_file(settings[flag], flag)
    output_dir = settings["output_dir"] or ""
    trained = tf.io.gfile.isdir(output_dir) and (
        tf.train.latest_checkpoint(output_dir) or tf.io.gfile.exists(
            os.path.join(output_dir, BEST_CHECKPOINT + ".index")))
    if not settings["do_train"] and not trained:
        raise UsageError(
            f"--do_eval/--do_predict without --do_train need a trained model in "
            f"--output_dir={settings['output_dir']}, and there is none")


def check_labels_known(settings: dict) -> None:
    """Without --do_train, the labels come from --labels or the labels.txt of the model
    in --output_dir: a UsageError when neither is there."""
    path = os.path.join(settings["output_dir"] or "", LABELS_FILE)
    if not settings["do_train"] and not settings["labels"] and not tf.io.gfile.exists(path):
        raise UsageError(f"no {LABELS_FILE} in --output_dir={settings['output_dir']}: "
                         f"give --labels")


def load_best_or_latest(trainer, output_dir) -> None:
    """The kept best checkpoint (model.ckpt-best) if there is one, else the latest (as
    the chief wrote them: every worker reads the same)."""
    distribute.barrier(trainer.strategy)
    best = os.path.join(output_dir, BEST_CHECKPOINT)
    if tf.io.gfile.exists(best + ".index"):
        checkpoints.load_tf1_checkpoint(trainer.model, best, strict=True)
    else:
        trainer.restore()


def evaluate_checkpoints(task, trainer, settings, path, output_dir) -> dict:
    """Evaluates every kept checkpoint on the dev set (eval_results.txt ends with the
    latest; TensorBoard gets each) and keeps the best by the task's metric as
    `model.ckpt-best` (TF1 format, readable by the original code) with
    `best_trial.txt`. `task.dataset(path, settings, batch_size, training)` reads the
    dev set in order, `task.metrics(outputs)` scores it (the model outputs
    `task.eval_outputs` and the features `task.label_features`, by default
    `predictions` and `label_ids`) and `task.metric` names the result to maximize."""
    dataset = task.dataset(path, settings, settings["eval_batch_size"], False)
    # every worker evaluates the chief's checkpoints, once they are written
    distribute.barrier(trainer.strategy)
    checkpoints_to_try = trainer.checkpoints_oldest_first() or [None]
    best, best_step = None, None
    for checkpoint in checkpoints_to_try:
        if checkpoint is not None and not trainer.load(checkpoint, partial=True):
            continue  # unreadable: reported, not evaluated
        results = task.metrics(predict(
            trainer.strategy, trainer.model, dataset,
            list(getattr(task, "eval_outputs", ["predictions"])),
            list(getattr(task, "label_features", ["label_ids"]))))
        results["global_step"] = trainer.step
        if distribute.is_chief(trainer.strategy):
            write_results(os.path.join(output_dir, "eval_results.txt"), results,
                          summary_step=trainer.step)
        logging.info("dev %s at step %d: %s", task.metric, trainer.step, results[task.metric])
        if best is None or results[task.metric] > best[task.metric]:
            best, best_step = results, trainer.step
            if distribute.is_chief(trainer.strategy):
                checkpoints.save_tf1_checkpoint(trainer.model,
                                                os.path.join(output_dir, BEST_CHECKPOINT),
                                                global_step=trainer.step)
    if best is None:
        raise UsageError(f"no checkpoint of {output_dir} can be read: nothing to evaluate")
    if distribute.is_chief(trainer.strategy):
        write_results(os.path.join(output_dir, "best_trial.txt"), best,
                      title=f"Best trial (step {best_step})")
    return best


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
    defines; here the modules of albert_tf define them)."""
    import sys

    from absl import app

    sys.modules["__main__"].__doc__ = doc
    for module, defined in flags.FLAGS.flags_by_module_dict().items():
        if module.startswith("albert_tf."):
            for flag in defined:
                flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    for name in required:
        flags.mark_flag_as_required(name)
    app.run(main)
