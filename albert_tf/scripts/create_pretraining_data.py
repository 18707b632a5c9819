"""Creates ALBERT pretraining TFRecords (masked LM + sentence order) from raw text.

The flags, their defaults, the input format (one sentence per line, a blank line between
documents) and the records are those of the original google-research/albert script; the
work itself is `albert_tf.data.pretraining.create_pretraining_data`. For example:

    python create_pretraining_data.py --input_file='corpus/*.txt' \\
        --output_file=out/pretrain.tfrecord@8 --spm_model_file=30k-clean.model \\
        --max_seq_length=512 --dupe_factor=10

`--output_file` takes a comma-separated list or `path@N` (N shards, `path-0000i-of-0000N`).
"""

import dataclasses

from absl import app, flags, logging

from albert_tf import tokenization
from albert_tf.apps import runner
from albert_tf.apps.options import define_flags as define_option_flags
from albert_tf.data import pretraining
from albert_tf.data.errors import DataError
from albert_tf.tasks.options import SkipOptions

_DEFAULTS = pretraining.PretrainingDataConfig()

flags.DEFINE_string("input_file", None,
                    "Input raw text file or glob (or comma-separated list of them).")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files, or "
                    "path@N for N shards).")
flags.DEFINE_string("vocab_file", None,
                    "The vocabulary file that the ALBERT model was trained on (WordPiece "
                    "models; not needed with --spm_model_file).")
flags.DEFINE_string("spm_model_file", None, "The model file for sentence piece tokenization.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models "
                  "and False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", _DEFAULTS.do_whole_word_mask,
                  "Whether to use whole word masking rather than per-piece masking.")
flags.DEFINE_bool("favor_shorter_ngram", _DEFAULTS.favor_shorter_ngram,
                  "Whether to set higher probabilities for sampling shorter ngrams.")
flags.DEFINE_bool("random_next_sentence", _DEFAULTS.random_next_sentence,
                  "Next sentence prediction (a random other document's text as the "
                  "negative) instead of sentence order prediction (the two segments "
                  "swapped as the negative).")
flags.DEFINE_integer("max_seq_length", _DEFAULTS.max_seq_length, "Maximum sequence length.")
flags.DEFINE_integer("ngram", _DEFAULTS.ngram, "Maximum number of ngrams to mask.")
flags.DEFINE_integer("max_predictions_per_seq", _DEFAULTS.max_predictions_per_seq,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", _DEFAULTS.random_seed,
                     "Random seed for data generation: the output is a function of it.")
flags.DEFINE_integer("dupe_factor", _DEFAULTS.dupe_factor,
                     "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", _DEFAULTS.masked_lm_prob, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", _DEFAULTS.short_seq_prob,
                   "Probability of creating sequences which are shorter than the maximum "
                   "length.")
flags.DEFINE_integer("num_workers", None,
                     "Worker processes (default: one per CPU; 0: none). The output does "
                     "not depend on it.")
flags.DEFINE_integer("chunk_bytes", _DEFAULTS.chunk_bytes,
                     "Input text per chunk: the unit of work, of the instance shuffle and "
                     "of the window from which a random other document is drawn.")
flags.DEFINE_integer("max_line_bytes", _DEFAULTS.max_line_bytes,
                     "Longer input lines are skipped with a warning.")
define_option_flags(SkipOptions)  # the input's unreadable lines (not UTF-8, NUL, too long)

FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if not (FLAGS.vocab_file or FLAGS.spm_model_file):
        raise app.UsageError("give --spm_model_file (or --vocab_file for WordPiece)")
    logging.set_verbosity(logging.INFO)
    # Every field of the config is the flag of the same name.
    config = pretraining.PretrainingDataConfig(**{
        field.name: getattr(FLAGS, field.name)
        for field in dataclasses.fields(pretraining.PretrainingDataConfig)})
    tokenizer = pretraining.TokenizerSpec(FLAGS.vocab_file, FLAGS.spm_model_file,
                                          FLAGS.do_lower_case)
    try:
        pretraining.create_pretraining_data(FLAGS.input_file, FLAGS.output_file, tokenizer,
                                            config, num_workers=FLAGS.num_workers,
                                            max_skipped_rows=FLAGS.max_skipped_rows)
    except (DataError, tokenization.TokenizerError, FileNotFoundError) as e:
        # One line, once (exit status 1), as the other scripts' bad input.
        raise SystemExit(f"error: {e}") from None


def run():
    """The program (`python create_pretraining_data.py` and the installed
    `albert-create-pretraining-data`)."""
    runner.program(main, __doc__, required=("input_file", "output_file"))


if __name__ == "__main__":
    run()
