"""model/hf.py against the real transformers GPT2LMHeadModel / OpenAIGPTLMHeadModel (CPU, fp32)."""

from __future__ import annotations

import json
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")

from model.gpt import GPT, GPTConfig  # noqa: E402
from model.hf import (  # noqa: E402
    HFCheckpointError,
    from_hf_state_dict,
    hf_config_dict,
    load_hf_dir,
    save_hf_dir,
    to_hf_state_dict,
)

TINY = dict(n_layer=2, n_head=4, n_embd=32, block_size=24, vocab_size=301)
TOLERANCE = 1e-4  # spec: same logits, max abs diff <= 1e-4 in fp32


@pytest.fixture(autouse=True, scope="module")
def quiet_and_one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    yield
    torch.set_num_threads(before)


def ours(arch="gpt2", seed=0, **overrides) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(arch=arch, **{**TINY, **overrides})).eval()
    with torch.no_grad():  # non-trivial layer-norm gains and biases
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    return model


def hf_model(config: GPTConfig):
    d = {k: v for k, v in hf_config_dict(config).items() if k not in ("architectures", "model_type", "dtype")}
    if config.arch == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(**d)).eval()
    return transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(**d)).eval()


def batch(vocab=301, seed=3):
    return torch.randint(0, vocab, (2, 24), generator=torch.Generator().manual_seed(seed))


def assert_same_outputs(model: GPT, hf, x):
    with torch.no_grad():
        out = hf(input_ids=x, labels=x)
        logits, _ = model(x)
        _, loss = model(x[:, :-1], x[:, 1:])  # HF shifts the labels inside
    assert (logits - out.logits).abs().max().item() <= TOLERANCE
    assert abs(loss.item() - out.loss.item()) <= 1e-5


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_our_weights_in_transformers_give_the_same_logits_and_loss(arch):
    model = ours(arch)
    hf = hf_model(model.config)
    result = hf.load_state_dict(to_hf_state_dict(model), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    assert hf.num_parameters() == model.num_parameters()
    assert_same_outputs(model, hf, batch())


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_transformers_weights_in_ours_give_the_same_logits_and_loss(arch):
    config = GPTConfig(arch=arch, **TINY)
    torch.manual_seed(7)
    hf = hf_model(config)  # HF's own initialisation
    with torch.no_grad():
        for p in hf.parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    model = from_hf_state_dict(hf.state_dict(), config).eval()
    assert_same_outputs(model, hf, batch())


def test_state_dict_without_prefix_with_mask_buffers_and_inferred_heads():
    config = GPTConfig(n_layer=1, n_head=12, n_embd=768, block_size=8, vocab_size=64)
    reference = ours(**{**config.to_dict(), "arch": "gpt2"})
    state = to_hf_state_dict(reference)
    bare = {k.removeprefix("transformer."): v for k, v in state.items() if k != "lm_head.weight"}  # GPT2Model style
    bare["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 8, 8))  # old transformers saved these buffers
    bare["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    model = from_hf_state_dict(bare)  # no config: 768 wide -> 12 heads
    assert model.config.n_head == 12 and model.config.vocab_size == 64 and model.config.block_size == 8
    x = batch(vocab=64)[:, :8]
    assert torch.equal(model(x)[0], reference(x)[0])


def test_bias_free_model_exports_zero_biases():
    model = ours(bias=False)
    state = to_hf_state_dict(model)
    assert not state["transformer.h.0.mlp.c_fc.bias"].any()
    hf = hf_model(model.config)
    hf.load_state_dict(state, strict=True)
    with torch.no_grad():
        assert (model(batch())[0] - hf(input_ids=batch()).logits).abs().max().item() <= TOLERANCE


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_saved_folder_loads_in_transformers_and_back(tmp_path, arch):
    model = ours(arch)
    vocab = tmp_path / "vocab.json"
    vocab.write_text("{}")
    folder = save_hf_dir(model, tmp_path / "export", tokenizer_files=[vocab])
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors", "vocab.json"]
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["model_type"] == {"gpt2": "gpt2", "gpt1": "openai-gpt"}[arch]
    assert config["eos_token_id"] == 300  # vocabulary without GPT-2's 50256: the last id
    auto = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    expected = {"gpt2": "GPT2LMHeadModel", "gpt1": "OpenAIGPTLMHeadModel"}[arch]
    assert type(auto).__name__ == expected
    assert_same_outputs(model, auto, batch())
    again = load_hf_dir(folder)
    assert again.config == model.config
    assert torch.equal(again(batch())[0], model(batch())[0])


def test_gpt2_folder_with_from_pretrained_and_overwrite(tmp_path):
    first, second = ours(seed=0), ours(seed=1)
    save_hf_dir(first, tmp_path / "m")
    save_hf_dir(second, tmp_path / "m")  # replaces the old folder whole
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "m").eval()
    assert_same_outputs(second, hf, batch())
    assert sorted(os.listdir(tmp_path)) == ["m"]  # no temporary folders left behind
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(tmp_path / "m").st_mode & 0o777 == 0o777 & ~mask  # readable like any new folder
    assert os.stat(tmp_path / "m" / "model.safetensors").st_mode & 0o777 == 0o666 & ~mask


def test_hf_config_dict_fields():
    config = GPTConfig.named("gpt2")
    d = hf_config_dict(config)
    assert d["architectures"] == ["GPT2LMHeadModel"] and d["model_type"] == "gpt2"
    assert (d["n_positions"], d["n_ctx"], d["n_embd"], d["n_layer"], d["n_head"], d["vocab_size"]) == \
        (1024, 1024, 768, 12, 12, 50257)
    assert d["activation_function"] == "gelu_new" and d["tie_word_embeddings"] is True
    assert d["bos_token_id"] == d["eos_token_id"] == 50256
    assert hf_config_dict(config, eot_token_id=7)["eos_token_id"] == 7
    with pytest.raises(ValueError, match="outside the vocabulary"):
        hf_config_dict(config, eot_token_id=50257)


def test_pytorch_bin_is_read_weights_only(tmp_path):
    model = ours()
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(hf_config_dict(model.config)))
    torch.save(to_hf_state_dict(model), folder / "pytorch_model.bin")
    assert torch.equal(load_hf_dir(folder)(batch())[0], model(batch())[0])
    torch.save({"weights": to_hf_state_dict(model), "hook": Exploding()}, folder / "pytorch_model.bin")
    with pytest.raises(HFCheckpointError, match="weights-only"):
        load_hf_dir(folder)


class Exploding:
    def __reduce__(self):  # an arbitrary pickle would run this on load
        return (os.system, ("echo this must not run",))


def test_bad_folders_give_clear_errors(tmp_path):
    model = ours()
    folder = save_hf_dir(model, tmp_path / "m")
    weights = os.path.join(folder, "model.safetensors")
    data = open(weights, "rb").read()
    with open(weights, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(HFCheckpointError, match="safetensors"):
        load_hf_dir(folder)
    os.remove(weights)
    with pytest.raises(HFCheckpointError, match="no weights found"):
        load_hf_dir(folder)
    os.remove(os.path.join(folder, "config.json"))
    with pytest.raises(HFCheckpointError, match="config.json"):
        load_hf_dir(folder)
    with pytest.raises(HFCheckpointError, match="not a folder"):
        load_hf_dir(tmp_path / "absent")
    save_hf_dir(model, tmp_path / "bad-json")
    (tmp_path / "bad-json" / "config.json").write_text("{not json")
    with pytest.raises(HFCheckpointError, match="not valid JSON"):
        load_hf_dir(tmp_path / "bad-json")


def test_mismatched_or_untied_state_dicts_are_refused():
    model = ours()
    state = to_hf_state_dict(model)
    with pytest.raises(HFCheckpointError, match="missing"):
        from_hf_state_dict(state, GPTConfig(**{**TINY, "n_layer": 3}))
    untied = dict(state, **{"lm_head.weight": state["lm_head.weight"] + 1})
    with pytest.raises(HFCheckpointError, match="untied"):
        from_hf_state_dict(untied, model.config)
    with pytest.raises(HFCheckpointError, match="token embedding"):
        from_hf_state_dict({"foo": torch.zeros(1)}, model.config)
    with pytest.raises(HFCheckpointError, match="shape"):
        from_hf_state_dict(state, GPTConfig(**{**TINY, "vocab_size": 300}))
    with pytest.raises(HFCheckpointError, match="heads"):
        from_hf_state_dict(state)  # width 32 is no published size: the head count is unknown
