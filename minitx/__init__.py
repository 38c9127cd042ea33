"""minitx: a small encoder-decoder Transformer to train, take apart and watch think in a terminal.

The installed distribution claims this one top-level name. Its rooms live at the top of the
repository and install beneath it: `minitx.core` (model, tasks, training; no UI),
`minitx.checkpoints` (bundled files, finding them) and `minitx.tui` (the CLI and the app).
"""

__version__ = "0.3.0"
