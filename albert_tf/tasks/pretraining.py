"""Pretraining (masked LM + sentence order, as the original `run_pretraining.py`), the
task module of `run_pretraining.py` (`albert_tf.apps.pretraining`).

What pretraining is, in one place: its options (the original's steps, batch sizes and
learning rate, the records or raw text it reads, the dynamic masking of
`create_pretraining_data.py`'s flags), its checks, its model
(`AlbertPretrainer`, whose heads are `task_heads.MASKED_LM` and
`["sentence_order"]`), its objective, its data (a stream of global batches from
records or from raw text, any step to resume from), its evaluation metrics (summed over
the eval batches, the original's four) and its serving kind (`mlm`).

Its data are streams, not split files of examples: there are no labels, no record
cache and no best checkpoint, so `run_pretraining.py` runs it with its own short flow
(train, evaluate the last step, export) on the same session pieces as the fine-tuning
driver.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from albert_tf import losses, names
from albert_tf.data import pretraining
from albert_tf.errors import UsageError
from albert_tf.export import ServingKind, serving_text, tflite_text
from albert_tf.modeling import AlbertPretrainer
from albert_tf.tasks import register
from albert_tf.tasks.base import Task
from albert_tf.tasks.options import RunOptions, option
from albert_tf.tokenization import FullTokenizer
from albert_tf.training.objectives import PretrainingObjective

# The pretrainer's export: its heads' logits, raw text in at every position.
MLM = ServingKind(
    "mlm", AlbertPretrainer, (names.MLM_LOGITS, names.SOP_LOGITS),
    serving_text.sentence_specs, serving_text.pack_sentences_for_mlm,
    reusable=True,
    lite_pack_text=tflite_text.pack_sentences_for_mlm)


@register
class PretrainingTask(Task):
    """MLM + SOP on records (`--input_file`) or raw text (`--input_text`)."""

    name = "pretraining"
    metric = "masked_lm_accuracy"
    serving_kinds = (MLM,)

    @dataclasses.dataclass(frozen=True)
    class Options(RunOptions):
        """The original run_pretraining.py's flags and defaults; with --input_text, the
        dynamic masking of create_pretraining_data.py's flags (--max_skipped_rows: the
        text's unreadable lines)."""

        learning_rate: float = option(0.00176)
        optimizer: str = option("lamb")
        max_seq_length: int = option(512, "Sequence length of the records.")
        train_batch_size: int = option(4096)
        eval_batch_size: int = option(64)
        num_train_steps: int = option(125000, "Training steps.", minimum=1)
        num_warmup_steps: int = option(3125, "Warmup steps.", minimum=0)
        start_warmup_step: int = option(0, "Step at which warmup starts.")
        poly_power: float = option(1.0, "Power of the polynomial decay.")
        input_file: str | None = option(
            None, "Pretraining TFRecords (glob or comma-separated list), as "
            "create_pretraining_data.py writes them.")
        input_text: str | None = option(
            None, "Raw text (one sentence per line, blank line between documents; glob "
            "or list) for dynamic masking instead of --input_file.")
        max_predictions_per_seq: int = option(20, "Masked positions per sequence.")
        max_eval_steps: int = option(100, "Evaluation batches.", minimum=1)
        masked_lm_prob: float = option(0.15, "Masked LM probability (dynamic masking).")
        ngram: int = option(3, "Maximum n-gram to mask (dynamic masking).")
        short_seq_prob: float = option(0.1, "Short sequence probability (dynamic masking).")

        def validate(self) -> None:
            if not (self.do_train or self.do_eval):
                raise UsageError("nothing to do: give --do_train and/or --do_eval")
            if bool(self.input_file) == bool(self.input_text):
                raise UsageError("give exactly one of --input_file (records) and "
                                 "--input_text (raw text, dynamic masking)")
            if self.input_file:
                pretraining.expand_input_patterns(self.input_file)  # raises if none match
            if self.input_text and not (self.spm_model_file or self.vocab_file):
                raise UsageError("--input_text needs --spm_model_file (or --vocab_file)")
            if self.lora_rank is not None or self.lora_ffn:
                raise UsageError("--lora_rank, --lora_ffn: run_pretraining.py trains every "
                                 "weight; LoRA adapters are for fine-tuning")

    def stream(self, batch_size: int, training: bool):
        """A function skip -> the stream of global batches of `batch_size` from the
        records or the raw text (repeated when training), `skip` batches in."""
        o = self.options
        if o.input_text:
            # Here, not at the top: it imports tensorflow_text (0.4 s), which
            # `import albert_tf` (every task module) would otherwise pay.
            from albert_tf.data import dynamic_masking

            tokenizer = FullTokenizer(vocab_file=o.vocab_file,
                                      do_lower_case=o.do_lower_case,
                                      spm_model_file=o.spm_model_file)
            config = pretraining.PretrainingDataConfig(
                max_seq_length=o.max_seq_length,
                max_predictions_per_seq=o.max_predictions_per_seq,
                masked_lm_prob=o.masked_lm_prob, ngram=o.ngram,
                short_seq_prob=o.short_seq_prob, random_seed=o.seed)
            stream = dynamic_masking.StreamOptions(repeat=training, drop_remainder=True,
                                                   max_skipped_rows=o.max_skipped_rows)
            return lambda skip: dynamic_masking.dynamic_pretraining_dataset(
                o.input_text, tokenizer, batch_size, config, stream=stream).skip(skip)
        return lambda skip: pretraining.pretraining_dataset(
            o.input_file, batch_size, max_seq_length=o.max_seq_length,
            max_predictions_per_seq=o.max_predictions_per_seq, is_training=training,
            seed=o.seed, drop_remainder=True).skip(skip)

    def build_model(self, config):
        return AlbertPretrainer(config, seed=self.options.seed)

    def objective(self):
        return PretrainingObjective()

    @staticmethod
    def batch_metrics(outputs, features) -> dict:
        """The original's eval metrics of one batch as (sum, count), summed over the
        batches (`training.loop.evaluate`): masked-LM accuracy and loss (weighted by
        masked_lm_weights), sentence-order accuracy and loss."""
        weights = tf.cast(features[names.MASKED_LM_WEIGHTS], tf.float32)  # [B, P]
        ids = tf.cast(features[names.MASKED_LM_IDS], tf.int32)
        log_probs = losses.log_probabilities(outputs[names.MLM_LOGITS])  # [B, P, V]
        mlm_loss, weight = losses.masked_lm_sums(log_probs, ids, weights)
        correct = tf.cast(tf.equal(tf.argmax(log_probs, -1, output_type=tf.int32), ids),
                          tf.float32)
        labels = tf.reshape(tf.cast(features[names.NEXT_SENTENCE_LABELS], tf.int32), [-1])
        sop = losses.log_probabilities(outputs[names.SOP_LOGITS])  # [B, 2]
        sop_correct = tf.cast(tf.equal(tf.argmax(sop, -1, output_type=tf.int32), labels),
                              tf.float32)
        examples = tf.cast(tf.size(labels), tf.float32)
        return {
            "masked_lm_accuracy": (tf.reduce_sum(weights * correct), weight),
            "masked_lm_loss": (mlm_loss, weight),
            "sentence_order_accuracy": (tf.reduce_sum(sop_correct), examples),
            "sentence_order_loss": (tf.reduce_sum(losses.sentence_order_nll(sop, labels)),
                                    examples),
        }
