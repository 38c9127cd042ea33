"""Every choice the command line offers for a model, task or run setting is core's own list of
values, so an option can never offer a value core refuses, or miss one it accepts."""

from __future__ import annotations

import click

from minitx.core import checkpoint, config
from minitx.core.data.generation import EARLY_STOPPING_NAMES
from minitx.core.data.tasks import TASKS
from minitx.core.importing.importer import LAYOUTS
from minitx.core.interp import word_alignment
from minitx.core.interp.interventions import ABLATIONS
from minitx.core.interp.source_attribution import FILLERS, METHODS
from minitx.tui.cli.main import main

CORE_LISTS = {
    "--norm": config.NORMS, "--norm-kind": config.NORM_KINDS, "--activation": config.ACTIVATIONS,
    "--position-encoding": config.POSITION_ENCODINGS, "--attention": config.ATTENTIONS,
    "--tokens": config.TOKENISATIONS, "--expect": [e for e in config.EXPECTATIONS if e],
    "--schedule": config.SCHEDULES, "--device": config.DEVICES, "--ablate-kind": ABLATIONS,
    "--ablation": ABLATIONS, "--dtype": list(checkpoint.FLOAT_DTYPES), "--task": list(TASKS),
    "--recipe": list(config.RECIPES), "--bug": ["none", *config.BUGS], "--layout": list(LAYOUTS),
    "--optimizer": config.OPTIMIZERS, "--keep-best": list(config.KEEP_BEST), "--precision": config.PRECISIONS,
    "--early-stopping": list(EARLY_STOPPING_NAMES),
    "--method": METHODS, "--occlude-with": FILLERS,  # attribute's (patch's --method is its own)
}
# Where one option name means another list in some commands: (command, option) -> core's list.
COMMAND_LISTS = {("align", "--method"): word_alignment.METHODS,
                 ("decode", "--method"): word_alignment.METHODS,
                 ("align", "--sym"): word_alignment.SYMMETRIZATIONS}
# Choices that are the command line's own: how to print or draw, not what a model is.
CLI_ONLY = {("curves", "--chart"), ("curves", "--x"), ("curves", "--scale"), ("curves", "--format"),
            ("export", "--format"), ("heads", "--kind"), ("patch", "--method"),
            ("align", "--heads")}


def choice_options():
    for name, command in main.commands.items():
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, click.Choice):
                yield name, max(param.opts, key=len), list(param.type.choices)


def test_each_choice_of_every_command_is_the_list_core_defines():
    seen = set()
    for command, option, choices in choice_options():
        if (command, option) in CLI_ONLY:
            continue
        if (command, option) in COMMAND_LISTS:
            assert choices == list(COMMAND_LISTS[command, option]), (command, option)
            continue
        assert option in CORE_LISTS, f"{command} {option}: which core list are its choices?"
        assert choices == list(CORE_LISTS[option]), (command, option)
        seen.add(option)
    assert {"--norm", "--device", "--task", "--ablate-kind", "--dtype"} <= seen


def test_heads_kind_is_the_ablation_kind():
    (choices,) = [c for command, option, c in choice_options() if (command, option) == ("heads", "--kind")]
    assert choices == list(ABLATIONS)
