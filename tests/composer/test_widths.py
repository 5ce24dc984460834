"""composer.widths: a preset's widths scaled to another d_model, and the NAME:dD presets that name them."""

import pytest

from composer.accounting import non_embedding_params
from composer.errors import ConfigError
from composer.presets import get_preset, scaled_name
from composer.widths import scale_widths, width_quantum


def test_every_width_follows_d_model_in_the_kernels_steps():
    demo = get_preset("demo-4m").arch  # d 192, 6 heads of 32 in 2 key/value groups, ffn 768
    wide = scale_widths(demo, 288)
    assert (wide.d_model, wide.head_dim, wide.n_kv_heads, wide.n_heads, wide.ffn_dim) == (288, 32, 3, 9, 1152)
    thin = scale_widths(demo, 96)
    assert (thin.n_kv_heads, thin.n_heads, thin.ffn_dim) == (1, 3, 384)  # the query group (3) is kept
    one_b = get_preset("llama-3.2-1b").arch
    assert width_quantum(one_b) == 64 and width_quantum(demo) == 8
    assert scale_widths(one_b, 1536).n_heads == 24 and scale_widths(one_b, 1536).ffn_dim == 6144
    assert scale_widths(demo, 192) is demo


def test_a_width_off_the_quantum_is_refused_with_the_step():
    with pytest.raises(ConfigError, match="multiple of 64"):
        scale_widths(get_preset("llama-3.2-1b").arch, 2000)


def test_a_scaled_preset_is_a_preset_every_command_takes():
    preset = get_preset("demo-4m:d280")
    assert preset.arch.d_model == 280 and preset.arch.vocab_size == 512
    assert non_embedding_params(preset.arch) > non_embedding_params(get_preset("demo-4m").arch)
    assert scaled_name("demo-4m", 280) == "demo-4m:d280" and scaled_name("demo-4m", 192) == "demo-4m"
    with pytest.raises(ConfigError, match="NAME:dD"):
        get_preset("nope:d256")


def test_a_scaled_preset_rescales_to_a_name_it_can_read_again():
    """Growth to a target named ``NAME:dD`` (the equal-cost 4x check's ``demo-4m:d384``) names its widths once
    scaled: ``demo-4m:d384:d400`` was no preset, and every run of such a target failed."""
    name = scaled_name("demo-4m:d384", 400)
    assert name == "demo-4m:d400"
    assert get_preset(name).arch == scale_widths(get_preset("demo-4m:d384").arch, 400)
    assert scaled_name("demo-4m:d384", 384) == "demo-4m:d384" and scaled_name("demo-4m:d384", 192) == "demo-4m"
