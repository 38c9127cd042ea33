"""The `minitx` subcommands, one module per family. Each module imports only Click at the top;
torch and core load inside the command, so `minitx --help` stays fast."""
