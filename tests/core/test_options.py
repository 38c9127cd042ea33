"""Named values -> configs: the one conversion the CLI and the app's Train form share."""

import pytest

from minitx.core.config import ModelConfig, TrainConfig, recipe
from minitx.core.options import OptionError, configs_from_options, option_names, parse_lengths

BASE = (ModelConfig(), TrainConfig())


def test_values_not_given_keep_the_base_configs():
    model_cfg, train_cfg = configs_from_options(*BASE, {"steps": None, "heads": None})
    assert (model_cfg, train_cfg) == BASE


def test_layers_sets_both_stacks_unless_one_is_named():
    model_cfg, _ = configs_from_options(*BASE, {"layers": 3})
    assert (model_cfg.n_encoder_layers, model_cfg.n_decoder_layers) == (3, 3)
    model_cfg, _ = configs_from_options(*BASE, {"layers": 3, "decoder_layers": 1})
    assert (model_cfg.n_encoder_layers, model_cfg.n_decoder_layers) == (3, 1)


def test_a_new_width_keeps_the_feed_forward_ratio_unless_d_ff_is_given():
    assert configs_from_options(*BASE, {"d_model": 32})[0].d_ff == 128
    assert configs_from_options(*BASE, {"d_model": 32, "d_ff": 50})[0].d_ff == 50


def test_longer_lengths_grow_the_positional_table_unless_positions_is_given():
    model_cfg, train_cfg = configs_from_options(*BASE, {"lengths": "5-80"})
    assert (train_cfg.min_source_len, train_cfg.max_source_len, model_cfg.max_len) == (5, 80, 82)
    assert configs_from_options(*BASE, {"lengths": "4-8", "positions": 20})[0].max_len == 20


def test_a_norm_without_an_activation_takes_the_norms_own_default():
    pre, _ = configs_from_options(ModelConfig(activation="relu"), TrainConfig(), {"norm": "pre"})
    assert pre.activation == "gelu"


def test_the_component_options_set_their_fields():
    model_cfg, _ = configs_from_options(*BASE, {"norm_kind": "rms", "position_encoding": "rope",
                                                "activation": "swiglu", "kv_heads": 2})
    assert (model_cfg.norm_kind, model_cfg.position_encoding, model_cfg.activation,
            model_cfg.kv_heads) == ("rms", "rope", "swiglu", 2)


def test_new_heads_keep_the_query_heads_per_kv_head_unless_kv_heads_is_given():
    assert configs_from_options(*BASE, {"heads": 8})[0].kv_heads == 8  # multi-head stays so
    modern = recipe("modern").model  # 4 heads sharing 2 K/V heads
    assert configs_from_options(modern, TrainConfig(), {"heads": 8})[0].kv_heads == 4
    assert configs_from_options(modern, TrainConfig(), {"heads": 8, "kv_heads": 1})[0].kv_heads == 1
    with pytest.raises(OptionError) as error:
        configs_from_options(modern, TrainConfig(), {"heads": 1})
    assert error.value.option == "kv_heads"


def test_bug_none_means_no_bug():
    _, train_cfg = configs_from_options(ModelConfig(), TrainConfig(bug="no-warmup"), {"bug": "none"})
    assert train_cfg.bug == ""


def test_every_train_config_field_but_the_lengths_and_probes_has_an_option_of_its_own_name():
    import dataclasses

    names = set(option_names())
    assert {f.name for f in dataclasses.fields(TrainConfig)} - names == {"min_source_len", "max_source_len",
                                                                          "probes"}


def test_several_probe_sources_are_a_fine_tunes_probes_and_refused_from_scratch():
    base = TrainConfig(task="data", data="pairs.tsv", init="reverse")
    _, train = configs_from_options(ModelConfig(), base, {"probe_source": ("3 1 4", "2 7")})
    assert train.probes == ("3 1 4", "2 7") and train.probe_source == ""
    _, train = configs_from_options(ModelConfig(), TrainConfig(), {"probe_source": ("3 1 4",)})
    assert train.probe_source == "3 1 4" and train.probes == ()
    with pytest.raises(OptionError, match="several are for a fine-tune") as e:
        configs_from_options(ModelConfig(), TrainConfig(), {"probe_source": ("3 1 4", "2 7")})
    assert e.value.option == "probe_source"


@pytest.mark.parametrize("options, blamed", [
    ({"heads": 5}, "d_model"),  # 64 is not divisible by 5: core blames the width
    ({"layers": 0}, "layers"),
    ({"lengths": "9-3"}, "lengths"),
    ({"lengths": "many"}, "lengths"),
    ({"lr": -1.0}, "lr"),
    ({"batch_size": 0}, "batch_size"),
    ({"norm": "middle"}, "norm"),
    ({"position_encoding": "alibi"}, "position_encoding"),
    ({"kv_heads": 3}, "kv_heads"),
    ({"task": "juggle"}, "task"),
    ({"positions": 5, "lengths": "4-10"}, "positions"),
    ({"colour": "red"}, "colour"),
])
def test_a_bad_value_is_an_option_error_naming_the_option(options, blamed):
    with pytest.raises(OptionError) as error:
        configs_from_options(*BASE, options)
    assert error.value.option == blamed and error.value.message


def test_recipes_are_bases_like_any_other():
    fast = recipe("fast")
    model_cfg, train_cfg = configs_from_options(fast.model, fast.train, {"steps": 10})
    assert train_cfg.steps == 10 and train_cfg.schedule == fast.train.schedule
    assert model_cfg == fast.model


@pytest.mark.parametrize("text, expected", [("4-10", (4, 10)), ("7", (7, 7)), (" 3 - 5 ", (3, 5))])
def test_lengths_read_as_min_max(text, expected):
    assert parse_lengths(text) == expected
