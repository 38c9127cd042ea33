"""`python -m minitx ...` is the `minitx` command."""

from minitx.tui.cli.main import main

if __name__ == "__main__":
    main(prog_name="minitx")
