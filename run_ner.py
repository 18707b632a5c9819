"""Fine-tunes ALBERT for token classification (NER) on CoNLL or CLUENER files.

The program is `albert_tf/scripts/run_ner.py`, installed as `albert-run-ner`;
`python run_ner.py --help` lists its flags.
"""

from albert_tf.scripts.run_ner import run

if __name__ == "__main__":
    run()
