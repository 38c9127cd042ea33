import pytest

from minitx.core.config import ModelConfig, TrainConfig, recipe


def test_default_model_config_is_the_reference_model():
    cfg = ModelConfig()
    assert (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.n_encoder_layers, cfg.n_decoder_layers) == (
        64, 4, 256, 2, 2)
    assert (cfg.dropout, cfg.max_len, cfg.norm, cfg.activation, cfg.d_k) == (0.1, 64, "post", "relu", 16)


def test_component_switches_default_to_the_reference_parts():
    cfg = ModelConfig()
    assert (cfg.norm_kind, cfg.position_encoding, cfg.kv_heads) == ("layer", "sinusoidal", 4)
    assert ModelConfig(n_heads=8).kv_heads == 8  # K/V heads follow the heads unless given
    assert ModelConfig(n_heads=8, kv_heads=2).kv_heads == 2


def test_the_modern_recipe_is_the_fast_recipe_with_every_modern_part():
    modern, fast = recipe("modern"), recipe("fast")
    assert modern.train == fast.train
    cfg = modern.model
    assert (cfg.norm, cfg.norm_kind, cfg.position_encoding, cfg.activation, cfg.kv_heads) == (
        "pre", "rms", "rope", "swiglu", 2)
    assert cfg.replace(norm="post", norm_kind="layer", position_encoding="sinusoidal",
                       activation="relu", kv_heads=4) == fast.model


def test_pre_norm_defaults_to_gelu():
    assert ModelConfig(norm="pre").activation == "gelu"
    assert ModelConfig(norm="pre", activation="relu").activation == "relu"


def test_default_train_config_is_the_reference_recipe():
    cfg = recipe("reference").train
    assert (cfg.lr, cfg.beta1, cfg.beta2, cfg.eps) == (1e-3, 0.9, 0.98, 1e-9)
    assert (cfg.warmup, cfg.clip_grad_norm, cfg.batch_size, cfg.steps) == (400, 1.0, 64, 3000)


@pytest.mark.parametrize("cls", [ModelConfig, TrainConfig])
def test_configs_round_trip_through_a_plain_dict(cls):
    cfg = cls()
    data = cfg.to_dict()
    assert all(isinstance(v, (int, float, str, bool)) for v in data.values())
    assert cls.from_dict(data) == cfg


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"d_model": 63, "n_heads": 2}, "d_model"),  # an odd width not divisible by heads
        ({"decoder_d_ff": -1}, "decoder_d_ff"),
        ({"d_model": 64, "n_heads": 5}, "d_model"),  # not divisible by heads
        ({"d_ff": 0}, "d_ff"),
        ({"n_encoder_layers": -1}, "n_encoder_layers"),
        ({"norm": "middle"}, "norm"),
        ({"activation": "tanh"}, "activation"),
        ({"attention": "flash"}, "attention"),
        ({"dropout": 1.5}, "dropout"),
        ({"norm_kind": "batch"}, "norm_kind"),
        ({"position_encoding": "alibi"}, "position_encoding"),
        ({"n_heads": 4, "kv_heads": 3}, "kv_heads"),  # 4 query heads do not split into 3 groups
        ({"n_heads": 4, "kv_heads": 8}, "kv_heads"),
        ({"kv_heads": -1}, "kv_heads"),
        ({"kv_heads": True}, "kv_heads"),
        ({"d_model": 12, "n_heads": 4, "position_encoding": "rope"}, "position_encoding"),  # d_k 3
    ],
)
def test_invalid_model_config_names_the_field(changes, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        ModelConfig(**changes)


@pytest.mark.parametrize(
    "changes, field",
    [({"lr": 0}, "lr"), ({"steps": 0}, "steps"), ({"task": "juggle"}, "task"),
     ({"device": "tpu"}, "device"), ({"min_source_len": 8, "max_source_len": 4}, "min_source_len"),
     ({"warmup": -1}, "warmup"), ({"bug": "typo"}, "bug"), ({"length_power": -1}, "length_power"),
     ({"length_power": 9}, "length_power"), ({"length_power": True}, "length_power")],
)
def test_invalid_train_config_names_the_field(changes, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        TrainConfig(**changes)


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        ModelConfig.from_dict({"d_model": 64, "wings": 2})


def test_learning_rate_warms_up_linearly_then_stays_flat():
    cfg = TrainConfig()
    assert cfg.lr_at(1) == pytest.approx(1e-3 / 400)
    assert cfg.lr_at(200) == pytest.approx(0.5e-3)
    assert cfg.lr_at(400) == pytest.approx(1e-3)
    assert cfg.lr_at(3000) == pytest.approx(1e-3)


def test_default_recipe_trains_the_same_235981_parameter_model():
    from minitx.core.config import DEFAULT_RECIPE
    from minitx.core.model.transformer import Seq2Seq, parameter_breakdown

    fast = recipe(DEFAULT_RECIPE)
    assert parameter_breakdown(Seq2Seq(fast.model))["total"] == 235981
    assert fast.model.norm == "post"


def test_unknown_recipe_is_a_clear_error():
    with pytest.raises(ValueError, match="^recipe:"):
        recipe("turbo")


def test_cosine_schedule_decays_to_a_tenth_after_warmup():
    cfg = TrainConfig(lr=3e-3, warmup=100, schedule="cosine", steps=800)
    assert cfg.lr_at(100) == pytest.approx(3e-3)
    assert cfg.lr_at(450) == pytest.approx(3e-3 * 0.55)
    assert cfg.lr_at(800) == pytest.approx(3e-4)


def test_an_infinite_learning_rate_is_refused():
    with pytest.raises(ValueError, match="^lr: must be a positive finite number"):
        TrainConfig(lr=float("inf"))


def test_a_training_config_of_an_earlier_release_reads_its_source_lengths_by_their_new_names():
    old = {**TrainConfig().to_dict(), "min_len": 3, "max_len": 7}
    del old["min_source_len"], old["max_source_len"]
    cfg = TrainConfig.from_dict(old)
    assert (cfg.min_source_len, cfg.max_source_len) == (3, 7)
    assert "max_len" not in cfg.to_dict()  # ModelConfig.max_len alone means positions now
