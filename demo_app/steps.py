"""The end-to-end demo behind `make demo` (`python demo.py`): from nothing to a served model.

Offline, on CPU, in a few minutes, with the project's own scripts:

1. data: a generated story corpus (pretraining), held-out stories, and a generated
   review-sentiment task in the GLUE SST-2 layout (`demo_app.data`);
2. a SentencePiece model trained here (ALBERT's conventions: `<pad>` = 0, `<unk>` = 1,
   `[CLS]`, `[SEP]`, `[MASK]` control symbols, lower-cased text);
3. a small ALBERT pretrained with MLM + SOP by `run_pretraining.py` (dynamic masking from
   the raw text), evaluated on the held-out stories; its last step is also a TF1
   checkpoint (`model.ckpt-<step>`, what `--init_checkpoint` reads);
4. fine-tuned on the review task by `run_classifier.py`, which keeps the best checkpoint
   by dev accuracy and exports it as a SavedModel (`--export_dir`);
5. the SavedModel loaded in a fresh process (`import tensorflow_text`, then
   `tf.saved_model.load`) and asked about raw text through its `serve_text` signature.

It prints the progress of each step and a summary: held-out MLM and SOP accuracy, dev
accuracy, sample answers of the served model and where the files are.

Reruns resume: every finished step is recorded in `<work_dir>/demo_state.json` and
skipped, and an interrupted training step resumes from its last checkpoint (the
scripts do that themselves). `--fresh` deletes the work directory and starts clean, as
does a rerun with other settings (`--quick`, `--seed`) in the same directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from absl import flags

# Sizes, samples, files and state of a run: demo_app.work; the steps are here.
from demo_app.work import (
    FULL,
    LABELS,
    QUICK,
    SAMPLE_BLANKS,
    SAMPLE_ORDER,
    SAMPLE_REVIEWS,
    DemoError,
    Settings,
    State,
    Workspace,
    prepare_work_dir,
    say,
    settings_record,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Public-domain English (Project Gutenberg #11), beside the demo: added to the
# SentencePiece training text, see `train_sentencepiece`.
ALICE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "text", "alice_excerpt.txt")

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("work_dir", "demo_output", "Where everything the demo makes goes.")
    flags.DEFINE_bool("quick", False,
                      "A tiny run (seconds; checks the plumbing, learns little).")
    flags.DEFINE_bool("fresh", False, "Delete work_dir first and start clean.")
    flags.DEFINE_integer("seed", 12345, "Seed of every random choice of the demo.")
    flags.DEFINE_bool("verbose", False, "Show every line the scripts log.")


# ------------------------------------------------------------------------- output
def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# An absl log line: level, date, time, thread, file:line] message.
_ABSL_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ([\w.]+\.py):\d+\] (.*)$")
# The project's modules whose log lines are progress worth showing.
_SHOWN_MODULES = {"loop.py", "model_files.py", "labels.py", "classifier.py", "pretraining.py",
                  "glue.py", "checkpoints.py"}


def _shown(line: str, verbose: bool) -> str | None:
    """The part of a script's output line to print (None: only in the log)."""
    line = line.rstrip("\n")
    if verbose:
        return line
    match = _ABSL_LINE.match(line)
    if match:
        level, module, message = match.groups()
        if module in _SHOWN_MODULES or level in "EF" and not module.endswith(".cc"):
            return message
        return None
    if line.startswith(("error:", "exported ", "Traceback")):
        return line
    return None


# --------------------------------------------------------------------------- steps
class Demo:
    def __init__(self, settings: Settings, workspace: Workspace, state: State, seed: int,
                 verbose: bool = False):
        self.settings, self.ws, self.state = settings, workspace, state
        self.seed, self.verbose = seed, verbose
        self.step_number, self.results = 0, {}

    STEPS = ("data", "sentencepiece", "pretraining", "heldout_eval", "pretrained_model",
             "finetuning", "serving")

    def header(self, title: str) -> None:
        self.step_number += 1
        say()
        say(f"[{self.step_number}/{len(self.STEPS)}] {title}")

    def run_script(self, log_name: str, script: str, args: dict) -> None:
        """`python <script> --flag=value ...` (the repository's script), its progress
        shown as it comes, everything in logs/<log_name>.log."""
        command = [sys.executable, os.path.join(ROOT, script)]
        for name, value in args.items():
            if value is True:
                command.append(f"--{name}")
            elif value is not None and value is not False:
                command.append(f"--{name}={value}")
        log_path = os.path.join(self.ws.logs, f"{log_name}.log")
        root = self.ws.relative(self.ws.root)
        shown_args = " ".join(a.replace(self.ws.root + os.sep, root + os.sep)
                              for a in command[2:])
        say(f"    $ python {script} {shown_args}")
        say(f"    (full log: {self.ws.relative(log_path)})")
        environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        tail = []
        with open(log_path, "a", encoding="utf-8") as log:
            process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                       env=environment, errors="replace")
            for line in process.stdout:
                log.write(line)
                tail = (tail + [line.rstrip("\n")])[-25:]
                shown = _shown(line, self.verbose)
                if shown is not None:
                    say(f"    | {shown}")
            code = process.wait()
        if code != 0:
            raise DemoError(f"{script} failed (exit code {code}); the end of its log "
                            f"({self.ws.relative(log_path)}):\n" + "\n".join(tail))

    def skip(self, step: str) -> bool:
        if step in self.state.done:
            say("    done in an earlier run: kept")
            return True
        return False

    # 1 ----------------------------------------------------------------------------
    def data(self) -> None:
        self.header("Data: generated stories (pretraining) and reviews (SST-2 layout)")
        if not self.skip("data"):
            from demo_app import data as demo_data

            s = self.settings
            os.makedirs(os.path.dirname(self.ws.corpus), exist_ok=True)
            train = demo_data.write_corpus(self.ws.corpus, s.documents, self.seed)
            heldout = demo_data.write_corpus(self.ws.heldout, s.heldout_documents,
                                             self.seed + 1)
            reviews = demo_data.write_sst2(self.ws.glue_dir, train=s.reviews[0],
                                           dev=s.reviews[1], test=s.reviews[2],
                                           seed=self.seed + 2)
            self.state.mark_done("data", {"train": train, "heldout": heldout,
                                          "reviews": reviews})
        info = self.state.done["data"]
        train, heldout, reviews = info["train"], info["heldout"], info["reviews"]
        say(f"    {self.ws.relative(self.ws.corpus)}: {train['documents']} stories, "
            f"{train['sentences']} sentences ({train['bytes'] / 1e6:.1f} MB)")
        say(f"    {self.ws.relative(self.ws.heldout)}: {heldout['documents']} held-out "
            f"stories (never trained on)")
        say(f"    {self.ws.relative(os.path.join(self.ws.glue_dir, 'SST-2'))}/: reviews, "
            f"{reviews['train']} train / {reviews['dev']} dev / {reviews['test']} test")
        with open(self.ws.corpus, encoding="utf-8") as f:
            story = [next(f).strip() for _ in range(3)]
        say("    a story begins: " + " ".join(story))
        with open(os.path.join(self.ws.glue_dir, "SST-2", "train.tsv"),
                  encoding="utf-8") as f:
            next(f)
            text, label = next(f).rstrip("\n").split("\t")
        say(f"    a review: \"{text}\" -> {LABELS[label]}")

    # 2 ----------------------------------------------------------------------------
    def sentencepiece(self) -> None:
        self.header("SentencePiece: a unigram model trained on the corpus")
        if not self.skip("sentencepiece"):
            size = train_sentencepiece(self.ws, self.settings, self.seed)
            config = dict(vocab_size=size, **self.settings.model)
            with open(self.ws.config, "w", encoding="utf-8") as f:
                json.dump(config, f, indent=2)
            self.state.mark_done("sentencepiece", {"pieces": size})
        from albert_tf.tokenization import FullTokenizer

        tokenizer = FullTokenizer(spm_model_file=self.ws.spm_model, do_lower_case=True)
        example = "In the afternoon Anna finds the fish disappointing."
        say(f"    {self.ws.relative(self.ws.spm_model)}: "
            f"{self.state.done['sentencepiece']['pieces']} pieces; <pad>="
            f"{tokenizer.special_id('pad')} [CLS]={tokenizer.special_id('[CLS]')} "
            f"[SEP]={tokenizer.special_id('[SEP]')} [MASK]={tokenizer.special_id('[MASK]')}")
        say(f"    \"{example}\" -> {' '.join(tokenizer.tokenize(tokenizer.preprocess(example)))}")
        say(f"    {self.ws.relative(self.ws.config)}: "
            + ", ".join(f"{k}={self.settings.model[k]}" for k in (
                "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads")))

    # 3 ----------------------------------------------------------------------------
    def pretraining(self) -> None:
        s = self.settings
        self.header(f"Pretraining: MLM + SOP, {s.pretrain_steps} steps of "
                    f"{s.pretrain_batch_size} (run_pretraining.py, dynamic masking)")
        if self.skip("pretraining"):
            return
        self.run_script("pretraining", "run_pretraining.py", {
            "input_text": self.ws.corpus, "spm_model_file": self.ws.spm_model,
            "albert_config_file": self.ws.config, "output_dir": self.ws.pretraining,
            "do_train": True, "max_seq_length": s.max_seq_length,
            "max_predictions_per_seq": s.max_predictions_per_seq,
            "train_batch_size": s.pretrain_batch_size,
            "num_train_steps": s.pretrain_steps,
            "num_warmup_steps": max(1, s.pretrain_steps // 10),
            "optimizer": "lamb", "learning_rate": s.pretrain_learning_rate,
            "iterations_per_loop": s.log_every,
            "save_checkpoints_steps": max(s.log_every, s.pretrain_steps // 3),
            "keep_checkpoint_max": 2, "seed": self.seed})
        self.state.mark_done("pretraining")

    # 4 ----------------------------------------------------------------------------
    def heldout_eval(self) -> None:
        s = self.settings
        self.header(f"Held-out evaluation: {s.eval_batches} batches of 64 instances from "
                    "the held-out stories (run_pretraining.py --do_eval)")
        if not self.skip("heldout_eval"):
            self.run_script("heldout_eval", "run_pretraining.py", {
                "input_text": self.ws.heldout, "spm_model_file": self.ws.spm_model,
                "albert_config_file": self.ws.config, "output_dir": self.ws.pretraining,
                "do_eval": True, "max_seq_length": s.max_seq_length,
                "max_predictions_per_seq": s.max_predictions_per_seq,
                "eval_batch_size": 64, "max_eval_steps": s.eval_batches,
                "num_train_steps": s.pretrain_steps, "seed": self.seed + 1})
            results = read_results(os.path.join(self.ws.pretraining, "eval_results.txt"))
            results["baseline_piece"], results["baseline_accuracy"] = most_frequent_piece(
                self.ws.heldout, self.ws.spm_model)
            self.state.mark_done("heldout_eval", results)
        results = self.state.done["heldout_eval"]
        say(f"    masked-LM accuracy {results['masked_lm_accuracy']:.3f} (always guessing "
            f"'{results['baseline_piece']}': about {results['baseline_accuracy']:.3f}), "
            f"sentence-order accuracy {results['sentence_order_accuracy']:.3f} (chance: 0.5)")

    # 5 ----------------------------------------------------------------------------
    def pretrained_model(self) -> None:
        self.header("The pretrained model: a TF1 checkpoint for fine-tuning, and what it "
                    "predicts")
        if not self.skip("pretrained_model"):
            info = pretrained_checkpoint_and_samples(self.ws)
            self.state.mark_done("pretrained_model", info)
        info = self.state.done["pretrained_model"]
        say(f"    {self.ws.relative(info['checkpoint'])} (from {info['source']})")
        for text, answers in info["blanks"]:
            say(f"    \"{text}\"")
            say("        [MASK] -> " + ", ".join(f"{piece} ({p:.2f})" for piece, p in answers))
        order = info["order"]
        say(f"    \"{SAMPLE_ORDER[0]}\" / \"{SAMPLE_ORDER[1]}\"")
        say(f"        P(in order) = {order['in_order']:.2f} as written, "
            f"{order['swapped']:.2f} swapped")

    # 6 ----------------------------------------------------------------------------
    def finetuning(self) -> None:
        s = self.settings
        self.header(f"Fine-tuning on the reviews: {s.finetune_steps} steps of "
                    f"{s.finetune_batch_size}, best checkpoint exported "
                    "(run_classifier.py --export_dir)")
        if not self.skip("finetuning"):
            self.run_script("finetuning", "run_classifier.py", {
                "task_name": "sst-2", "data_dir": self.ws.glue_dir,
                "spm_model_file": self.ws.spm_model, "albert_config_file": self.ws.config,
                "init_checkpoint": self.state.done["pretrained_model"]["checkpoint"],
                "output_dir": self.ws.classifier, "do_train": True, "do_eval": True,
                "do_predict": True, "max_seq_length": s.max_seq_length,
                "train_batch_size": s.finetune_batch_size, "eval_batch_size": 64,
                "predict_batch_size": 64, "learning_rate": s.finetune_learning_rate,
                "train_step": s.finetune_steps,
                "warmup_step": max(1, s.finetune_steps // 10),
                "save_checkpoints_steps": max(s.log_every, s.finetune_steps // 3),
                "iterations_per_loop": max(1, s.log_every // 2),
                "export_dir": self.ws.savedmodel, "seed": self.seed})
            best = read_results(os.path.join(self.ws.classifier, "best_trial.txt"))
            self.state.mark_done("finetuning", {"best": best,
                                                "savedmodel": latest_version(self.ws.savedmodel)})
        info = self.state.done["finetuning"]
        best = info["best"]
        say(f"    best dev accuracy {best['eval_accuracy']:.3f} at step "
            f"{int(best['global_step'])}; SavedModel {self.ws.relative(info['savedmodel'])}")

    # 7 ----------------------------------------------------------------------------
    def serving(self) -> None:
        self.header("Serving: the SavedModel in a fresh process, raw text through "
                    "serve_text")
        write_client(self.ws.client)
        texts = [text for text, _ in SAMPLE_REVIEWS]
        command = [sys.executable, self.ws.client, "--json", *texts]
        say(f"    $ python {self.ws.relative(self.ws.client)} \"{texts[0]}\" ...")
        started = time.time()
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        with open(os.path.join(self.ws.logs, "serving.log"), "w", encoding="utf-8") as f:
            f.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise DemoError(f"the served model did not answer:\n{result.stderr[-3000:]}")
        answers = json.loads(result.stdout.strip().splitlines()[-1])
        self.results["served"] = answers
        say(f"    answered {len(answers['predictions'])} requests in "
            f"{_duration(time.time() - started)} (model {self.ws.relative(answers['model'])})")

    # ----------------------------------------------------------------------- summary
    def summary(self, elapsed: float) -> None:
        done = self.state.done
        heldout = done["heldout_eval"]
        best = done["finetuning"]["best"]
        served = self.results["served"]
        say()
        say("=" * 78)
        say("What the demo learned")
        say(f"  pretraining  held-out masked-LM accuracy {heldout['masked_lm_accuracy']:.3f}"
            f"   sentence-order accuracy {heldout['sentence_order_accuracy']:.3f}"
            f"   (step {int(heldout['global_step'])})")
        say(f"               (without context: about {heldout['baseline_accuracy']:.3f} and "
            "0.5)")
        majority = majority_share(os.path.join(self.ws.glue_dir, "SST-2", "dev.tsv"))
        say(f"  fine-tuning  review dev accuracy {best['eval_accuracy']:.3f}"
            f"   (majority class {majority:.3f}; step {int(best['global_step'])})")
        say("  the SavedModel's serve_text, in a fresh process:")
        correct = 0
        for (text, expected), label, probability in zip(
                SAMPLE_REVIEWS, served["predictions"], served["probabilities"]):
            got = LABELS.get(label, label)
            correct += got == expected
            mark = "ok" if got == expected else f"expected {expected}"
            say(f"    {got:8s} {probability:.2f}  \"{text}\"  [{mark}]")
        say(f"    {correct}/{len(SAMPLE_REVIEWS)} as a reader would answer")
        say("Files")
        rel = self.ws.relative
        for name, path in (
                ("corpus", self.ws.corpus), ("SentencePiece model", self.ws.spm_model),
                ("ALBERT config", self.ws.config),
                ("pretraining checkpoints", self.ws.pretraining),
                ("pretrained TF1 checkpoint", done["pretrained_model"]["checkpoint"]),
                ("fine-tuned checkpoint", os.path.join(self.ws.classifier,
                                                       "model.ckpt-best")),
                ("SavedModel", done["finetuning"]["savedmodel"]),
                ("logs", self.ws.logs)):
            say(f"  {name:26s} {rel(path)}")
        say(f"Ask the model yourself:  {rel(sys.executable)} {rel(self.ws.client)} "
            "\"the pies were not bad\"")
        say(f"Demo finished in {_duration(elapsed)}.")


# ------------------------------------------------------------------------- helpers
def read_results(path: str) -> dict:
    """The `key = value` lines of eval_results.txt / best_trial.txt."""
    results = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if " = " in line:
                key, value = line.strip().split(" = ", 1)
                results[key] = float(value)
    return results


def most_frequent_piece(text_path: str, spm_model: str) -> tuple[str, float]:
    """The most frequent piece of a text and its share of all pieces: about the
    masked-LM accuracy of a model that ignores the context."""
    import collections

    from albert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(spm_model_file=spm_model, do_lower_case=True)
    counts = collections.Counter()
    with open(text_path, encoding="utf-8") as f:
        for line in f:
            counts.update(tokenizer.tokenize(tokenizer.preprocess(line.strip())))
    piece, count = counts.most_common(1)[0]
    return piece.lstrip("▁"), count / sum(counts.values())


def majority_share(tsv_path: str) -> float:
    with open(tsv_path, encoding="utf-8") as f:
        labels = [line.rstrip("\n").split("\t")[-1] for line in list(f)[1:]]
    return max(labels.count(label) for label in set(labels)) / len(labels)


def latest_version(export_dir: str) -> str:
    from albert_tf import fileio

    versions = fileio.integer_subdirectories(export_dir)
    if not versions:
        raise DemoError(f"no SavedModel version in {export_dir}")
    return os.path.join(export_dir, str(max(versions)))


def train_sentencepiece(ws: Workspace, settings: Settings, seed: int) -> int:
    """Trains `spm/demo.model` in-process, deterministically (one thread, a fixed seed,
    no input sampling); returns its number of pieces.

    The training text is the stories, the training reviews and a page of public-domain
    English (Alice's Adventures in Wonderland, from the test fixtures), run through the
    tokenizer's own `preprocess_text` (lower-cased, as the model sees text). The real
    English matters: the generated text has only a few hundred distinct words, each
    always in the same few contexts, and the unigram trainer then keeps fragments such
    as '▁' + 'in' instead of whole words.
    """
    import sentencepiece as spm

    from albert_tf.tokenization import preprocess_text

    os.makedirs(os.path.dirname(ws.spm_prefix), exist_ok=True)
    sources = [ws.corpus, os.path.join(ws.glue_dir, "SST-2", "train.tsv"), ALICE]
    if not os.path.exists(ALICE):
        raise DemoError(f"{ALICE} is missing: the demo runs from a checkout of the "
                        "repository")
    with open(ws.spm_text, "w", encoding="utf-8") as out:
        for path in sources:
            with open(path, encoding="utf-8") as f:
                for index, line in enumerate(f):
                    if path.endswith(".tsv"):
                        if index == 0:
                            continue
                        line = line.rsplit("\t", 1)[0]
                    line = preprocess_text(line.strip(), lower=True)
                    if line:
                        out.write(line + "\n")
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        input=ws.spm_text, model_prefix=ws.spm_prefix, model_type="unigram",
        vocab_size=settings.vocab_size, hard_vocab_limit=False, character_coverage=1.0,
        # ALBERT's conventions, as Google's 30k-clean.model.
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="<pad>", unk_piece="<unk>",
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=["(", ")", '"', "-", ".", "–", "£", "€"],
        normalization_rule_name="nmt_nfkc", num_threads=1, shuffle_input_sentence=False,
        input_sentence_size=0, minloglevel=2)
    processor = spm.SentencePieceProcessor(model_file=ws.spm_model)
    return processor.GetPieceSize()


def pretrained_checkpoint_and_samples(ws: Workspace) -> dict:
    """Reads back the TF1 checkpoint `run_pretraining.py` wrote at its last step
    (`pretraining/model.ckpt-<step>`, what `run_classifier.py --init_checkpoint` reads),
    and asks the pretrained model the sample blanks and the sentence-order pair."""
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertPretrainer, load_tf1_checkpoint, names, packing
    from albert_tf.tokenization import FullTokenizer

    source = tf.train.latest_checkpoint(ws.pretraining)
    if not source:
        raise DemoError(f"no pretraining checkpoint in {ws.pretraining}")
    step = int(source.rsplit("-", 1)[1])
    target = os.path.join(ws.pretraining, f"model.ckpt-{step}")
    if not tf.io.gfile.exists(target + ".index"):
        raise DemoError(f"run_pretraining.py wrote no {target}")
    model = AlbertPretrainer(AlbertConfig.from_json_file(ws.config))
    load_tf1_checkpoint(model, target)

    tokenizer = FullTokenizer(spm_model_file=ws.spm_model, do_lower_case=True)
    cls_id, sep_id = tokenizer.special_id("[CLS]"), tokenizer.special_id("[SEP]")
    mask_id = tokenizer.special_id("[MASK]")

    def run(segments):
        inputs = packing.pack(segments, model.config.max_position_embeddings,
                              cls_id=cls_id, sep_id=sep_id, pad_to_max_length=False)
        positions = np.flatnonzero(inputs[names.INPUT_WORD_IDS] == mask_id)
        inputs[names.MASKED_LM_POSITIONS] = (positions if positions.size else
                                             np.zeros([1], np.int64)).astype(np.int32)
        outputs = model({k: v[np.newaxis] for k, v in inputs.items()}, training=False)
        return (tf.nn.softmax(outputs["mlm_logits"][0]).numpy(),
                tf.nn.softmax(outputs["sop_logits"][0]).numpy())

    blanks = []
    for text in SAMPLE_BLANKS:
        ids = []
        for index, part in enumerate(text.split("[MASK]")):
            ids += ([mask_id] if index else []) + tokenizer.encode(part)
        probabilities, _ = run([ids])
        top = np.argsort(-probabilities[0])[:3]
        blanks.append([text, [[tokenizer.convert_ids_to_tokens([int(i)])[0].lstrip("▁"),
                               float(probabilities[0][i])] for i in top]])
    first, second = (tokenizer.encode(t) for t in SAMPLE_ORDER)
    # SOP label 0: the segments are in their original order; 1: swapped.
    in_order = float(run([first, second])[1][0])
    swapped = float(run([second, first])[1][0])
    return {"checkpoint": target, "source": os.path.basename(source), "blanks": blanks,
            "order": {"in_order": in_order, "swapped": swapped}}


CLIENT = '''"""Asks the demo's served model about raw text (written by demo.py).

    python {client} "the pies were not bad" "the soup was awful"

Loads the newest SavedModel version under savedmodel/ beside this file and sends the
texts through its serve_text signature, as any TensorFlow client would: only
tensorflow and tensorflow_text are imported. --json prints one JSON object instead.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # fewer TensorFlow start-up messages

import tensorflow_text  # noqa: E402, F401  (registers the tokenizer ops of the graph)
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LABELS = {{"0": "negative", "1": "positive"}}


def main(argv):
    as_json = "--json" in argv
    texts = [a for a in argv[1:] if a != "--json"]
    if not texts:
        raise SystemExit(__doc__)
    export_dir = os.path.join(HERE, "savedmodel")
    version = max(int(v) for v in os.listdir(export_dir) if v.isdigit())
    model_dir = os.path.join(export_dir, str(version))
    with open(os.path.join(model_dir, "assets.extra", "labels.txt")) as f:
        labels = f.read().split()
    serve = tf.saved_model.load(model_dir).signatures["serve_text"]
    answer = serve(text_a=tf.constant(texts))
    predictions = [labels[i] for i in answer["predictions"].numpy()]
    probabilities = answer["probabilities"].numpy().max(axis=-1).tolist()
    if as_json:
        print(json.dumps({{"model": model_dir, "predictions": predictions,
                          "probabilities": probabilities}}))
        return
    for text, label, probability in zip(texts, predictions, probabilities):
        print(f"{{LABELS.get(label, label):8s}} {{probability:.2f}}  {{text}}")


if __name__ == "__main__":
    main(sys.argv)
'''


def write_client(path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(CLIENT.format(client=os.path.relpath(path)))


# ---------------------------------------------------------------------------- main
def run(work_dir: str, *, quick: bool = False, fresh: bool = False, seed: int = 12345,
        verbose: bool = False) -> dict:
    """The whole demo; returns the state (settings, each step's results)."""
    started = time.time()
    settings = QUICK if quick else FULL
    workspace = Workspace(work_dir)
    say(f"albert_tf demo{' (--quick)' if quick else ''}: SentencePiece, ALBERT "
        "pretraining (MLM + SOP), fine-tuning, SavedModel serving; offline, on CPU")
    state = prepare_work_dir(workspace, settings_record(settings, seed, quick), fresh)
    demo = Demo(settings, workspace, state, seed, verbose=verbose)
    for step in Demo.STEPS:
        step_started = time.time()
        getattr(demo, step)()
        say(f"    ({_duration(time.time() - step_started)}; "
            f"{_duration(time.time() - started)} so far)")
    demo.summary(time.time() - started)
    return {"settings": state.settings, "done": state.done, "served": demo.results["served"]}


def main(argv) -> None:
    if len(argv) > 1:
        raise SystemExit(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        run(FLAGS.work_dir, quick=FLAGS.quick, fresh=FLAGS.fresh, seed=FLAGS.seed,
            verbose=FLAGS.verbose)
    except DemoError as e:
        raise SystemExit(f"error: {e}") from None
    except KeyboardInterrupt:
        raise SystemExit("interrupted: run the demo again to resume where it stopped") \
            from None
