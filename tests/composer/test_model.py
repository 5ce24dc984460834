from __future__ import annotations

import pytest
import torch

from composer.model import IGNORE_INDEX, build_model
from composer.presets import get_preset


def test_changing_a_future_token_leaves_earlier_logits_unchanged():
    model = build_model(get_preset("tiny").arch.with_pattern("AAMMMM")).eval()
    ids = torch.randint(0, 256, (2, 24))
    changed = ids.clone()
    changed[:, 15] = (changed[:, 15] + 1) % 256
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    torch.testing.assert_close(a[:, :15], b[:, :15])
    assert not torch.allclose(a[:, 15:], b[:, 15:])


def test_loss_is_cross_entropy_and_ignores_masked_targets():
    model = build_model(get_preset("tiny").arch)
    ids = torch.randint(0, 256, (2, 9))
    targets = ids[:, 1:].clone()
    targets[0, :4] = IGNORE_INDEX
    out = model(ids[:, :-1], targets=targets)
    keep = targets != IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(out.logits[keep], targets[keep])
    torch.testing.assert_close(out.loss, expected)
    assert model(ids).loss is None


def test_tied_and_untied_heads():
    tied = build_model(get_preset("tiny").arch)
    assert tied.output is None
    untied = build_model(get_preset("tiny").arch.replace(tie_embeddings=False))
    assert untied.output is not None and untied.output.weight.data_ptr() != untied.tok_embeddings.weight.data_ptr()


def test_no_weight_decay_groups_cover_every_parameter_once():
    model = build_model(get_preset("tiny").arch.with_pattern("AMM"))
    groups = model.parameter_groups(weight_decay=0.1)
    grouped = [p for g in groups for p in g["params"]]
    assert len(grouped) == len(list(model.parameters())) == len({id(p) for p in grouped})
    no_decay = {id(p) for p in groups[1]["params"]}
    names = {name for name, p in model.named_parameters() if id(p) in no_decay}
    assert names == {"norm.weight", "layers.0.norm.weight", "layers.1.norm.weight", "layers.2.norm.weight"}
    assert groups[1]["weight_decay"] == 0.0


def test_residual_branches_start_small():
    """Output projections use std / sqrt(n_layers) so the residual stream does not grow with depth."""
    model = build_model(get_preset("tiny").arch.with_pattern("(AM)x8"))
    attention = model.layers[0].primitive
    assert attention.wo.weight.std() < 0.6 * attention.wqkv.weight.std()


def _copy_into_hf(model, hf_model):
    """Load our (AM)xN weights into Hugging Face's LlamaForCausalLM (fused projections split)."""
    arch = model.arch
    q_dim, kv_dim = arch.n_heads * arch.head_dim, arch.n_kv_heads * arch.head_dim
    state = {"model.embed_tokens.weight": model.tok_embeddings.weight, "model.norm.weight": model.norm.weight}
    for block in range(arch.n_layers // 2):
        attention, mlp = model.layers[2 * block], model.layers[2 * block + 1]
        q, k, v = attention.primitive.wqkv.weight.split((q_dim, kv_dim, kv_dim))
        gate, up = mlp.primitive.w13.weight.chunk(2)
        prefix = f"model.layers.{block}"
        state.update({
            f"{prefix}.input_layernorm.weight": attention.norm.weight,
            f"{prefix}.self_attn.q_proj.weight": q,
            f"{prefix}.self_attn.k_proj.weight": k,
            f"{prefix}.self_attn.v_proj.weight": v,
            f"{prefix}.self_attn.o_proj.weight": attention.primitive.wo.weight,
            f"{prefix}.post_attention_layernorm.weight": mlp.norm.weight,
            f"{prefix}.mlp.gate_proj.weight": gate,
            f"{prefix}.mlp.up_proj.weight": up,
            f"{prefix}.mlp.down_proj.weight": mlp.primitive.w2.weight,
        })
    if model.output is not None:
        state["lm_head.weight"] = model.output.weight
    missing, unexpected = hf_model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}


@pytest.mark.parametrize("tied", [True, False])
def test_llama_pattern_equals_transformers_llama(tied):
    """(AM)xN with Llama widths is Llama: same logits as Hugging Face's implementation, Llama-3 RoPE included."""
    transformers = pytest.importorskip("transformers")
    arch = get_preset("llama-3.2-1b").arch.replace(
        pattern="(AM)x2", d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=128, vocab_size=300,
        tie_embeddings=tied, max_seq_len=64,
    )
    model = build_model(arch).eval()
    scaling = arch.rope_scaling
    hf_config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, vocab_size=300, tie_word_embeddings=tied, rms_norm_eps=arch.norm_eps,
        max_position_embeddings=64, rope_theta=arch.rope_theta,
        rope_scaling={"rope_type": "llama3", "factor": scaling.factor, "low_freq_factor": scaling.low_freq_factor,
                      "high_freq_factor": scaling.high_freq_factor,
                      "original_max_position_embeddings": scaling.original_max_seq_len},
        attention_bias=False, mlp_bias=False,
    )
    hf_model = transformers.LlamaForCausalLM(hf_config).eval()
    with torch.no_grad():
        _copy_into_hf(model, hf_model)
        ids = torch.randint(0, 300, (2, 40))
        torch.testing.assert_close(model(ids).logits, hf_model(ids).logits, atol=2e-5, rtol=1e-4)


def test_dense_model_has_a_zero_aux_loss_and_an_unchanged_loss():
    """Without auxiliary losses ``loss`` is the cross-entropy itself; ``aux_loss`` is a zero tensor."""
    model = build_model(get_preset("tiny").arch.with_pattern("AMAM"))
    ids = torch.randint(0, 256, (2, 9))
    out = model(ids[:, :-1], targets=ids[:, 1:])
    assert out.loss is out.lm_loss and out.aux_loss.item() == 0.0 and not model.has_aux_loss
    no_targets = model(ids)
    assert no_targets.loss is None and no_targets.lm_loss is None
    logits, loss = out[:2]  # still unpacks like the two-field output
    assert logits is out.logits and loss is out.loss
