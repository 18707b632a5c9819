"""Training for albert_tf: optimizers, objectives, distribution and the training loop."""
