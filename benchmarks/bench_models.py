"""Benchmark of the ALBERT models against the peers that are installed: one Markdown table.

Measured side by side, in the same run, for albert_tf ("ours") and each importable peer
(keras-hub's `AlbertBackbone` / `AlbertTextClassifier` on TensorFlow; Hugging Face
`transformers`' `AlbertModel` / `AlbertForSequenceClassification` on CPU torch):

1. forward: the encoder on a fixed batch of `--batch_size` x `--seq_length` random ids
   (all real tokens), sequences/s;
2. train: one fine-tuning step (classifier head, AdamW, clip 1.0), same batch, sequences/s,
   in each of `--train_precisions`: float32, and mixed_bfloat16 (Keras' policy: bfloat16
   matmuls, float32 variables; ours as `--precision=mixed_bfloat16` trains, keras-hub
   under the same global policy, transformers under `torch.autocast("cpu", bfloat16)`);
3. end_to_end: raw text in -> predictions out on a GLUE dev set (`--data_dir`, one task
   folder per entry, e.g. `../shared/data/glue/SST-2,../shared/data/glue/MRPC`),
   sequences/s, each with its standard pipeline at the same `--max_seq_length`;
4. create_pretraining_data: instances/s and peak memory, quoted from BENCHMARKS.md
   (re-measured with `--cpd_input_file`, by benchmarks/bench_create_pretraining_data.py);
5. tokenize: in-graph tokenization against the Python tokenizer, texts/s.

Every implementation runs in fresh processes (one per implementation and round; rounds
interleave the implementations, so that a load change on a shared machine hits all of
them), the best of `--rounds` x the repeats inside a process is kept. Weights are random
(seeded): no download. All peers read the same SentencePiece model
(`--spm_model_file`, by default the repository's reconstruction of Google's
30k-clean.model).

Model FLOPs are counted analytically (matmuls only; `model_flops`): for a sequence of S
tokens through L blocks of hidden size H, FFN size I, embedding size E,
    forward = S * (2 E H + L (8 H^2 + 4 H I)) + L * 4 S^2 H + 2 H^2   (pooler)
i.e. 2 x the weights used in matmuls per token plus QK^T and PV; a training step counts
3 x forward (backward = 2 x forward). GFLOP/s are divided by the machine's fp32 matmul
peak, the best GFLOP/s of `--matmul_size`^2 matmuls in TensorFlow (and torch, when
installed).

    .venv-bench/bin/python benchmarks/bench_models.py \\
        --data_dir=../shared/data/glue/SST-2,../shared/data/glue/MRPC

Peers are optional extras (benchmarks/requirements-peers.txt, in a separate virtual
environment); a peer that does not import is skipped with a note.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from absl import app, flags

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPOSITORY not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, REPOSITORY)
from benchmarks import children  # noqa: E402

IMPLEMENTATIONS = ("ours", "keras_hub", "transformers")
BENCHMARKS = ("forward", "train", "end_to_end", "create_pretraining_data", "tokenize")
TRAIN_PRECISIONS = ("float32", "mixed_bfloat16")

flags.DEFINE_string("config", os.path.join(REPOSITORY, "albert_tf", "configs",
                                           "albert_base_v2.json"),
                    "ALBERT config (albert_config.json format).")
flags.DEFINE_string("spm_model_file", os.path.join(
    REPOSITORY, "tests", "fixtures", "spm", "albert_en_30k_reconstructed.model"),
    "SentencePiece model shared by every implementation.")
flags.DEFINE_integer("batch_size", 8, "Batch of the forward and training benchmarks.")
flags.DEFINE_integer("seq_length", 128, "Sequence length of the forward and training "
                     "benchmarks.")
flags.DEFINE_list("data_dir", [], "GLUE task folders (e.g. ../shared/data/glue/SST-2) "
                  "whose dev.tsv the end-to-end benchmark reads; none: no end-to-end.")
flags.DEFINE_integer("max_seq_length", 128, "max_seq_length of the end-to-end pipelines.")
flags.DEFINE_integer("e2e_batch_size", 32, "Batch of the end-to-end pipelines.")
flags.DEFINE_integer("e2e_max_examples", 0, "Use a seeded random subset of this many "
                     "examples of each dev set (0: all).")
flags.DEFINE_integer("length_multiple", 16, "Ours, end to end, with XLA: each batch is "
                     "padded to its longest sequence rounded up to a multiple of this (a "
                     "few shapes to compile); without XLA, to its longest.")
flags.DEFINE_list("peers", ["keras_hub", "transformers"], "Peers to measure, if "
                  "importable.")
flags.DEFINE_list("benchmarks", list(BENCHMARKS), "Benchmarks to run.")
flags.DEFINE_list("ours_variants", ["xla", "no_xla"], "Ours with and/or without XLA.")
flags.DEFINE_list("peer_variants", ["xla", "no_xla"], "keras-hub with and/or without "
                  "XLA (its default on CPU is without).")
flags.DEFINE_integer("rounds", 3, "Fresh processes per implementation (interleaved).")
flags.DEFINE_integer("repeats", 3, "Timed repeats inside each process (best kept).")
flags.DEFINE_integer("e2e_repeats", 1, "Timed passes over each dev set (after a first, "
                     "untimed pass that compiles and warms up).")
flags.DEFINE_integer("wait_idle", 0, "Before each process, wait up to this many seconds "
                     "for the machine to be idle (CPU busy < 10% over 2 s): on a shared "
                     "machine, fewer measurements are slowed by other jobs.")
flags.DEFINE_integer("train_steps", 3, "Training steps per timed repeat.")
flags.DEFINE_list("train_precisions", list(TRAIN_PRECISIONS), "Precisions of the train "
                  "benchmark (float32, mixed_bfloat16).")
flags.DEFINE_integer("matmul_size", 4096, "Size of the square matmuls of the peak.")
flags.DEFINE_integer("tokenize_texts", 4000, "Texts of the tokenization benchmark "
                     "(from --data_dir, repeated, else seeded synthetic sentences).")
flags.DEFINE_integer("seed", 0, "Seed of every random choice (weights, ids, subsets).")
flags.DEFINE_string("cpd_input_file", None, "Re-measure create_pretraining_data on these "
                    "text files (comma-separated, globs allowed); default: quote "
                    "BENCHMARKS.md.")
flags.DEFINE_integer("cpd_dupe_factor", 2, "dupe_factor of the re-measurement.")
flags.DEFINE_integer("child_timeout", 3600, "Seconds one process may take.")
flags.DEFINE_string("json_output", None, "Also write every measurement to this file.")
flags.DEFINE_string("child", None, "Internal: measure one implementation, print JSON.")

FLAGS = flags.FLAGS

# BENCHMARKS.md, `create_pretraining_data.py` (2.8 MiB of Gutenberg text, dupe_factor=2,
# best of 3 on a quiet 2-vCPU machine).
CPD_QUOTED = {
    "ours": {"instances_per_s": 28290, "peak_memory_mb": 610,
             "variant": "ours, 2 workers (BENCHMARKS.md)"},
    "original": {"instances_per_s": 1448, "peak_memory_mb": 669,
                 "variant": "original create_pretraining_data.py, measured (BENCHMARKS.md)"},
    "original_quoted": {"instances_per_s": 670, "peak_memory_mb": 640,
                        "variant": "original, as quoted for this kind of machine"},
}


# ------------------------------------------------------------------------------ FLOPs
def model_flops(config, seq_length: int, *, train: bool = False) -> float:
    """Matmul FLOPs of one sequence of `seq_length` tokens through the encoder and the
    pooler (x 3 for a training step: backward = 2 x forward)."""
    h, e, i = config.hidden_size, config.embedding_size, config.intermediate_size
    blocks = config.num_hidden_layers * config.inner_group_num
    per_token = (2 * e * h if e != h else 0) + blocks * (8 * h * h + 4 * h * i)
    flops = seq_length * per_token + blocks * 4 * seq_length ** 2 * h + 2 * h * h
    return 3 * flops if train else flops


def _best_time(fn, repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


# -------------------------------------------------------------------------- the data
def train_benchmark(precision: str) -> str:
    """The benchmark name of a training step in `precision`: one table section each."""
    return "train" if precision == "float32" else f"train:{precision}"


@contextlib.contextmanager
def keras_policy(precision: str):
    """Keras' global dtype policy `precision` while models are built, then float32."""
    import keras

    keras.mixed_precision.set_dtype_policy(precision)
    try:
        yield
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def read_dev_set(task_dir: str, max_examples: int, seed: int):
    """(task name, texts_a, texts_b or None, num_labels) of a GLUE task folder's dev
    set, as the original processors read it (raw text, no preprocessing)."""
    import numpy as np

    from albert_tf.data import glue

    task_dir = os.path.abspath(task_dir)
    task = glue.get_task(os.path.basename(task_dir.rstrip("/")))
    examples = glue.GlueProcessor(task).get_dev_examples(os.path.dirname(task_dir))
    if max_examples and max_examples < len(examples):
        keep = np.sort(np.random.default_rng(seed).choice(
            len(examples), max_examples, replace=False))
        examples = [examples[k] for k in keep]
    texts_a = [e.text_a for e in examples]
    texts_b = [e.text_b for e in examples] if task.is_pair else None
    return task.dir_name, texts_a, texts_b, max(task.num_labels, 1)


def tokenize_texts(count: int, seed: int) -> list[str]:
    """`count` texts: the segments of the --data_dir dev sets (cycled), else seeded
    random sentences of words from the SentencePiece vocabulary."""
    import numpy as np

    texts = []
    for task_dir in FLAGS.data_dir:
        _, a, b, _ = read_dev_set(task_dir, 0, seed)
        texts += a + (b or [])
    if not texts:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=FLAGS.spm_model_file)
        words = [p.lstrip("\u2581") for p in (sp.id_to_piece(k) for k in range(
            sp.get_piece_size())) if p.startswith("\u2581") and len(p) > 1]
        rng = np.random.default_rng(seed)
        for _ in range(count):
            n = int(rng.integers(5, 40))
            texts.append(" ".join(words[k] for k in rng.integers(0, len(words), n)))
    return [texts[k % len(texts)] for k in range(count)]


def random_batch(config, batch_size: int, seq_length: int, seed: int):
    """int32 ids [B, S] (never special ids), all-ones mask, zero type ids; labels [B]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch_size, seq_length)).astype(np.int32)
    labels = rng.integers(0, 2, (batch_size,)).astype(np.int32)
    return ids, np.ones_like(ids), np.zeros_like(ids), labels


class Recorder:
    """The rows one child process measures."""

    def __init__(self, implementation: str):
        self.implementation = implementation
        self.rows = []
        self.notes = []
        self.versions = {}
        self.matmul_gflops = None

    def add(self, benchmark: str, variant: str, rate: float, unit: str, *,
            flops_per_item: float | None = None, primary: bool = False, **extra) -> None:
        self.rows.append({"benchmark": benchmark, "implementation": self.implementation,
                          "variant": variant, "rate": rate, "unit": unit,
                          "flops_per_item": flops_per_item, "primary": primary, **extra})
        print(f"  {benchmark} | {variant}: {rate:.3f} {unit}", file=sys.stderr, flush=True)

    def result(self) -> dict:
        return {"implementation": self.implementation, "rows": self.rows,
                "notes": self.notes, "versions": self.versions,
                "matmul_gflops": self.matmul_gflops}


# ----------------------------------------------------------------- TensorFlow pieces
def tf_matmul_peak(size: int, repeats: int, dtype=None) -> float:
    """GFLOP/s of the best `size`^2 matmul in TensorFlow, in `dtype` (float32)."""
    import tensorflow as tf

    dtype = dtype or tf.float32
    a = tf.cast(tf.random.stateless_normal([size, size], seed=[FLAGS.seed, 1]), dtype)
    b = tf.cast(tf.random.stateless_normal([size, size], seed=[FLAGS.seed, 2]), dtype)
    matmul = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)[:1, :1]))
    seconds = _best_time(lambda: matmul(a, b).numpy(), repeats)
    return 2 * size ** 3 / seconds / 1e9


# ----------------------------------------------------------------------------- ours
def run_ours(rec: Recorder) -> None:
    import keras
    import tensorflow as tf

    from albert_tf import AlbertClassifier, AlbertConfig
    from albert_tf.modeling.encoder import AlbertEncoder

    rec.versions.update(tensorflow=tf.__version__, keras=keras.__version__)
    rec.matmul_gflops = tf_matmul_peak(FLAGS.matmul_size, FLAGS.repeats)
    config = AlbertConfig.from_json_file(FLAGS.config)
    bs, sl = FLAGS.batch_size, FLAGS.seq_length
    ids, mask, types, labels = random_batch(config, bs, sl, FLAGS.seed)
    variants = [v == "xla" for v in FLAGS.ours_variants]

    def label(xla):
        return "ours, XLA" if xla else "ours, no XLA"

    if "forward" in FLAGS.benchmarks:
        encoder = AlbertEncoder(config, seed=FLAGS.seed)
        inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                  "input_type_ids": tf.constant(types)}
        for xla in variants:
            forward = tf.function(
                lambda x: encoder(x, training=False)["sequence_output"], jit_compile=xla)
            seconds = _best_time(lambda: forward(inputs).numpy(), FLAGS.repeats, warmup=2)
            rec.add("forward", label(xla), bs / seconds, "sequences/s",
                    flops_per_item=model_flops(config, sl), primary=True)
        del encoder

    if "train" in FLAGS.benchmarks:
        for precision in FLAGS.train_precisions:
            for xla in variants:
                rate = _ours_train_rate(config, ids, mask, types, labels, xla, precision)
                rec.add(train_benchmark(precision), label(xla) + " (Trainer loop)", rate,
                        "sequences/s", flops_per_item=model_flops(config, sl, train=True),
                        primary=True)

    if "end_to_end" in FLAGS.benchmarks and FLAGS.data_dir:
        from albert_tf.text import AlbertTextTokenizer

        tokenizer = AlbertTextTokenizer(spm_model_file=FLAGS.spm_model_file,
                                        do_lower_case=True)
        for task_dir in FLAGS.data_dir:
            name, texts_a, texts_b, num_labels = read_dev_set(
                task_dir, FLAGS.e2e_max_examples, FLAGS.seed)
            model = AlbertClassifier(config, num_labels, seed=FLAGS.seed)
            for xla in variants:
                # Without XLA any length costs nothing to compile: pad to the longest.
                pipeline = LengthSortedPredictor(
                    model, tokenizer, FLAGS.max_seq_length, FLAGS.e2e_batch_size, xla=xla,
                    length_multiple=FLAGS.length_multiple if xla else 1)
                start = time.perf_counter()
                predictions = pipeline.predict(texts_a, texts_b)  # compiles every shape
                cold = time.perf_counter() - start
                seconds = _best_time(lambda: pipeline.predict(texts_a, texts_b),
                                     FLAGS.e2e_repeats, warmup=0)
                assert predictions.shape == (len(texts_a),)
                rec.add(f"end_to_end:{name}", label(xla) + ", sorted, padded per batch",
                        len(texts_a) / seconds, "sequences/s", primary=True,
                        examples=len(texts_a), first_pass_s=cold,
                        tokens=pipeline.stats["tokens"],
                        computed_tokens=pipeline.stats["computed_tokens"])
            del model

    if "tokenize" in FLAGS.benchmarks:
        from albert_tf.text import AlbertTextTokenizer
        from albert_tf.tokenization import FullTokenizer

        texts = tokenize_texts(FLAGS.tokenize_texts, FLAGS.seed)
        python = FullTokenizer(vocab_file=None, do_lower_case=True,
                               spm_model_file=FLAGS.spm_model_file)
        seconds = _best_time(lambda: [python.encode(t) for t in texts], FLAGS.repeats)
        rec.add("tokenize", "ours, Python (FullTokenizer.encode, one text at a time)",
                len(texts) / seconds, "texts/s")
        in_graph = AlbertTextTokenizer(spm_model_file=FLAGS.spm_model_file,
                                       do_lower_case=True)
        for batch in (256, len(texts)):
            chunks = [tf.constant(texts[k:k + batch]) for k in range(0, len(texts), batch)]
            seconds = _best_time(lambda: [in_graph.tokenize(c).flat_values.numpy()
                                          for c in chunks], FLAGS.repeats)
            rec.add("tokenize", f"ours, in-graph (AlbertTextTokenizer, one call per "
                    f"{batch} texts)", len(texts) / seconds, "texts/s", primary=True)


def _ours_train_rate(config, ids, mask, types, labels, xla: bool,
                     precision: str = "float32") -> float:
    """Steps of `albert_tf.training.loop.Trainer`'s own loop (steps_per_loop steps in one
    tf.function, XLA around the gradient computation) on a repeated batch, the model and
    optimizer built as the scripts' `--precision` builds them."""
    import tensorflow as tf

    from albert_tf import AlbertClassifier, losses
    from albert_tf.apps.session import make_optimizer
    from albert_tf.training import distribute
    from albert_tf.training.loop import Trainer
    from albert_tf.training.objectives import MeanObjective

    strategy = distribute.get_strategy("one_device")
    with strategy.scope(), keras_policy(precision):
        model = AlbertClassifier(config, 2, seed=FLAGS.seed)
        optimizer = make_optimizer(learning_rate=2e-5, num_train_steps=10_000,
                                   num_warmup_steps=100, optimizer="adamw",
                                   precision=precision, weight_decay_rate=0.01,
                                   clip_norm=1.0)
    objective = MeanObjective(lambda o, f: losses.classification_loss(
        o["logits"], f["label_ids"], per_example=True))
    with tempfile.TemporaryDirectory(prefix="bench_models_") as output_dir:
        trainer = Trainer(strategy=strategy, model=model, optimizer=optimizer,
                          objective=objective, output_dir=output_dir, train_steps=10 ** 6,
                          steps_per_loop=FLAGS.train_steps, enable_xla=xla)
        features = {"input_ids": ids, "input_mask": mask, "segment_ids": types,
                    "label_ids": labels}
        dataset = tf.data.Dataset.from_tensors(features).repeat()
        iterator = iter(strategy.experimental_distribute_dataset(dataset))
        loop = trainer._build_train_loop()  # what Trainer.train runs, minus checkpoints
        loop(iterator, tf.constant(1))  # traces and compiles
        steps = tf.constant(FLAGS.train_steps)
        seconds = _best_time(lambda: {k: v.numpy() for k, v in loop(iterator, steps).items()},
                             FLAGS.repeats, warmup=0)
    return FLAGS.batch_size * FLAGS.train_steps / seconds


class LengthSortedPredictor:
    """Ours, raw text -> predictions, never computing on padding beyond a batch's own
    longest sequence: in-graph tokenization (`AlbertTextTokenizer`), examples sorted by
    packed length (order does not matter for predictions: they are put back in input
    order), batches padded to their longest sequence (rounded up to
    `--length_multiple`) by `pack_inputs`, and the classifier (under XLA: one compiled
    program per rounded length). A call is one graph: no Python per batch or per
    example. Callers with more text than fits in memory call it per window of texts.

    (Tokenizing inside a tf.data `map` would cost ~0.1 s per iterator and segment, set-up
    work each time the map function is instantiated — not its 30k-piece string constant:
    a lookup table in its place cost the same; inside this tf.function it is paid once.)"""

    def __init__(self, model, tokenizer, max_seq_length: int, batch_size: int, *,
                 xla: bool, length_multiple: int = 16):
        import tensorflow as tf

        self.model, self.tokenizer = model, tokenizer
        self.max_seq_length, self.batch_size = max_seq_length, batch_size
        self.multiple = max(1, length_multiple)
        self.stats = {}
        self._predict_batch = tf.function(
            lambda inputs: model(inputs, training=False)["predictions"], jit_compile=xla)
        self._run = tf.function(self._run_graph)

    def _run_graph(self, *texts):
        import tensorflow as tf

        from albert_tf.packing import pack_inputs, packed_length

        tok, max_len, multiple = self.tokenizer, self.max_seq_length, self.multiple
        batch_size = self.batch_size
        segments = [tok.tokenize(t) for t in texts]  # [N, (T)] each
        packed = packed_length([s.row_lengths() for s in segments], max_len)  # [N]
        order = tf.argsort(packed, stable=True)
        count = tf.size(order)
        predictions = tf.zeros([count], tf.int32)
        computed = tf.constant(0, tf.int64)
        for start in tf.range(0, count, batch_size):
            index = order[start:start + batch_size]
            inputs = pack_inputs([tf.gather(s, index) for s in segments], max_len,
                                 cls_id=tok.cls_id, sep_id=tok.sep_id, pad_id=tok.pad_id)
            length = tf.shape(inputs["input_word_ids"])[1]
            target = tf.minimum((length + multiple - 1) // multiple * multiple, max_len)
            inputs = {k: tf.pad(v, [[0, 0], [0, target - length]])
                      for k, v in inputs.items()}
            batch_predictions = tf.cast(self._predict_batch(inputs), tf.int32)
            predictions = tf.tensor_scatter_nd_update(
                predictions, index[:, tf.newaxis], batch_predictions)
            computed += tf.cast(tf.size(inputs["input_mask"]), tf.int64)
        return predictions, tf.reduce_sum(packed), computed

    def predict(self, texts_a, texts_b=None):
        import tensorflow as tf

        texts = [tf.constant(texts_a)] + ([] if texts_b is None else [tf.constant(texts_b)])
        predictions, tokens, computed = self._run(*texts)
        self.stats = {"tokens": int(tokens), "computed_tokens": int(computed)}
        return predictions.numpy()


# ------------------------------------------------------------------------ keras-hub
def keras_hub_backbone(config, seed: int):
    """keras-hub's `AlbertBackbone` of `config`, random weights seeded with `seed`."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    return keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, num_groups=config.num_hidden_groups,
        num_inner_repetitions=config.inner_group_num,
        embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)


def run_keras_hub(rec: Recorder) -> None:
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig

    rec.versions.update(tensorflow=tf.__version__, keras=keras.__version__,
                        keras_hub=keras_hub.__version__)
    rec.matmul_gflops = tf_matmul_peak(FLAGS.matmul_size, FLAGS.repeats)
    config = AlbertConfig.from_json_file(FLAGS.config)
    bs, sl = FLAGS.batch_size, FLAGS.seq_length
    ids, mask, types, labels = random_batch(config, bs, sl, FLAGS.seed)
    variants = [v == "xla" for v in FLAGS.peer_variants]

    def backbone():
        return keras_hub_backbone(config, FLAGS.seed)

    def label(xla):
        return "keras-hub, XLA" if xla else "keras-hub, no XLA (its CPU default)"

    if "forward" in FLAGS.benchmarks:
        model = backbone()
        inputs = {"token_ids": tf.constant(ids), "segment_ids": tf.constant(types),
                  "padding_mask": tf.constant(mask)}
        for xla in variants:
            forward = tf.function(lambda x: model(x, training=False)["sequence_output"],
                                  jit_compile=xla)
            seconds = _best_time(lambda: forward(inputs).numpy(), FLAGS.repeats, warmup=2)
            rec.add("forward", label(xla), bs / seconds, "sequences/s",
                    flops_per_item=model_flops(config, sl))
        del model

    if "train" in FLAGS.benchmarks:
        x = {"token_ids": ids, "segment_ids": types, "padding_mask": mask}
        for precision, xla in ((p, v) for p in FLAGS.train_precisions for v in variants):
            with keras_policy(precision):  # keras-hub's way to mixed precision
                classifier = keras_hub.models.AlbertTextClassifier(
                    backbone(), num_classes=2, preprocessor=None)
            classifier.compile(
                optimizer=keras.optimizers.AdamW(2e-5, weight_decay=0.01, epsilon=1e-6,
                                                 global_clipnorm=1.0),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=None, jit_compile=xla)
            dataset = tf.data.Dataset.from_tensors((x, labels)).repeat()

            def steps():
                classifier.fit(dataset, steps_per_epoch=FLAGS.train_steps, epochs=1,
                               verbose=0)
            seconds = _best_time(steps, FLAGS.repeats)
            rec.add(train_benchmark(precision), label(xla) + " (fit)",
                    bs * FLAGS.train_steps / seconds, "sequences/s",
                    flops_per_item=model_flops(config, sl, train=True))
            del classifier

    if "end_to_end" in FLAGS.benchmarks and FLAGS.data_dir:
        for task_dir in FLAGS.data_dir:
            name, texts_a, texts_b, num_labels = read_dev_set(
                task_dir, FLAGS.e2e_max_examples, FLAGS.seed)
            x = tuple(np.array(t) for t in (texts_a, texts_b) if t is not None)
            x = x[0] if len(x) == 1 else x
            for xla in variants:
                # The backbone first: seeding (tf.random.set_seed) clears the eager
                # caches, which would drop the SentencePiece resource of a tokenizer
                # made before it.
                model = backbone()
                preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(
                    keras_hub.models.AlbertTokenizer(proto=FLAGS.spm_model_file),
                    sequence_length=FLAGS.max_seq_length)
                classifier = keras_hub.models.AlbertTextClassifier(
                    model, num_classes=num_labels, preprocessor=preprocessor)
                classifier.compile(jit_compile=xla)
                head = x[:FLAGS.e2e_batch_size] if len(x) != 2 else tuple(
                    t[:FLAGS.e2e_batch_size] for t in x)
                classifier.predict(head, batch_size=FLAGS.e2e_batch_size, verbose=0)

                def predict():
                    logits = classifier.predict(x, batch_size=FLAGS.e2e_batch_size,
                                                verbose=0)
                    return np.argmax(logits, axis=-1)
                seconds = _best_time(predict, FLAGS.e2e_repeats, warmup=0)
                rec.add(f"end_to_end:{name}", label(xla) + ", predict() with "
                        f"AlbertTextClassifierPreprocessor(sequence_length="
                        f"{FLAGS.max_seq_length})", len(texts_a) / seconds, "sequences/s",
                        examples=len(texts_a))
                del classifier

    if "tokenize" in FLAGS.benchmarks:
        tokenizer = keras_hub.models.AlbertTokenizer(proto=FLAGS.spm_model_file)
        texts = tokenize_texts(FLAGS.tokenize_texts, FLAGS.seed)
        constant = tf.constant(texts)
        seconds = _best_time(lambda: tokenizer(constant), FLAGS.repeats)
        rec.add("tokenize", "keras-hub AlbertTokenizer (in-graph, one batch)",
                len(texts) / seconds, "texts/s")


# --------------------------------------------------------------------- transformers
def transformers_config(config, **extra):
    """transformers' `AlbertConfig` of our `config` (the original's tanh GELU)."""
    from transformers import AlbertConfig as HFConfig

    return HFConfig(
        vocab_size=config.vocab_size, embedding_size=config.embedding_size,
        hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_hidden_groups=config.num_hidden_groups,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, inner_group_num=config.inner_group_num,
        hidden_act="gelu_new",  # the tanh approximation, as the original
        hidden_dropout_prob=config.hidden_dropout_prob,
        attention_probs_dropout_prob=config.attention_probs_dropout_prob,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, **extra)


def transformers_tokenizer(spm_model_file: str):
    """(tokenizer, "fast" or "Python"): transformers' ALBERT tokenizer of the
    SentencePiece model, the fast (Rust) one where it converts (a folder holding the
    model as `spiece.model`, which from_pretrained reads)."""
    from transformers import AlbertTokenizer

    folder = tempfile.mkdtemp(prefix="bench_hf_tokenizer_")
    os.symlink(os.path.abspath(spm_model_file), os.path.join(folder, "spiece.model"))
    tokenizer = AlbertTokenizer.from_pretrained(folder)
    if not getattr(tokenizer, "is_fast", False):
        try:
            from transformers import AlbertTokenizerFast

            tokenizer = AlbertTokenizerFast.from_pretrained(folder)
        except ImportError:
            pass
    return tokenizer, "fast" if getattr(tokenizer, "is_fast", False) else "Python"


def torch_matmul_peak(size: int, repeats: int, dtype=None) -> float:
    """GFLOP/s of the best `size`^2 matmul in torch, in `dtype` (float32)."""
    import torch

    generator = torch.Generator().manual_seed(FLAGS.seed)
    a, b = (torch.randn(size, size, generator=generator).to(dtype or torch.float32)
            for _ in range(2))
    return 2 * size ** 3 / _best_time(lambda: torch.mm(a, b), repeats) / 1e9


def run_transformers(rec: Recorder) -> None:
    import numpy as np
    import torch
    import transformers
    from transformers import AlbertForSequenceClassification, AlbertModel

    from albert_tf import AlbertConfig

    rec.versions.update(torch=torch.__version__, transformers=transformers.__version__)
    rec.matmul_gflops = torch_matmul_peak(FLAGS.matmul_size, FLAGS.repeats)
    rec.notes.append(f"torch threads: {torch.get_num_threads()}")
    config = AlbertConfig.from_json_file(FLAGS.config)
    bs, sl = FLAGS.batch_size, FLAGS.seq_length
    ids, mask, types, labels = random_batch(config, bs, sl, FLAGS.seed)

    def hf_config(**extra):
        return transformers_config(config, **extra)

    inputs = {"input_ids": torch.tensor(ids, dtype=torch.long),
              "attention_mask": torch.tensor(mask, dtype=torch.long),
              "token_type_ids": torch.tensor(types, dtype=torch.long)}

    if "forward" in FLAGS.benchmarks:
        torch.manual_seed(FLAGS.seed)
        model = AlbertModel(hf_config()).eval()
        with torch.inference_mode():
            seconds = _best_time(lambda: model(**inputs), FLAGS.repeats, warmup=2)
        attention = getattr(model.config, "_attn_implementation", "?")
        rec.add("forward", f"transformers (torch eager, {attention} attention)",
                bs / seconds, "sequences/s", flops_per_item=model_flops(config, sl))
        del model

    for precision in FLAGS.train_precisions if "train" in FLAGS.benchmarks else ():
        if precision == "mixed_bfloat16":
            # Without bfloat16 instructions torch's bfloat16 matmuls can be ~100x slower
            # than float32 (0.9 against 92 GFLOP/s on an AVX2 CPU): a step would take
            # most of an hour. Measured on a small matmul first; skipped, said so.
            rates = {dtype: torch_matmul_peak(512, 3, dtype)
                     for dtype in (torch.float32, torch.bfloat16)}
            if rates[torch.bfloat16] < rates[torch.float32] / 4:
                rec.notes.append(
                    f"transformers mixed_bfloat16 not measured: torch's bfloat16 matmuls "
                    f"run at {rates[torch.bfloat16]:.1f} GFLOP/s on this CPU against "
                    f"{rates[torch.float32]:.0f} in float32 (512^2)")
                continue
        torch.manual_seed(FLAGS.seed)
        model = AlbertForSequenceClassification(hf_config(num_labels=2)).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01,
                                      eps=1e-6)
        target = torch.tensor(labels, dtype=torch.long)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16,
                                  enabled=precision == "mixed_bfloat16")

        def steps():
            for _ in range(FLAGS.train_steps):
                with autocast:  # torch's mixed precision: bfloat16 matmuls
                    loss = model(**inputs, labels=target).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        seconds = _best_time(steps, FLAGS.repeats)
        rec.add(train_benchmark(precision), "transformers (torch eager, AdamW" + (
            ", autocast bfloat16)" if precision == "mixed_bfloat16" else ")"),
                bs * FLAGS.train_steps / seconds, "sequences/s",
                flops_per_item=model_flops(config, sl, train=True))

    tokenizer = None
    if ("end_to_end" in FLAGS.benchmarks and FLAGS.data_dir) or \
            "tokenize" in FLAGS.benchmarks:
        tokenizer, kind = transformers_tokenizer(FLAGS.spm_model_file)

    if "end_to_end" in FLAGS.benchmarks and FLAGS.data_dir:
        for task_dir in FLAGS.data_dir:
            name, texts_a, texts_b, num_labels = read_dev_set(
                task_dir, FLAGS.e2e_max_examples, FLAGS.seed)
            torch.manual_seed(FLAGS.seed)
            model = AlbertForSequenceClassification(
                hf_config(num_labels=num_labels)).eval()
            for padding in ("max_length", "longest"):
                def predict():
                    predictions = []
                    for start in range(0, len(texts_a), FLAGS.e2e_batch_size):
                        stop = start + FLAGS.e2e_batch_size
                        pair = () if texts_b is None else (texts_b[start:stop],)
                        encoded = tokenizer(texts_a[start:stop], *pair, padding=padding,
                                            truncation=True,
                                            max_length=FLAGS.max_seq_length,
                                            return_tensors="pt")
                        with torch.inference_mode():
                            logits = model(**encoded).logits
                        predictions.append(logits.argmax(-1).numpy())
                    return np.concatenate(predictions)
                seconds = _best_time(predict, FLAGS.e2e_repeats, warmup=0)
                what = ("(its standard pipeline)" if padding == "max_length" else
                        "(not its standard pipeline: padded per batch, unsorted)")
                rec.add(f"end_to_end:{name}", f"transformers, {kind} tokenizer + "
                        f"AlbertForSequenceClassification, padding=\"{padding}\" {what}",
                        len(texts_a) / seconds, "sequences/s", examples=len(texts_a),
                        standard=padding == "max_length")
            del model

    if "tokenize" in FLAGS.benchmarks:
        texts = tokenize_texts(FLAGS.tokenize_texts, FLAGS.seed)
        seconds = _best_time(lambda: tokenizer(texts)["input_ids"], FLAGS.repeats)
        rec.add("tokenize", f"transformers AlbertTokenizer ({kind}, one batch call)",
                len(texts) / seconds, "texts/s")


# --------------------------------------------------------------- create_pretraining_data
def create_pretraining_data_rows() -> list[dict]:
    rows = [{"benchmark": "create_pretraining_data", "implementation": key,
             "variant": value["variant"], "rate": value["instances_per_s"],
             "unit": "instances/s", "peak_memory_mb": value["peak_memory_mb"],
             "primary": key == "ours", "flops_per_item": None}
            for key, value in CPD_QUOTED.items()]
    if not FLAGS.cpd_input_file:
        return rows
    command = [sys.executable, os.path.join(REPOSITORY, "benchmarks",
                                            "bench_create_pretraining_data.py"),
               "--child", "--num_workers=2", f"--input_file={FLAGS.cpd_input_file}",
               f"--spm_model_file={FLAGS.spm_model_file}",
               f"--max_seq_length={FLAGS.max_seq_length}",
               f"--dupe_factor={FLAGS.cpd_dupe_factor}"]
    best = None
    for _ in range(FLAGS.rounds):
        with tempfile.TemporaryDirectory(prefix="bench_cpd_") as output_dir:
            done = children.run(command + [f"--output_dir={output_dir}"],
                                  capture_output=True, text=True, cwd=REPOSITORY)
        lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        if done.returncode or not lines:
            sys.exit(f"create_pretraining_data run failed:\n{done.stderr[-3000:]}")
        result = json.loads(lines[-1][len("RESULT "):])
        if best is None or result["instances_per_s"] > best["instances_per_s"]:
            best = result
    for row in rows:
        row["primary"] = False
    rows.insert(0, {"benchmark": "create_pretraining_data", "implementation": "ours",
                    "variant": f"ours, 2 workers, measured now ({best['input_mb']:.1f} MiB, "
                    f"dupe_factor={FLAGS.cpd_dupe_factor})",
                    "rate": best["instances_per_s"], "unit": "instances/s",
                    "peak_memory_mb": best["peak_memory_mb"], "primary": True,
                    "flops_per_item": None})
    return rows


# --------------------------------------------------------------------------- the parent
CHILDREN = {"ours": run_ours, "keras_hub": run_keras_hub,
            "transformers": run_transformers}
IMPORTS = {"ours": "albert_tf", "keras_hub": "keras_hub", "transformers": "transformers"}


def run_child(name: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    rec = Recorder(name)
    try:
        __import__(IMPORTS[name])
        if name == "transformers":
            import torch  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure skips the peer
        print("SKIP " + json.dumps(f"{name} is not importable here "
                                   f"({type(e).__name__}: {e})"))
        return
    CHILDREN[name](rec)
    print("RESULT " + json.dumps(rec.result()))


def _cpu_busy(interval: float = 2.0) -> float:
    """The fraction of the machine's CPU time spent busy over `interval` seconds."""
    def read():
        with open("/proc/stat") as f:
            values = [int(x) for x in f.readline().split()[1:]]
        return sum(values), values[3] + values[4]  # total, idle + iowait
    try:
        total0, idle0 = read()
        time.sleep(interval)
        total1, idle1 = read()
    except (OSError, ValueError, IndexError):
        return 0.0
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def wait_for_idle(limit: float) -> float:
    """Waits up to `limit` seconds for a 2-second window with < 10% CPU busy; returns
    the busy fraction of the last window."""
    start, busy = time.monotonic(), 0.0
    while time.monotonic() - start < limit:
        busy = _cpu_busy()
        if busy < 0.1:
            break
    return busy


def _load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _passthrough_flags() -> list[str]:
    names = ("config", "spm_model_file", "batch_size", "seq_length", "data_dir",
             "max_seq_length", "e2e_batch_size", "e2e_max_examples", "length_multiple",
             "benchmarks", "ours_variants", "peer_variants", "repeats", "e2e_repeats",
             "train_steps", "train_precisions", "matmul_size", "tokenize_texts", "seed")
    args = []
    for name in names:
        value = getattr(FLAGS, name)
        if isinstance(value, list):
            value = ",".join(value)
        args.append(f"--{name}={value}")
    return args


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def format_table(rows: list[dict], peak_gflops: float) -> list[str]:
    """One Markdown table: every row with its rate, ours / it, GFLOP/s and % of peak."""
    order = {b: k for k, b in enumerate(
        ("forward", "train", "end_to_end", "create_pretraining_data", "tokenize"))}
    rows = sorted(rows, key=lambda r: (order.get(r["benchmark"].split(":")[0], 9),
                                       r["benchmark"], not r["primary"], -r["rate"]))
    best_ours = {}
    for r in rows:
        if r["primary"]:
            best_ours[r["benchmark"]] = max(best_ours.get(r["benchmark"], 0.0), r["rate"])
    lines = ["| benchmark | implementation | rate | unit | ours (best) / this | GFLOP/s "
             "| % of fp32 matmul peak | notes |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = best_ours.get(r["benchmark"])
        ratio = f"{ours / r['rate']:.2f}x" if ours and r["rate"] else ""
        gflops = percent = ""
        if r.get("flops_per_item"):
            achieved = r["flops_per_item"] * r["rate"] / 1e9
            gflops = f"{achieved:.0f}"
            percent = f"{100 * achieved / peak_gflops:.0f}%" if peak_gflops else ""
        notes = []
        if r.get("peak_memory_mb"):
            notes.append(f"peak memory {r['peak_memory_mb']:.0f} MB")
        if r.get("examples"):
            notes.append(f"{r['examples']} examples")
        if r.get("computed_tokens"):
            notes.append(f"{r['computed_tokens'] / r['examples']:.1f} positions/sequence "
                         f"computed for {r['tokens'] / r['examples']:.1f} tokens")
        if r.get("first_pass_s"):
            notes.append(f"first pass (compiling) {r['first_pass_s']:.1f} s")
        name = f"**{r['variant']}**" if r["primary"] and r["rate"] == ours else r["variant"]
        lines.append(f"| {r['benchmark']} | {name} | {_fmt(r['rate'])} | {r['unit']} | "
                     f"{ratio} | {gflops} | {percent} | {'; '.join(notes)} |")
    return lines


def main(argv):
    del argv
    unknown = set(FLAGS.benchmarks) - set(BENCHMARKS)
    if unknown:
        raise app.UsageError(f"unknown --benchmarks {sorted(unknown)}; choose from "
                             f"{', '.join(BENCHMARKS)}")
    unknown = set(FLAGS.train_precisions) - set(TRAIN_PRECISIONS)
    if unknown:
        raise app.UsageError(f"unknown --train_precisions {sorted(unknown)}; choose from "
                             f"{', '.join(TRAIN_PRECISIONS)}")
    with open(FLAGS.config) as f:
        max_positions = json.load(f).get("max_position_embeddings", 512)
    if max(FLAGS.max_seq_length, FLAGS.seq_length) > max_positions:
        raise app.UsageError(f"--max_seq_length / --seq_length exceed the config's "
                             f"max_position_embeddings ({max_positions})")
    if FLAGS.child:
        run_child(FLAGS.child)
        return
    implementations = ["ours"] + [p for p in FLAGS.peers if p]
    for name in implementations:
        if name not in CHILDREN:
            raise app.UsageError(f"unknown peer {name!r}; choose from "
                                 f"{', '.join(IMPLEMENTATIONS[1:])}")
    model_benchmarks = set(FLAGS.benchmarks) - {"create_pretraining_data"}
    loads = []
    results, skipped = {}, {}
    started = time.time()
    for round_index in range(FLAGS.rounds if model_benchmarks else 0):
        for name in implementations:
            if name in skipped:
                continue
            busy = wait_for_idle(FLAGS.wait_idle) if FLAGS.wait_idle else None
            loads.append(_load_average() + ("" if busy is None else f" ({busy:.0%} busy)"))
            print(f"round {round_index + 1}/{FLAGS.rounds}: {name} (load average "
                  f"{loads[-1]})", file=sys.stderr, flush=True)
            command = [sys.executable, os.path.abspath(__file__), f"--child={name}"] + \
                _passthrough_flags()
            done = children.run(command, stdout=subprocess.PIPE, stderr=None, text=True,
                                  cwd=REPOSITORY, timeout=FLAGS.child_timeout)
            skip = [x for x in done.stdout.splitlines() if x.startswith("SKIP ")]
            if skip:
                skipped[name] = json.loads(skip[-1][len("SKIP "):])
                continue
            lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
            if done.returncode or not lines:
                sys.exit(f"{name} failed (exit status {done.returncode})")
            results.setdefault(name, []).append(json.loads(lines[-1][len("RESULT "):]))

    # The best of every round for each (benchmark, variant).
    best, versions, peaks, notes = {}, {}, [], []
    for name, runs in results.items():
        for run in runs:
            versions.update(run["versions"])
            notes += [n for n in run["notes"] if n not in notes]
            if run["matmul_gflops"]:
                peaks.append((run["matmul_gflops"], name))
            for row in run["rows"]:
                key = (row["benchmark"], row["variant"])
                if key not in best or row["rate"] > best[key]["rate"]:
                    best[key] = row
    rows = list(best.values())
    if "create_pretraining_data" in FLAGS.benchmarks:
        rows += create_pretraining_data_rows()
    peak = max(peaks)[0] if peaks else 0.0

    print(f"Machine: {_cpu_model()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; " + ", ".join(
              f"{k} {v}" for k, v in sorted(versions.items())))
    by_source = {}
    for gflops, name in peaks:
        by_source[name] = max(by_source.get(name, 0.0), gflops)
    print(f"fp32 matmul peak: {peak:.0f} GFLOP/s (best {FLAGS.matmul_size}^2 matmul; "
          + ", ".join(f"{'torch' if n == 'transformers' else 'TensorFlow'} in the {n} "
                      f"processes {g:.0f}" for n, g in by_source.items()) + ")"
          if peaks else "fp32 matmul peak: not measured")
    print(f"Config: {os.path.relpath(FLAGS.config, REPOSITORY)}, float32, random weights "
          f"(seed {FLAGS.seed}); forward/train batch {FLAGS.batch_size} x "
          f"{FLAGS.seq_length}; end to end: max_seq_length {FLAGS.max_seq_length}, batch "
          f"{FLAGS.e2e_batch_size}; best of {FLAGS.rounds} rounds x {FLAGS.repeats} "
          f"repeats; load average (1, 5, 15 min) at each round: {' | '.join(loads)}; "
          f"{time.time() - started:.0f} s")
    for name, why in skipped.items():
        print(f"Skipped: {why}")
    for note in notes:
        print(f"Note: {note}")
    print()
    for line in format_table(rows, peak):
        print(line)
    if FLAGS.json_output:
        with open(FLAGS.json_output, "w") as f:
            json.dump({"rows": rows, "peak_gflops": peak, "versions": versions,
                       "loads": loads, "skipped": skipped}, f, indent=1)


if __name__ == "__main__":
    app.run(main)
