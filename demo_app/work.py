"""The demo's sizes, sample requests, files and resumable state (`demo_app.steps` runs
the steps): `Settings` (`FULL`, `QUICK` for the tests), `Workspace` (where each file of a
run goes), `State` (`demo_state.json`: the settings and the steps finished) and
`prepare_work_dir`, which resumes a run or starts it clean."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

STATE_FILE = "demo_state.json"
LABELS = {"0": "negative", "1": "positive"}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Sizes of one demo run (`FULL`, or `QUICK` for the tests)."""

    documents: int             # generated stories to pretrain on
    heldout_documents: int     # more stories, only for the MLM / SOP evaluation
    reviews: tuple             # (train, dev, test) review examples
    vocab_size: int            # SentencePiece pieces (at most)
    model: dict                # albert_config.json fields besides vocab_size
    max_seq_length: int
    max_predictions_per_seq: int
    pretrain_steps: int
    pretrain_batch_size: int
    pretrain_learning_rate: float
    eval_batches: int          # held-out batches of 64 instances
    finetune_steps: int
    finetune_batch_size: int
    finetune_learning_rate: float
    log_every: int             # progress lines (training steps per tf.function call)


_MODEL = {"embedding_size": 64, "hidden_size": 128, "num_hidden_layers": 4,
          "num_hidden_groups": 1, "num_attention_heads": 4, "intermediate_size": 512,
          "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
          "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 64,
          "type_vocab_size": 2, "initializer_range": 0.02}

FULL = Settings(
    documents=3000, heldout_documents=300, reviews=(2000, 500, 100), vocab_size=1000,
    model=_MODEL, max_seq_length=64, max_predictions_per_seq=10,
    pretrain_steps=1500, pretrain_batch_size=32, pretrain_learning_rate=0.01,
    eval_batches=20, finetune_steps=300, finetune_batch_size=32,
    finetune_learning_rate=2e-4, log_every=100)

QUICK = Settings(
    documents=300, heldout_documents=60, reviews=(200, 100, 20), vocab_size=1000,
    model=dict(_MODEL, embedding_size=16, hidden_size=32, num_hidden_layers=2,
               num_attention_heads=2, intermediate_size=64),
    max_seq_length=64, max_predictions_per_seq=10,
    pretrain_steps=20, pretrain_batch_size=16, pretrain_learning_rate=0.01,
    eval_batches=2, finetune_steps=20, finetune_batch_size=16,
    finetune_learning_rate=1e-3, log_every=10)

# Raw-text requests for the served classifier: (text, the label a reader would give).
SAMPLE_REVIEWS = (
    ("the bread from the bakery was wonderful.", "positive"),
    ("honestly, the fish from the harbour were not good.", "negative"),
    ("my friend says the chairs made by leo are not bad.", "positive"),
    ("i think the soups from the kitchen are extremely boring.", "negative"),
    ("we visited the studio in oakvale: the cups were really lovely.", "positive"),
    ("on friday i bought six hats and they were not very excellent.", "negative"),
)
# Fill-in-the-blank questions for the pretrained model ([MASK] is one piece).
SAMPLE_BLANKS = (
    "he eats breakfast and drinks a cup of [MASK].",
    "in the evening leo closes the workshop and walks [MASK].",
    "at night she is tired and goes to [MASK].",
)
# Two consecutive stretches of a story, for sentence order: A comes before B.
SAMPLE_ORDER = ("in the town of riverton there lives a baker called anna. one morning anna "
                "wakes up at six o'clock.",
                "first she feeds the cat and makes coffee. then anna goes to the bakery in "
                "riverton.")


class DemoError(RuntimeError):
    """A step failed; the message says which and where its log is."""


# ------------------------------------------------------------------------- output
def say(message: str = "") -> None:
    print(message, flush=True)


# -------------------------------------------------------------------------- paths
class Workspace:
    """The files of one demo run, under `root`."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        join = lambda *parts: os.path.join(self.root, *parts)  # noqa: E731
        self.corpus = join("data", "stories", "train.txt")
        self.heldout = join("data", "stories", "heldout.txt")
        self.glue_dir = join("data", "glue")
        self.spm_text = join("spm", "training_text.txt")
        self.spm_prefix = join("spm", "demo")
        self.spm_model = self.spm_prefix + ".model"
        self.config = join("albert_config.json")
        self.pretraining = join("pretraining")
        self.classifier = join("classifier")
        self.savedmodel = join("savedmodel")
        self.client = join("ask.py")
        self.logs = join("logs")
        self.state = join(STATE_FILE)

    def relative(self, path: str) -> str:
        """`path` as the user typed the work directory (relative when it is under cwd)."""
        relative = os.path.relpath(path)
        return path if relative.startswith("..") else relative


class State:
    """`demo_state.json`: the settings of the run and the steps finished."""

    def __init__(self, path: str, settings: dict):
        self.path, self.settings, self.done = path, settings, {}

    @classmethod
    def load(cls, path: str):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        state = cls(path, data["settings"])
        state.done = data.get("done", {})
        return state

    def mark_done(self, step: str, info: dict | None = None) -> None:
        self.done[step] = info or {}
        self.save()

    def save(self) -> None:
        from albert_tf import fileio

        fileio.write_text_atomically(
            self.path, json.dumps({"settings": self.settings, "done": self.done}, indent=1))


def settings_record(settings: Settings, seed: int, quick: bool) -> dict:
    """The settings as `demo_state.json` holds them (JSON: tuples become lists)."""
    return json.loads(json.dumps({"quick": quick, "seed": seed,
                                  **dataclasses.asdict(settings)}))


def prepare_work_dir(workspace: Workspace, record: dict, fresh: bool) -> State:
    """Resumes the run in `workspace` or starts it clean; says which."""
    root = workspace.relative(workspace.root)
    exists = os.path.isdir(workspace.root) and os.listdir(workspace.root)
    if exists and not os.path.exists(workspace.state):
        raise DemoError(f"{root} exists and is not a demo work directory (no {STATE_FILE}); "
                        "choose another --work_dir")
    if exists:
        previous = State.load(workspace.state)
        if fresh:
            say(f"--fresh: deleting {root} and starting clean")
        elif previous.settings != record:
            say(f"{root} holds a run with other settings (quick={previous.settings.get('quick')},"
                f" seed={previous.settings.get('seed')}): deleting it and starting clean")
            fresh = True
        if fresh:
            shutil.rmtree(workspace.root)
        else:
            done = ", ".join(previous.done) or "nothing yet"
            say(f"resuming the run in {root} (finished before: {done}); "
                "--fresh starts clean")
            return previous
    else:
        say(f"starting a new run in {root}")
    os.makedirs(workspace.logs, exist_ok=True)
    state = State(workspace.state, record)
    state.save()
    return state
