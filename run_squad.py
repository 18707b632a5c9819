"""Fine-tunes ALBERT on SQuAD v1.1 / v2.0 and predicts with the official scores.

The program is `albert_tf/scripts/run_squad.py`, installed as `albert-run-squad`;
`python run_squad.py --help` lists its flags.
"""

from albert_tf.scripts.run_squad import run

if __name__ == "__main__":
    run()
