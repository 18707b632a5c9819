"""The library behind the absl scripts (run_pretraining.py, run_classifier.py, ...)."""
