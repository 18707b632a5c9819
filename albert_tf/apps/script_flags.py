"""The flags the absl scripts share, with the original names, and the names of the
flags a module defines.

Every script reads the model and its tokenizer the same way (`define_model_file_flags`:
`--albert_config_file` is a file or a shipped name), `export_savedmodel.py` included;
the training scripts add the run's flags (`define_model_flags`), the fine-tuning ones
their lengths and batch sizes (`define_fine_tuning_flags`). `FlagNames` reads which
module defined each flag from absl's record, so no list restates the definitions:
`MODEL_FLAG_NAMES` are the flags the functions here define.
"""

from __future__ import annotations

import collections.abc

from absl import flags

from albert_tf.export.savedmodel import SERVING_PRECISIONS
from albert_tf.export.tflite import TFLITE_PRECISIONS
from albert_tf.modeling.recompute import UNITS as RECOMPUTE_UNITS
from albert_tf.training import distribute

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def define_model_file_flags():
    """The model and its tokenizer, as every script takes them (training or export);
    `albert_tf.apps.model_files.load_config` reads `--albert_config_file`."""
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


# The flags the functions of this module define (`define_model_flags`'s, and those of
# `define_fine_tuning_flags` and `define_skip_flag` where a script calls them), which
# every script passes to its `run`; an app adds its own:
# `MODEL_FLAG_NAMES + FlagNames(__name__)`.
MODEL_FLAG_NAMES = FlagNames(__name__)


def flag_values(names) -> dict:
    """The parsed values of the flags `names`, by name."""
    return {name: flags.FLAGS[name].value for name in names}
