"""minitx core: the model, tasks, training, decoding and checkpoint files. No UI imports here."""
