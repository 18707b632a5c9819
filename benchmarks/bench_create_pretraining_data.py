"""Benchmark of pretraining data creation: instances per second and peak memory.

Each measurement runs `albert_tf.data.pretraining.create_pretraining_data` in a fresh
process (so that peak memory is that run's), once per `--num_workers` value, and prints
a Markdown table. For example, with the Gutenberg texts of the shared data:

    python benchmarks/bench_create_pretraining_data.py \\
        --input_file=data/text/gutenberg/pg1342.txt,data/text/gutenberg/pg2701.txt \\
        --spm_model_file=tests/fixtures/spm/albert_en_30k_reconstructed.model \\
        --max_seq_length=128 --dupe_factor=2 --num_workers=0,1,2

Figures per run:
- instances/s: instances written / seconds from the first line read to the last record
  written (after imports, which `startup s` counts separately).
- RSS after imports: the process before any work (TensorFlow alone is most of it).
- peak RSS (main): the main process's high-water mark (`ru_maxrss`).
- peak memory: the highest value, sampled every 0.1 s, of the main process's RSS plus
  the private (unshared) pages of its workers: the memory the run really holds (forked
  workers share the main process's pages, which a sum of RSS would count again).
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

from absl import app, flags

flags.DEFINE_string("input_file", None, "Input text files or globs, comma-separated.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (without --spm_model_file).")
flags.DEFINE_integer("max_seq_length", 128, "max_seq_length.")
flags.DEFINE_integer("dupe_factor", 2, "dupe_factor.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "max_predictions_per_seq.")
flags.DEFINE_integer("chunk_bytes", None, "chunk_bytes (default: the library's).")
flags.DEFINE_list("num_workers", ["0", "1", "2"], "Worker counts to measure.")
flags.DEFINE_integer("repeats", 1, "Runs per worker count (the best is reported).")
flags.DEFINE_string("output_dir", None, "Where to write records (default: a temp dir).")
flags.DEFINE_bool("child", False, "Internal: run one measurement and print JSON.")

FLAGS = flags.FLAGS


def _kib(field: str, path: str) -> int:
    """A `kB` field of a /proc status-like file (0 if unreadable)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # The field after the parenthesised command is the state, then ppid.
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


class MemorySampler(threading.Thread):
    """Samples the memory a run holds: the main process's RSS plus its workers' private
    pages. Forked workers share the main process's pages (TensorFlow's libraries and
    objects), which summing their RSS would count again; PSS would depend on what else
    runs on the machine."""

    def __init__(self, interval: float = 0.1):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak_kib = 0
        self.done = threading.Event()

    def sample(self) -> None:
        total = _kib("VmRSS", "/proc/self/status")
        for pid in _children(os.getpid()):
            rollup = f"/proc/{pid}/smaps_rollup"
            total += _kib("Private_Clean", rollup) + _kib("Private_Dirty", rollup)
        self.peak_kib = max(self.peak_kib, total)

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.sample()


def measure(workers: int, output_dir: str) -> dict:
    """One run in this process (a fresh one: see `main`)."""
    from albert_tf.data import pretraining

    rss_after_imports = _kib("VmRSS", "/proc/self/status")
    settings = dict(max_seq_length=FLAGS.max_seq_length, dupe_factor=FLAGS.dupe_factor,
                    max_predictions_per_seq=FLAGS.max_predictions_per_seq)
    if FLAGS.chunk_bytes:
        settings["chunk_bytes"] = FLAGS.chunk_bytes
    sampler = MemorySampler()
    sampler.start()
    stats = pretraining.create_pretraining_data(
        FLAGS.input_file, os.path.join(output_dir, "bench.tfrecord@2"),
        pretraining.TokenizerSpec(FLAGS.vocab_file, FLAGS.spm_model_file),
        pretraining.PretrainingDataConfig(**settings), num_workers=workers)
    sampler.sample()
    sampler.done.set()
    input_bytes = sum(os.path.getsize(p)
                      for p in pretraining.expand_input_patterns(FLAGS.input_file))
    return {
        "workers": workers, "instances": stats.num_instances, "seconds": stats.seconds,
        "instances_per_s": stats.instances_per_second, "chunks": stats.num_chunks,
        "input_mb": input_bytes / 2**20,
        "rss_after_imports_mb": rss_after_imports / 1024,
        "peak_rss_main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_memory_mb": sampler.peak_kib / 1024,
    }


def main(argv):
    del argv
    if not FLAGS.input_file or not (FLAGS.spm_model_file or FLAGS.vocab_file):
        raise app.UsageError("--input_file and --spm_model_file (or --vocab_file) needed")
    if FLAGS.child:
        output_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="bench_cpd_")
        print("RESULT " + json.dumps(measure(int(FLAGS.num_workers[0]), output_dir)))
        return
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = []
    for workers in FLAGS.num_workers:
        best = None
        for _ in range(FLAGS.repeats):
            with tempfile.TemporaryDirectory(prefix="bench_cpd_") as output_dir:
                command = [sys.executable, os.path.abspath(__file__), "--child",
                           f"--num_workers={workers}", f"--output_dir={output_dir}"] + [
                    f"--{name}={getattr(FLAGS, name)}" for name in (
                        "input_file", "spm_model_file", "vocab_file", "max_seq_length",
                        "dupe_factor", "max_predictions_per_seq", "chunk_bytes")
                    if getattr(FLAGS, name) is not None]
                start = time.monotonic()
                done = subprocess.run(command, capture_output=True, text=True,
                                      cwd=repository, check=False)
                wall = time.monotonic() - start
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode or not lines:
                sys.exit(f"benchmark run failed:\n{done.stderr[-3000:]}")
            result = json.loads(lines[-1][len("RESULT "):])
            result["process_wall_s"] = wall
            if best is None or result["instances_per_s"] > best["instances_per_s"]:
                best = result
        rows.append(best)
    print(f"input: {FLAGS.input_file} ({rows[0]['input_mb']:.2f} MiB), max_seq_length "
          f"{FLAGS.max_seq_length}, dupe_factor {FLAGS.dupe_factor}, {os.cpu_count()} CPUs")
    print("| workers | instances | seconds | instances/s | process wall s (with imports) "
          "| RSS after imports MB | peak RSS main MB | peak memory MB (main RSS + workers' "
          "private) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['instances']} | {r['seconds']:.2f} | "
              f"{r['instances_per_s']:.0f} | {r['process_wall_s']:.1f} | "
              f"{r['rss_after_imports_mb']:.0f} | {r['peak_rss_main_mb']:.0f} | "
              f"{r['peak_memory_mb']:.0f} |")


if __name__ == "__main__":
    app.run(main)
