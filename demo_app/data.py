"""The demo's data, generated: a story corpus for pretraining and a review task.

Everything here is a function of its `seed` (Python's `random.Random`), so a demo run
is reproducible and needs no download.

- `story_documents`: documents in the format of `create_pretraining_data.py` and
  `run_pretraining.py --input_text` (one sentence a line, a blank line between
  documents). Each document follows a worker of a small invented town through one to
  three days, in order: an introduction first, then the days ("on monday", "on
  tuesday", ...), each from morning to night with clock times that only go up. Which
  words may fill a slot depends on the document (a baker bakes bread at the bakery, the
  same name and town come back), so masked words can be predicted from context, and
  the order of two stretches of a story can be told from their time words: what a small
  ALBERT needs to learn masked-LM and sentence-order prediction in minutes.
- `review_examples`: one-sentence reviews of the town's goods with a sentiment label,
  in the GLUE SST-2 layout (`write_sst2`: `SST-2/{train,dev}.tsv` with a
  `sentence<TAB>label` header, `test.tsv` with `index<TAB>sentence`), so
  `run_classifier.py --task_name=sst-2 --data_dir=<dir>` reads them. The label is the
  adjective's polarity, flipped by a negation ("was not bad" is positive), with
  intensifiers and distracting context around it.

The words of both come from the same world, as pretraining text and a downstream task do.
"""

from __future__ import annotations

import os
import random
from typing import Iterator

# --------------------------------------------------------------------------- world
NAMES = ("anna", "ben", "clara", "david", "emma", "felix", "grace", "henry", "iris",
         "jack", "kate", "leo", "maya", "noah", "olga", "paul", "rosa", "sam", "tara",
         "victor", "wendy", "oscar", "lucy", "hugo")
# A name's pronoun is fixed for the whole corpus.
SHE = frozenset({"anna", "clara", "emma", "grace", "iris", "kate", "maya", "olga",
                 "rosa", "tara", "wendy", "lucy"})
TOWNS = ("riverton", "hillside", "oakvale", "lakeside", "stonebridge", "greenfield",
         "westport", "maplewood", "redcliff", "northwick")
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
           "eleven", "twelve")


class Job:
    """A trade: where it is done, with what, making what, for whom."""

    def __init__(self, name, place, verb, goods, tool, customers):
        self.name, self.place, self.verb = name, place, verb
        self.goods, self.tool, self.customers = goods, tool, customers


JOBS = (
    Job("baker", "bakery", "bakes", ("loaves of bread", "cakes", "rolls", "pies"),
        "oven", "neighbours"),
    Job("fisher", "harbour", "catches", ("fish", "crabs", "eels"), "boat", "cooks"),
    Job("farmer", "farm", "gathers", ("eggs", "potatoes", "apples", "carrots"), "tractor",
        "shops"),
    Job("carpenter", "workshop", "builds", ("chairs", "tables", "doors", "shelves"), "saw",
        "families"),
    Job("tailor", "shop", "sews", ("coats", "shirts", "dresses", "hats"), "needle",
        "customers"),
    Job("potter", "studio", "makes", ("bowls", "cups", "vases", "plates"), "wheel",
        "visitors"),
    Job("gardener", "garden", "plants", ("roses", "tulips", "herbs", "trees"), "spade",
        "people of the town"),
    Job("cook", "kitchen", "cooks", ("soups", "stews", "pancakes", "meals"), "pan", "guests"),
)
FOODS = ("soup", "bread and cheese", "an apple", "rice", "a sandwich", "noodles", "a salad")
EVENINGS = ("reads a book", "plays the violin", "writes a letter", "talks with friends",
            "listens to the radio", "draws a picture")
WEATHER = ("sunny", "rainy", "windy", "cold", "warm", "foggy")

POSITIVE = ("good", "great", "wonderful", "excellent", "lovely", "fine", "superb",
            "delightful", "perfect", "fantastic")
NEGATIVE = ("bad", "poor", "awful", "terrible", "dreadful", "boring", "disappointing",
            "horrible", "bland", "mediocre")
INTENSIFIERS = ("very", "really", "truly", "quite", "rather", "so", "extremely")


def _pronoun(name: str) -> str:
    return "she" if name in SHE else "he"


def _possessive(name: str) -> str:
    return "her" if name in SHE else "his"


def _clock(hour: int) -> str:
    """12-hour clock words: 7 -> 'seven', 13 -> 'one'."""
    words = ("twelve", "one", "two", "three", "four", "five", "six", "seven", "eight",
             "nine", "ten", "eleven")
    return words[hour % 12]


# ------------------------------------------------------------------------ stories
def _opinion(rng: random.Random) -> tuple[str, bool]:
    """An adjective phrase and its polarity: '(not) (very) good'."""
    positive = rng.random() < 0.5
    adjective = rng.choice(POSITIVE if positive else NEGATIVE)
    if rng.random() < 0.3:
        adjective = f"{rng.choice(INTENSIFIERS)} {adjective}"
    if rng.random() < 0.25:
        return f"not {adjective}", not positive
    return adjective, positive


def _day(rng: random.Random, who: dict, day: str, first_day: bool) -> list[str]:
    """The sentences of one day, in time order."""
    name, job, town = who["name"], who["job"], who["town"]
    he, his = _pronoun(name), _possessive(name)
    goods = rng.choice(job.goods)
    wake = rng.randint(5, 8)
    start = wake + rng.randint(1, 2)
    sell = rng.randint(14, 16)
    home = rng.randint(18, 20)
    sleep = rng.randint(21, 23)
    friend = rng.choice([n for n in NAMES if n != name])
    subject = name if rng.random() < 0.5 else he
    opening = f"on {day} morning" if not first_day or rng.random() < 0.5 else "one morning"
    weather = rng.choice(WEATHER)
    sentences = [
        rng.choice([
            f"{opening} {name} wakes up at {_clock(wake)} o'clock.",
            f"{opening} the sky over {town} is {weather} and {name} gets up early.",
            f"{opening} {name} wakes up when the clock strikes {_clock(wake)}.",
        ]),
    ]
    if rng.random() < 0.6:
        sentences.append(rng.choice([
            f"{he} eats breakfast and drinks a cup of tea.",
            f"{he} has breakfast at {_clock(wake)} o'clock with {his} family.",
            f"first {he} feeds the cat and makes coffee.",
        ]))
    sentences.append(rng.choice([
        f"at {_clock(start)} o'clock {subject} walks to the {job.place}.",
        f"then {subject} goes to the {job.place} in {town}.",
        f"after breakfast {subject} opens the {job.place}.",
    ]))
    count = rng.choice(NUMBERS)
    sentences.append(rng.choice([
        f"there {name} {job.verb} {count} {goods} with the {job.tool}.",
        f"all morning {he} {job.verb} {goods} for the {job.customers}.",
        f"at the {job.place} {name} {job.verb} {count} {goods}.",
    ]))
    if rng.random() < 0.7:
        sentences.append(rng.choice([
            f"at noon {he} eats {rng.choice(FOODS)} with {friend}.",
            f"at twelve o'clock {name} has lunch with {friend}.",
            f"at midday {he} stops for lunch and eats {rng.choice(FOODS)}.",
        ]))
    opinion, _ = _opinion(rng)
    sentences.append(rng.choice([
        f"in the afternoon {friend} says the {goods} are {opinion}.",
        f"in the afternoon {friend} visits the {job.place} and finds the {goods} {opinion}.",
        f"after lunch {friend} tries the {goods} and thinks they are {opinion}.",
    ]))
    if rng.random() < 0.6:
        sentences.append(rng.choice([
            f"at {_clock(sell)} o'clock {he} sells the {goods} at the market.",
            f"later {he} brings the {goods} to the market in {town}.",
            f"at {_clock(sell)} o'clock the {job.customers} come to buy {goods}.",
        ]))
    sentences.append(rng.choice([
        f"in the evening {name} closes the {job.place} and walks home.",
        f"at {_clock(home)} o'clock in the evening {he} goes home.",
        f"when the sun sets {name} cleans the {job.tool} and goes home.",
    ]))
    if rng.random() < 0.7:
        sentences.append(f"after dinner {he} {rng.choice(EVENINGS)}.")
    sentences.append(rng.choice([
        f"at {_clock(sleep)} o'clock at night {name} goes to sleep.",
        f"at night {he} is tired and goes to bed.",
        f"late at night {name} falls asleep.",
    ]))
    return sentences


def story_document(rng: random.Random) -> list[str]:
    """One document: the introduction, then one to three consecutive days."""
    name = rng.choice(NAMES)
    who = {"name": name, "job": rng.choice(JOBS), "town": rng.choice(TOWNS)}
    job, town = who["job"], who["town"]
    he = _pronoun(name)
    sentences = [rng.choice([
        f"{name} is a {job.name} who lives in {town}.",
        f"in the town of {town} there lives a {job.name} called {name}.",
        f"this is the story of {name}, the {job.name} of {town}.",
    ])]
    if rng.random() < 0.5:
        sentences.append(rng.choice([
            f"{he} has worked at the {job.place} for {rng.choice(NUMBERS)} years.",
            f"every day {he} {job.verb} {rng.choice(job.goods)} for the {job.customers}.",
        ]))
    first = rng.randrange(len(DAYS))
    for offset in range(rng.choice((1, 1, 2, 3))):
        day = DAYS[(first + offset) % len(DAYS)]
        sentences.extend(_day(rng, who, day, first_day=offset == 0))
    sentences.append(rng.choice([
        f"that is the end of the story of {name}.",
        f"and so the week of {name} the {job.name} ends.",
        f"the people of {town} are glad to have {name}.",
    ]))
    return sentences


def story_documents(count: int, seed: int) -> Iterator[list[str]]:
    rng = random.Random(seed)
    for _ in range(count):
        yield story_document(rng)


def write_corpus(path: str | os.PathLike, documents: int, seed: int) -> dict:
    """Writes `documents` stories (one sentence a line, a blank line between documents)
    to `path`; returns counts."""
    sentences = 0
    with open(path, "w", encoding="utf-8") as f:
        for index, document in enumerate(story_documents(documents, seed)):
            if index:
                f.write("\n")
            f.write("\n".join(document) + "\n")
            sentences += len(document)
    return {"documents": documents, "sentences": sentences,
            "bytes": os.path.getsize(path)}


# ------------------------------------------------------------------------ reviews
def review_example(rng: random.Random) -> tuple[str, int]:
    """One review and its label (1 positive, 0 negative)."""
    job = rng.choice(JOBS)
    goods = rng.choice(job.goods)
    name, town = rng.choice(NAMES), rng.choice(TOWNS)
    opinion, positive = _opinion(rng)
    where = rng.choice([f"from the {job.place}", f"from {name}'s {job.place}",
                        f"made by {name}", f"from the market in {town}", f"{name} sold"])
    sentence = rng.choice([
        f"the {goods} {where} were {opinion}.",
        f"i think the {goods} {where} are {opinion}.",
        f"on {rng.choice(DAYS)} i bought {rng.choice(NUMBERS)} {goods} and they were "
        f"{opinion}.",
        f"my friend says the {goods} {where} are {opinion}.",
        f"honestly, the {goods} {where} were {opinion}.",
        f"we visited the {job.place} in {town}: the {goods} were {opinion}.",
    ])
    return sentence, int(positive)


def review_examples(count: int, seed: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [review_example(rng) for _ in range(count)]


def write_sst2(data_dir: str | os.PathLike, *, train: int, dev: int, test: int,
               seed: int) -> dict:
    """`<data_dir>/SST-2/{train,dev,test}.tsv` in the GLUE layout; returns counts.
    The three splits come from independent streams of the same seed."""
    folder = os.path.join(data_dir, "SST-2")
    os.makedirs(folder, exist_ok=True)
    splits = {"train": review_examples(train, seed), "dev": review_examples(dev, seed + 1),
              "test": review_examples(test, seed + 2)}
    for split, rows in splits.items():
        if split == "test":
            lines = ["index\tsentence"] + [f"{i}\t{s}" for i, (s, _) in enumerate(rows)]
        else:
            lines = ["sentence\tlabel"] + [f"{s}\t{label}" for s, label in rows]
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return {split: len(rows) for split, rows in splits.items()}
