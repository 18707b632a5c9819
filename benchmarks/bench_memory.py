"""Peak memory of one training step, with and without recomputation, beside the peers.

Each row is one fresh process: one implementation training a sequence classifier (the
pooled output and a 2-label head, AdamW, as run_classifier.py fine-tunes) of one ALBERT
size (`albert_tf/configs/albert_<size>_v2.json`) on a random batch of `batch` x `seq`
tokens, all real. The process runs one step (tracing, compiling and the optimizer's
slots), then measures the next one:

- step memory: what the step allocates above what was allocated just before it, i.e.
  above the weights and the optimizer's slots, which exist before it: the activations
  kept for the backward pass, the gradients and the work buffers. Measured
  - for TensorFlow (ours, keras-hub) by TensorFlow's own allocator statistics
    (`tf.config.experimental.get_memory_info("CPU:0")`: peak, reset before the step,
    less current before it). The RSS cannot tell: TensorFlow's CPU allocator (oneDNN's,
    a best-fit pool) keeps what a step freed for the next one, so the RSS after the
    warm-up step already holds the step's peak;
  - for torch (transformers) by the process's peak RSS during the step less its RSS just
    before it (the Linux high-water mark, reset through /proc/self/clear_refs), with
    glibc's `MALLOC_MMAP_THRESHOLD_` fixed at 128 KiB so that a freed tensor leaves the
    RSS at once whatever its size (by default glibc raises the threshold as buffers are
    freed and keeps them, which would hide the peak);
- step time: the wall time of that step (the best of `--time_steps`). With
  `--paired_rounds`, also ours with and without recompute in one process, steps
  alternating, at each (size, seq)'s largest batch: the ratio of --recompute's step
  that a change of the machine's load between fresh processes cannot skew.

From the two largest batches of a (size, seq): memory per sequence = the difference of
their step memory over the difference of their batches, and what stays (gradients,
work buffers) = the larger's less that many sequences (two batches, not batch 1 and 4
by default where it matters: at small batches the step's peak can come from what does
not grow with the batch). From them the largest batch that fits in 16, 24, 40 and 80 GB:
(capacity - weights - AdamW/LAMB slots (2 per weight) - what stays) / per sequence,
float32. Measured on CPU: an accelerator adds its runtime's own overhead (a CUDA
context, allocator fragmentation), so read those batches as upper bounds.

Implementations (`--implementations`):
  ours                       albert_tf's Trainer, as the scripts train
  ours_recompute             the same with --recompute (each layer recomputed)
  ours_lora                  the same with LoRA adapters (--lora_rank, on the shared
                             query and value, with --lora_ffn the FFN too, as on the
                             scripts): the
                             encoder frozen, the adapters and the head trained
  keras_hub                  keras-hub's AlbertTextClassifier (TensorFlow backend)
  keras_hub_remat            the same built inside keras.RematScope(mode="full")
  transformers               AlbertForSequenceClassification, torch eager
  transformers_checkpointing the same after gradient_checkpointing_enable()
Peers are optional extras (benchmarks/requirements-peers.txt); one that does not import
is skipped with a note. A child the system kills (out of memory) is reported as such.

    .venv-bench/bin/python benchmarks/bench_memory.py --sizes=base,large,xlarge,xxlarge
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from absl import app, flags

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPOSITORY not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, REPOSITORY)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Its flags are this script's too: --seed, --json_output, --child.
import bench_models as bm  # noqa: E402
import children  # noqa: E402

IMPLEMENTATIONS = ("ours", "ours_recompute", "ours_lora", "keras_hub", "keras_hub_remat",
                   "transformers", "transformers_checkpointing")
SIZES = ("base", "large", "xlarge", "xxlarge")
CAPACITIES_GB = (16, 24, 40, 80)
# For the rows measured by the RSS (torch's), glibc's mmap threshold fixed, so that every
# buffer of 128 KiB or more is returned to the system when freed (and no dynamic
# threshold keeps freed buffers in the heap).
RSS_ENVIRONMENT = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}

flags.DEFINE_list("sizes", list(SIZES), "ALBERT sizes (albert_<size>_v2.json), or "
                  "config files (the tests' tiny model).")
flags.DEFINE_list("seq_lengths", ["128", "512"], "Sequence lengths.")
flags.DEFINE_list("batch_sizes", ["1", "4"], "Batch sizes; the per-sequence figures need "
                  "two of them (the two largest are used).")
flags.DEFINE_list("implementations", list(IMPLEMENTATIONS), "What to measure.")
flags.DEFINE_integer("timeout", 3600, "Seconds a row may take.")
flags.DEFINE_integer("lora_rank", 8, "The adapters' rank of the ours_lora rows.")
flags.DEFINE_bool("lora_ffn", False, "The ours_lora rows' adapters on the FFN's denses "
                  "too (as --lora_ffn on the scripts).")
flags.DEFINE_bool("timed", True, "Warm up with one step and measure the next (memory and "
                  "time); --notimed: measure the first step's memory alone (half the "
                  "time, for the large batches that give the memory per sequence).")
flags.DEFINE_integer("time_steps", 3, "With --timed, the step time is the best of this "
                     "many steps after the warm-up (the first of them measures the "
                     "memory): one step's time on 2 shared cores varies by up to ~10%.")
flags.DEFINE_integer("paired_rounds", 0, "Also time ours and ours_recompute in one "
                     "process at each (size, seq)'s largest batch, this many pairs of steps in "
                     "alternating order: the step-time ratio of --recompute that the "
                     "machine's load drifting between fresh processes cannot skew.")
flags.DEFINE_list("tables_from", [], "Measure nothing: print the tables of the rows of "
                  "these --json_output files (runs of several invocations together).")
FLAGS = flags.FLAGS


# ------------------------------------------------------------------- measurement
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _settle() -> None:
    """Frees what can be freed and resets the RSS high-water mark."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def measure(step, tensorflow: bool, warm_up: bool = True, time_steps: int = 1) -> dict:
    """Runs `step` once to warm up, then once measured: its memory above what was
    allocated before it (TensorFlow's allocator statistics when `tensorflow`, else the
    RSS high-water mark) and its seconds, the best of that step and `time_steps` - 1
    more. Without `warm_up` the first step is measured: its memory alone means something
    (the time includes tracing; torch's optimizer makes its slots in it, which does not
    change the memory per sequence)."""
    if warm_up:
        step()
    if tensorflow:
        import tensorflow as tf

        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    _settle()
    rss_before = _status_kib("VmRSS") * 1024
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    if tensorflow:
        peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    else:
        peak = _status_kib("VmHWM") * 1024 - rss_before
    if warm_up and time_steps > 1:  # (the measured step was the warm-up)
        seconds = min(seconds, bm._best_time(step, time_steps - 1, warmup=0))
    return {"step_mb": peak / 2**20, "step_s": seconds if warm_up else None,
            "time_steps": time_steps if warm_up else 0,
            "measured_by": "TF allocator" if tensorflow else "RSS"}


def _config(spec: dict):
    from albert_tf import AlbertConfig

    return AlbertConfig.from_name_or_file(spec["config"])


def _batch(config, spec: dict):
    return bm.random_batch(config, spec["batch"], spec["seq"], spec["seed"])


def _ours_trainers(spec: dict, recomputes, lora_rank: int | None = None,
                   lora_ffn: bool = False):
    """([the train loop of each of `recomputes` (None or a unit)], the iterator they
    read, the model, the optimizer): one classifier and optimizer, as run_classifier.py
    builds them (LoRA adapters of `lora_rank` put on after the model, in the strategy's
    scope, as --lora_rank does), trained by a Trainer per recompute setting."""
    import atexit
    import shutil
    import tempfile

    import tensorflow as tf

    from albert_tf import AlbertClassifier, losses
    from albert_tf.apps.session import make_optimizer
    from albert_tf.training import distribute
    from albert_tf.training.loop import Trainer
    from albert_tf.training.objectives import MeanObjective

    config = _config(spec)
    ids, mask, types, labels = _batch(config, spec)
    strategy = distribute.get_strategy("one_device")
    with strategy.scope():
        model = AlbertClassifier(config, 2, seed=spec["seed"])
        if lora_rank:
            model.enable_lora(lora_rank, ffn=lora_ffn)
        optimizer = make_optimizer(learning_rate=2e-5, num_train_steps=10_000,
                                   num_warmup_steps=100, optimizer="adamw")
    objective = MeanObjective(lambda o, f: losses.classification_loss(
        o["logits"], f["label_ids"], per_example=True))
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": types,
                "label_ids": labels}
    dataset = tf.data.Dataset.from_tensors(features).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    output_dir = tempfile.mkdtemp(prefix="bench_memory_")  # (nothing is saved there)
    atexit.register(shutil.rmtree, output_dir, ignore_errors=True)
    loops = []
    for recompute in recomputes:
        trainer = Trainer(strategy=strategy, model=model, optimizer=optimizer,
                          objective=objective, output_dir=output_dir,
                          train_steps=10 ** 6, steps_per_loop=1, recompute=recompute)
        loops.append(trainer._build_train_loop())  # what Trainer.train runs
    return loops, iterator, model, optimizer


def _count(variables) -> int:
    return int(sum(v.shape.num_elements() for v in variables))


def _one_step(loop, iterator):
    import tensorflow as tf

    one = tf.constant(1)  # (made once, outside the timed steps)
    return lambda: float(loop(iterator, one)["loss"])


def run_ours(spec: dict) -> dict:
    """The row's measures, and what the model trains: its trainable weights
    (`parameters`), all of its weights, and the optimizer's state after the step (the
    slots of what it trains: AdamW's m and v)."""
    import tensorflow as tf

    recompute = "layer" if spec["implementation"] == "ours_recompute" else None
    lora_rank = spec.get("lora_rank") if spec["implementation"] == "ours_lora" else None
    [loop], iterator, model, optimizer = _ours_trainers(spec, [recompute], lora_rank,
                                                        spec.get("lora_ffn", False))
    row = measure(_one_step(loop, iterator), tensorflow=True,
                  warm_up=spec.get("timed", True), time_steps=spec.get("time_steps", 1))
    row["parameters"] = _count(model.trainable_variables)
    row["all_parameters"] = _count(model.weights)
    row["optimizer_mb"] = sum(v.shape.num_elements() * tf.as_dtype(v.dtype).size
                              for v in optimizer.variables) / 2**20
    return row


def run_ours_paired(spec: dict) -> dict:
    """The step time of ours without and with recompute in one process: after a warm-up
    step each, `rounds` pairs of steps, alternating which goes first (ABBA), so that a
    change of the machine's load during the run weighs on both alike. The ratio is the
    median of the pairs' ratios."""
    import statistics

    loops, iterator, _, _ = _ours_trainers(spec, [None, "layer"])
    steps = [_one_step(loop, iterator) for loop in loops]
    for step in steps:
        step()
    seconds = [[], []]
    for pair in range(spec["rounds"]):
        for which in ((0, 1) if pair % 2 == 0 else (1, 0)):
            start = time.perf_counter()
            steps[which]()
            seconds[which].append(time.perf_counter() - start)
    return {"kept_s": statistics.median(seconds[0]),
            "recompute_s": statistics.median(seconds[1]),
            "ratio": statistics.median(r / k for k, r in zip(*seconds))}


def run_keras_hub(spec: dict) -> dict:
    import contextlib

    import keras
    import keras_hub
    import tensorflow as tf

    config = _config(spec)
    ids, mask, types, labels = _batch(config, spec)
    remat = spec["implementation"] == "keras_hub_remat"
    with keras.RematScope(mode="full") if remat else contextlib.nullcontext():
        backbone = bm.keras_hub_backbone(config, spec["seed"])
        classifier = keras_hub.models.AlbertTextClassifier(backbone, num_classes=2,
                                                          preprocessor=None)
    optimizer = keras.optimizers.AdamW(2e-5, weight_decay=0.01, epsilon=1e-6,
                                       global_clipnorm=1.0)
    optimizer.build(classifier.trainable_variables)
    inputs = {"token_ids": tf.constant(ids), "padding_mask": tf.constant(mask),
              "segment_ids": tf.constant(types)}
    target = tf.constant(labels)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(target, classifier(inputs, training=True))
        grads = tape.gradient(loss, classifier.trainable_variables)
        optimizer.apply(grads, classifier.trainable_variables)
        return loss

    row = measure(lambda: float(step()), tensorflow=True, warm_up=spec.get("timed", True),
                  time_steps=spec.get("time_steps", 1))
    row["parameters"] = int(sum(v.shape.num_elements()
                                for v in classifier.trainable_variables))
    return row


def run_transformers(spec: dict) -> dict:
    import functools

    import torch
    import transformers
    from transformers import AlbertForSequenceClassification

    config = _config(spec)
    ids, mask, types, labels = _batch(config, spec)
    torch.manual_seed(spec["seed"])
    model = AlbertForSequenceClassification(bm.transformers_config(config, num_labels=2))
    note = None
    if spec["implementation"] == "transformers_checkpointing":
        try:
            model.gradient_checkpointing_enable()
        except ValueError as e:  # transformers' ALBERT has none: each layer by hand
            note = (f"transformers {transformers.__version__}: {e} "
                    "(gradient_checkpointing_enable() raises); here each AlbertLayer "
                    "runs inside torch.utils.checkpoint (use_reentrant=False), by hand")
            for group in model.albert.encoder.albert_layer_groups:
                for layer in group.albert_layers:
                    layer.forward = functools.partial(_checkpointed, layer.forward)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, eps=1e-6)
    inputs = {"input_ids": torch.from_numpy(ids).long(),
              "attention_mask": torch.from_numpy(mask).long(),
              "token_type_ids": torch.from_numpy(types).long(),
              "labels": torch.from_numpy(labels).long()}

    # The optimizer's slots before the measured step, as ours and keras-hub have them
    # (torch makes them in its first step): one update from zero gradients.
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

    def step():
        loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    row = measure(step, tensorflow=False, warm_up=spec.get("timed", True),
                  time_steps=spec.get("time_steps", 1))
    row["parameters"] = int(sum(p.numel() for p in model.parameters()))
    row["attention"] = model.config._attn_implementation
    if note:
        row["note"] = note
    return row


def _checkpointed(forward, *args, **kwargs):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


CHILDREN = {"ours": run_ours, "ours_recompute": run_ours, "ours_lora": run_ours,
            "ours_paired": run_ours_paired,
            "keras_hub": run_keras_hub,
            "keras_hub_remat": run_keras_hub, "transformers": run_transformers,
            "transformers_checkpointing": run_transformers}
IMPORTS = {"ours": "albert_tf", "ours_recompute": "albert_tf", "ours_lora": "albert_tf",
           "ours_paired": "albert_tf",
           "keras_hub": "keras_hub",
           "keras_hub_remat": "keras_hub", "transformers": "transformers",
           "transformers_checkpointing": "transformers"}


def run_child(spec: dict) -> None:
    module = IMPORTS[spec["implementation"]]
    try:
        __import__(module)
        if module == "transformers":
            import torch  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure skips the peer
        print("SKIP " + json.dumps(f"{module} is not importable here "
                                   f"({type(e).__name__}: {e})"))
        return
    row = CHILDREN[spec["implementation"]](spec)
    print("RESULT " + json.dumps({**spec, **row}))


# ------------------------------------------------------------------------ tables
def per_sequence(rows: list[dict]) -> dict:
    """{(config, seq, implementation): {"per_sequence_mb", "fixed_mb", ...}} from the
    two largest batches measured of each (at small batches the peak may come from what
    does not grow with the batch: the weights' gradients)."""
    groups = {}
    for row in rows:  # (a batch measured twice, in two runs: the later row)
        if "step_mb" in row:
            key = (row["name"], row["seq"], row["implementation"])
            groups.setdefault(key, {})[row["batch"]] = row
    result = {}
    for key, by_batch in groups.items():
        if len(by_batch) < 2:
            continue
        small, large = (by_batch[b] for b in sorted(by_batch)[-2:])
        slope = (large["step_mb"] - small["step_mb"]) / (large["batch"] - small["batch"])
        result[key] = {"per_sequence_mb": slope,
                       "fixed_mb": small["step_mb"] - slope * small["batch"],
                       "parameters": small["parameters"],
                       "all_parameters": small.get("all_parameters", small["parameters"]),
                       "step_s": best_times(key, rows)}
    return result


def best_times(key, rows) -> dict[int, float]:
    """{batch: the best timed step} of (config, seq, implementation) `key`."""
    times = {}
    for r in rows:
        if (r["name"], r["seq"], r["implementation"]) == key and r.get("step_s"):
            times[r["batch"]] = min(r["step_s"], times.get(r["batch"], float("inf")))
    return times


def time_ratios(rows: list[dict], key, ours_key) -> str:
    """`key`'s step time over `ours_key`'s within each run that timed both (a run: one
    invocation, the `run` of its rows: the file they were read from), at the largest
    batch any run timed both at, in the order of the runs; times of different runs are
    never compared (the machine's load changes between them)."""
    runs = {}
    for r in rows:
        runs.setdefault(r.get("run"), []).append(r)
    timed = [(best_times(key, run), best_times(ours_key, run)) for run in runs.values()]
    batches = [b for times, ours in timed for b in set(times) & set(ours)]
    if not batches:
        return ""
    batch = max(batches)
    ratios = [times[batch] / ours[batch] for times, ours in timed
              if batch in times and batch in ours]
    return ", ".join(f"{ratio:.2f}x" for ratio in ratios) + f" (batch {batch})"


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def state_mb(parameters: int, trained: int | None = None) -> float:
    """float32 weights and two optimizer slots (AdamW's or LAMB's m and v) per weight
    trained (all of them, unless `trained` says fewer: LoRA's)."""
    return (parameters * 4 + (parameters if trained is None else trained) * 8) / 2**20


def largest_batch(capacity_gb: float, parameters: int, fixed_mb: float,
                  per_sequence_mb: float, trained: int | None = None) -> int:
    """The largest batch whose step fits in `capacity_gb` beside the weights and the
    optimizer's slots (`state_mb`)."""
    free = capacity_gb * 1024 - state_mb(parameters, trained) - fixed_mb
    return max(0, int(free // per_sequence_mb)) if per_sequence_mb > 0 else 0


def format_tables(rows: list[dict], notes: list[str]) -> list[str]:
    paired = [r for r in rows if r["implementation"] == "ours_paired"]
    rows = [r for r in rows if r["implementation"] != "ours_paired"]
    lines = ["| model | seq | batch | implementation | step memory MB | measured by | "
             "step s | weights trained | optimizer state MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "step_mb" in r:
            state = f"{r['optimizer_mb']:,.1f}" if "optimizer_mb" in r else "-"
            lines.append(f"| {r['name']} | {r['seq']} | {r['batch']} | "
                         f"{r['implementation']} | {r['step_mb']:,.0f} | "
                         f"{r['measured_by']} | {_seconds(r['step_s'])} | "
                         f"{r.get('parameters', 0):,} | {state} |")
        else:
            lines.append(f"| {r['name']} | {r['seq']} | {r['batch']} | "
                         f"{r['implementation']} | {r['error']} | | | | |")
    slopes = per_sequence(rows)
    lines += ["", "| model | seq | implementation | MB per sequence | MB at any batch | "
              "step time vs ours (each run's, at the largest batch timed in both) |",
              "|---|---|---|---|---|---|"]
    for (name, seq, implementation), s in slopes.items():
        ratio = time_ratios(rows, (name, seq, implementation), (name, seq, "ours"))
        lines.append(f"| {name} | {seq} | {implementation} | {s['per_sequence_mb']:,.1f} | "
                     f"{s['fixed_mb']:,.0f} | {ratio} |")
    if paired:
        lines += ["", "| model | seq | batch | step s | step s with --recompute | "
                  "ratio (median of the pairs in one process) |", "|---|---|---|---|---|---|"]
        for r in paired:
            lines.append(
                f"| {r['name']} | {r['seq']} | {r['batch']} | " + (
                    f"{r['kept_s']:.2f} | {r['recompute_s']:.2f} | {r['ratio']:.2f}x "
                    f"({r['rounds']} pairs) |" if "ratio" in r else f"{r['error']} | | |"))
    header = " | ".join(f"{gb} GB" for gb in CAPACITIES_GB)
    lines += ["", f"| model | seq | implementation | weights + AdamW/LAMB slots MB | {header} |",
              "|---|---|---|---|" + "---|" * len(CAPACITIES_GB)]
    for (name, seq, implementation), s in slopes.items():
        if not implementation.startswith("ours"):
            continue
        if s["per_sequence_mb"] <= 0:  # the two batches' peaks did not grow with them
            fits = " | ".join("-" for _ in CAPACITIES_GB)
        else:
            fits = " | ".join(str(largest_batch(gb, s["all_parameters"], s["fixed_mb"],
                                                s["per_sequence_mb"], s["parameters"]))
                              for gb in CAPACITIES_GB)
        lines.append(f"| {name} | {seq} | {implementation} | "
                     f"{state_mb(s['all_parameters'], s['parameters']):,.0f} | {fits} |")
    return lines + [f"- {note}" for note in notes]


# ------------------------------------------------------------------------ parent
def _rows_to_run() -> list[dict]:
    configs = [(size, f"albert_{size}_v2") if size in SIZES else
               (os.path.basename(size), size) for size in FLAGS.sizes]
    rows = [{"name": name, "config": config, "seq": int(seq), "batch": int(batch),
             "implementation": implementation, "seed": FLAGS.seed, "timed": FLAGS.timed,
             "time_steps": FLAGS.time_steps}
            for name, config in configs for seq in FLAGS.seq_lengths
            for implementation in FLAGS.implementations for batch in FLAGS.batch_sizes]
    for row in rows:
        if row["implementation"] == "ours_lora":
            row["lora_rank"], row["lora_ffn"] = FLAGS.lora_rank, FLAGS.lora_ffn
    if FLAGS.paired_rounds:
        batch = max(int(b) for b in FLAGS.batch_sizes)
        rows += [{"name": name, "config": config, "seq": int(seq), "batch": batch,
                  "implementation": "ours_paired", "seed": FLAGS.seed,
                  "rounds": FLAGS.paired_rounds}
                 for name, config in configs for seq in FLAGS.seq_lengths]
    return rows


def run_row(spec: dict) -> tuple[dict | None, str | None]:
    """(row, None), or (None, a note) when the peer is skipped."""
    command = [sys.executable, os.path.abspath(__file__), "--child=" + json.dumps(spec)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if env.get("KERAS_BACKEND", "tensorflow") != "tensorflow":  # (keras-hub's rows)
        env["KERAS_BACKEND"] = "tensorflow"
    if spec["implementation"].startswith("transformers"):
        env.update(RSS_ENVIRONMENT)
    try:
        result = children.run(command, capture_output=True, text=True,
                               timeout=FLAGS.timeout, cwd=REPOSITORY, env=env)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"no result in {FLAGS.timeout} s"}, None
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):]), None
        if line.startswith("SKIP "):
            return None, json.loads(line[len("SKIP "):])
    if result.returncode in (-9, 137):
        return {**spec, "error": "killed by the system (out of memory)"}, None
    lines = result.stderr.strip().splitlines() or ["?"]
    errors = [line for line in lines if re.match(r"\s*\w+(Error|Exception): ", line)]
    last = re.sub(r"\x1b\[[0-9;]*m", "", (errors or lines)[-1]).strip()
    return {**spec, "error": f"failed ({result.returncode}): {last[:300]}"}, None


def main(argv):
    del argv
    # TensorFlow's allocator statistics, which measure its rows, exist only with
    # oneDNN's CPU allocator, on by default only on some CPUs (AVX-512 ones): on in every
    # child this run starts.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    if FLAGS.child:
        run_child(json.loads(FLAGS.child))
        return
    if FLAGS.tables_from:
        rows, notes = [], []
        for path in FLAGS.tables_from:
            with open(path) as f:
                saved = json.load(f)
            rows += [{"run": path, **row} for row in saved["rows"]]
            notes += [n for n in saved["notes"] if n not in notes]
        print("\n".join(format_tables(rows, notes)))
        return
    unknown = set(FLAGS.implementations) - set(IMPLEMENTATIONS)
    if unknown:
        raise app.UsageError(f"unknown --implementations {sorted(unknown)}; choose from "
                             f"{', '.join(IMPLEMENTATIONS)}")
    unknown = [s for s in FLAGS.sizes if s not in SIZES and not os.path.isfile(s)]
    if unknown:
        raise app.UsageError(f"unknown --sizes {unknown}: give {', '.join(SIZES)} or "
                             "config files")
    from bench_own_tasks import cpu_flags

    print(f"Machine: {bm._cpu_model()}, {os.cpu_count()} CPUs; CPU flags: {cpu_flags()}; "
          "step memory: TensorFlow's allocator statistics (TensorFlow rows), the peak "
          "RSS above the RSS before the step (torch rows, MALLOC_MMAP_THRESHOLD_="
          f"{RSS_ENVIRONMENT['MALLOC_MMAP_THRESHOLD_']})")
    rows, notes, skipped = [], [], set()
    for spec in _rows_to_run():
        if spec["implementation"] in skipped:
            continue
        row, note = run_row(spec)
        if note is not None:
            skipped.add(spec["implementation"])
            notes.append(f"{spec['implementation']} skipped: {note}")
            continue
        rows.append(row)
        figure = (f"{row['step_mb']:,.0f} MB, {_seconds(row['step_s'])} s" if "step_mb" in row
                  else f"{row['ratio']:.2f}x" if "ratio" in row else row["error"])
        print(f"  {spec['name']} seq {spec['seq']} batch {spec['batch']} "
              f"{spec['implementation']}: {figure}", file=sys.stderr, flush=True)
    for key in ("attention", "note"):
        found = {row[key] for row in rows if row.get(key)}
        notes += [f"transformers' attention: {v}" if key == "attention" else v
                  for v in sorted(found)]
    lines = format_tables(rows, notes)
    print("\n".join(lines))
    if FLAGS.json_output:
        with open(FLAGS.json_output, "w") as f:
            json.dump({"rows": rows, "notes": notes,
                       "per_sequence": [{"name": k[0], "seq": k[1], "implementation": k[2],
                                         **v} for k, v in per_sequence(rows).items()]},
                      f, indent=1)


if __name__ == "__main__":
    app.run(main)
