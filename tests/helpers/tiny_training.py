"""A tiny pretraining run for the training-loop tests, importable and runnable.

    python tests/helpers/tiny_training.py OUTPUT_DIR TRAIN_STEPS SAVE_STEPS
        [--strategy=one_device|mirrored] [--accumulation=N] [--batch=B] [--sleep=S]
        [--dropout=P] [--recompute=layer|group]

Prints the final weights' checksum as JSON on its last line.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402


def config(dropout: float = 0.0):
    from tests.helpers.tiny import tiny_config

    return tiny_config(vocab_size=40, intermediate_size=24, max_position_embeddings=16,
                       hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def dataset(global_batch, skip=0, seed=3):
    """A fixed stream of pretraining batches (original feature names), ragged MLM
    weights included, so that weighted means are tested."""
    import tensorflow as tf

    from albert_tf import names
    from tests.helpers.tiny import random_inputs

    rng = np.random.default_rng(seed)
    inputs = random_inputs(config(), batch=64, length=12, seed=rng, min_length=6,
                           masked_lm_predictions=3)
    positions = inputs[names.MASKED_LM_POSITIONS]
    features = {
        **names.to_record_features(inputs),
        names.MASKED_LM_IDS: np.take_along_axis(inputs[names.INPUT_WORD_IDS], positions, 1),
        names.MASKED_LM_WEIGHTS: (rng.random(positions.shape) < 0.7).astype(np.float32),
        names.NEXT_SENTENCE_LABELS: rng.integers(0, 2, (len(positions), 1)).astype(np.int32),
    }
    data = tf.data.Dataset.from_tensor_slices(features).repeat().batch(global_batch)
    return data.skip(skip)


def make_trainer(strategy, output_dir, train_steps, save_steps, accumulation=1,
                 learning_rate=0.05, dropout=0.0, **kwargs):
    import keras

    from albert_tf import AlbertPretrainer
    from albert_tf.training.loop import Trainer
    from albert_tf.training.objectives import PretrainingObjective

    with strategy.scope():
        model = AlbertPretrainer(config(dropout), seed=0)
        # A large epsilon: Adam would blow rounding noise (the key biases' gradient is
        # exactly zero in theory) up to full-size steps and hide real differences.
        optimizer = keras.optimizers.Adam(learning_rate, epsilon=1e-3)
    return Trainer(strategy=strategy, model=model, optimizer=optimizer,
                   objective=PretrainingObjective(), output_dir=output_dir,
                   train_steps=train_steps, steps_per_loop=2,
                   save_checkpoints_steps=save_steps,
                   gradient_accumulation_steps=accumulation, **kwargs)


def weights_summary(model):
    return {w.path: float(np.sum(np.abs(w.numpy().astype(np.float64)))) for w in model.weights}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("train_steps", type=int)
    parser.add_argument("save_steps", type=int)
    parser.add_argument("--strategy", default="one_device")
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--recompute", default=None)
    args = parser.parse_args()
    if args.strategy == "mirrored":
        from tests.helpers.faults import use_logical_cpus

        use_logical_cpus(2)
    from albert_tf.training import distribute

    strategy = distribute.get_strategy(args.strategy)
    trainer = make_trainer(strategy, args.output_dir, args.train_steps, args.save_steps,
                           args.accumulation, dropout=args.dropout,
                           recompute=args.recompute)
    if args.sleep:  # slow each loop down, so that a test can interrupt the run
        original = trainer._report

        def slow_report(*a, **k):
            original(*a, **k)
            time.sleep(args.sleep)

        trainer._report = slow_report
    micro_batch = args.batch // args.accumulation
    result = trainer.train(lambda skip: dataset(micro_batch, skip))
    print(json.dumps({"step": result.step, "loss": result.loss,
                      "stopped": result.stopped_by_signal,
                      "weights": weights_summary(trainer.model)}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
