"""Hugging Face interop: our GPT weights to and from ``transformers`` checkpoints.

    GPT-2  <->  ``GPT2LMHeadModel``       (``transformer.wte``, ``transformer.wpe``, ``transformer.ln_f``)
    GPT-1  <->  ``OpenAIGPTLMHeadModel``  (``transformer.tokens_embed``, ``transformer.positions_embed``)

The block parameters share their names (``transformer.h.{i}.attn.c_attn.weight`` ...), but HF's
projections are ``Conv1D`` layers whose weight is ``[in, out]``: the transpose of our
``nn.Linear`` ``[out, in]``. The output layer is tied to the token embedding on both sides,
so ``lm_head.weight`` is written only into in-memory state dicts (``to_hf_state_dict``), not
into saved folders (as ``save_pretrained`` does), and is checked equal to the embedding
when read. Our token embedding's zero padding rows (vocabulary rounded up to a multiple
of 64) are dropped on export and added back on import.

A saved folder is what ``GPT2LMHeadModel.from_pretrained(folder)`` reads: ``config.json`` +
``model.safetensors`` (plus any tokenizer files given), written into a temporary sibling
folder and renamed into place, so a folder is either complete or absent. Loading reads
``model.safetensors`` (or a sharded ``model.safetensors.index.json``), else
``pytorch_model.bin`` through ``torch.load(weights_only=True)``, never an arbitrary pickle.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from common.errors import InputError
from model.gpt import GPT, INIT_STD, GPTConfig
from model.shapes import meta_gpt

CONFIG_NAME = "config.json"  # transformers' file names (transformers.utils.CONFIG_NAME ...)
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
TORCH_NAME = "pytorch_model.bin"
GPT2_EOT = 50256  # GPT-2's <|endoftext|> id, the last of its 50,257 tokens
HF_ARCH = {"gpt2": ("gpt2", "GPT2LMHeadModel"), "gpt1": ("openai-gpt", "OpenAIGPTLMHeadModel")}
_EMBEDDINGS = {  # our name -> HF name, per architecture
    "gpt2": {"transformer.wte.weight": "transformer.wte.weight", "transformer.wpe.weight": "transformer.wpe.weight"},
    "gpt1": {"transformer.wte.weight": "transformer.tokens_embed.weight",
             "transformer.wpe.weight": "transformer.positions_embed.weight"},
}
_CONV1D = re.compile(r"\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$")  # HF Conv1D weights: [in, out]
_BUFFERS = re.compile(r"\.attn\.(bias|masked_bias)$")  # causal-mask buffers some HF versions save
# width -> heads of the published sizes, used when a state dict comes without a config
_HEADS_BY_WIDTH = {768: 12, 1024: 16, 1280: 20, 1600: 25}


class HFCheckpointError(InputError):
    """A Hugging Face folder or state dict that cannot be read as a GPT-1/GPT-2 checkpoint."""


def _layer_param_names(config: GPTConfig) -> list[str]:
    """Our block parameter names (same in HF), in order."""
    names = []
    for i in range(config.n_layer):
        for module in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"):
            names.append(f"transformer.h.{i}.{module}.weight")
            names.append(f"transformer.h.{i}.{module}.bias")
    return names


def _cpu_copy(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to("cpu", copy=True, memory_format=torch.contiguous_format)


def to_hf_state_dict(model: GPT) -> dict[str, torch.Tensor]:
    """Our weights under ``GPT2LMHeadModel`` names (``OpenAIGPTLMHeadModel`` for GPT-1), fresh CPU tensors.

    Includes ``lm_head.weight`` (equal to the token embedding). A model built with
    ``bias=False`` is exported with zero biases, which computes the same function.
    """
    config = model.config
    ours = {k: v.detach() for k, v in model.state_dict().items()}
    out: dict[str, torch.Tensor] = {}
    out[_EMBEDDINGS[config.arch]["transformer.wpe.weight"]] = _cpu_copy(ours["transformer.wpe.weight"])
    out[_EMBEDDINGS[config.arch]["transformer.wte.weight"]] = _cpu_copy(ours["transformer.wte.weight"][: config.vocab_size])
    names = _layer_param_names(config)
    if config.arch == "gpt2":
        names += ["transformer.ln_f.weight", "transformer.ln_f.bias"]
    for name in names:
        if name in ours:
            tensor = ours[name]
            out[name] = _cpu_copy(tensor.t() if _CONV1D.search(name) else tensor)
        else:  # a bias of a bias=False model
            weight = ours[name[: -len("bias")] + "weight"]
            out[name] = torch.zeros(weight.shape[0], dtype=weight.dtype)  # on the CPU, like the rest
    out["lm_head.weight"] = out[_EMBEDDINGS[config.arch]["transformer.wte.weight"]].clone()
    return out


def _infer_config(state: Mapping[str, torch.Tensor], arch: str) -> GPTConfig:
    wte = state[_EMBEDDINGS[arch]["transformer.wte.weight"]]
    wpe = state[_EMBEDDINGS[arch]["transformer.wpe.weight"]]
    layers = {int(m.group(1)) for k in state if (m := re.match(r"transformer\.h\.(\d+)\.", k))}
    n_embd = int(wte.shape[1])
    if n_embd not in _HEADS_BY_WIDTH:
        raise HFCheckpointError(f"cannot infer the number of heads for width {n_embd} (known widths: "
                                f"{sorted(_HEADS_BY_WIDTH)}); pass config=GPTConfig(...)")
    return GPTConfig(arch=arch, n_layer=max(layers) + 1 if layers else 0, n_head=_HEADS_BY_WIDTH[n_embd],
                     n_embd=n_embd, block_size=int(wpe.shape[0]), vocab_size=int(wte.shape[0]))


def from_hf_state_dict(state_dict: Mapping[str, torch.Tensor], config: GPTConfig | None = None) -> GPT:
    """A ``GPT`` holding the weights of a ``GPT2LMHeadModel`` / ``GPT2Model`` (or OpenAI GPT) state dict.

    Keys may carry the ``transformer.`` prefix or not; ``lm_head.weight`` and HF's attention
    mask buffers are accepted. Without ``config`` the sizes come from the tensors and the
    head count from the published size of that width (768 -> 12 ... 1600 -> 25).
    """
    state: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        if _BUFFERS.search(key):
            continue
        if not key.startswith(("transformer.", "lm_head.")):
            key = "transformer." + key
        state[key] = value
    if "transformer.tokens_embed.weight" in state:
        arch = "gpt1"
    elif "transformer.wte.weight" in state:
        arch = "gpt2"
    else:
        raise HFCheckpointError("state dict has no token embedding (neither transformer.wte.weight nor "
                                "transformer.tokens_embed.weight): not a GPT-2 / OpenAI GPT checkpoint")
    if config is None:
        config = _infer_config(state, arch)
    elif config.arch != arch:
        raise HFCheckpointError(f"config.arch is {config.arch!r} but the state dict is a {arch} checkpoint")
    names = dict(_EMBEDDINGS[arch])
    names.update({n: n for n in _layer_param_names(config)})
    if arch == "gpt2":
        names.update({n: n for n in ("transformer.ln_f.weight", "transformer.ln_f.bias")})
    expected = set(names.values()) | {"lm_head.weight"}
    missing = sorted(set(names.values()) - set(state))
    unexpected = sorted(set(state) - expected)
    if missing or unexpected:
        raise HFCheckpointError(f"state dict does not match the {arch} config "
                                f"(n_layer={config.n_layer}): missing {missing[:6]}{' ...' if len(missing) > 6 else ''}, "
                                f"unexpected {unexpected[:6]}{' ...' if len(unexpected) > 6 else ''}")
    wte = state[names["transformer.wte.weight"]]
    if "lm_head.weight" in state and not torch.equal(state["lm_head.weight"], wte):
        raise HFCheckpointError("lm_head.weight differs from the token embedding: untied output layers are not supported")

    model = meta_gpt(config)
    ours = {}
    own_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    for our_name, hf_name in names.items():
        tensor = state[hf_name]
        if not isinstance(tensor, torch.Tensor):
            raise HFCheckpointError(f"{hf_name}: expected a tensor, got {type(tensor).__name__}")
        tensor = tensor.detach().to(torch.float32) if not tensor.is_floating_point() else tensor.detach()
        if _CONV1D.search(our_name):
            tensor = tensor.t()
        if our_name == "transformer.wte.weight":
            if tensor.shape != (config.vocab_size, config.n_embd):
                raise HFCheckpointError(f"{hf_name} has shape {tuple(tensor.shape)}, expected "
                                        f"({config.vocab_size}, {config.n_embd}) for vocab_size={config.vocab_size}")
            pad = torch.zeros(config.padded_vocab_size - config.vocab_size, config.n_embd, dtype=tensor.dtype)
            tensor = torch.cat([tensor, pad])
        if our_name not in own_shapes:  # biases of a bias=False config: they must be zero
            if tensor.count_nonzero():
                raise HFCheckpointError(f"{hf_name} is non-zero but the config has bias=False")
            continue
        if tuple(tensor.shape) != own_shapes[our_name]:
            raise HFCheckpointError(f"{hf_name} has shape {tuple(state[hf_name].shape)}, which does not fit "
                                    f"{our_name} {own_shapes[our_name]} of the config")
        ours[our_name] = tensor.contiguous()
    model.load_state_dict(ours, assign=True)
    return model


def hf_config_dict(config: GPTConfig, eot_token_id: int | None = None, dtype: str = "float32") -> dict:
    """A ``config.json`` for ``GPT2Config`` (``OpenAIGPTConfig`` for GPT-1) describing the same model.

    ``bos_token_id``/``eos_token_id`` are ``eot_token_id``, else GPT-2's 50256 when the vocabulary
    holds it, else the last id (where a trained byte-level BPE puts ``<|endoftext|>`` last).
    """
    if eot_token_id is None:
        eot_token_id = GPT2_EOT if config.vocab_size > GPT2_EOT else config.vocab_size - 1
    if not 0 <= eot_token_id < config.vocab_size:
        raise ValueError(f"eot_token_id {eot_token_id} is outside the vocabulary 0..{config.vocab_size - 1}")
    model_type, architecture = HF_ARCH[config.arch]
    common = {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "layer_norm_epsilon": config.layer_norm_epsilon,
        "initializer_range": INIT_STD,
        "tie_word_embeddings": True,
        "bos_token_id": eot_token_id,
        "eos_token_id": eot_token_id,
        "dtype": dtype,
    }
    if config.arch == "gpt2":
        common.update({"n_ctx": config.block_size, "n_inner": None, "activation_function": "gelu_new",
                       "scale_attn_weights": True, "use_cache": True})
    else:
        common.update({"afn": "gelu"})  # modeling_openai.ACT_FNS: "gelu" is the tanh form (gelu_new) there
    return common


def config_from_hf_dict(d: Mapping) -> GPTConfig:
    """The ``GPTConfig`` of a ``GPT2Config`` / ``OpenAIGPTConfig`` ``config.json`` dict."""
    model_type = d.get("model_type")
    if model_type not in ("gpt2", "openai-gpt"):
        raise HFCheckpointError(f"model_type {model_type!r} is not supported (expected 'gpt2' or 'openai-gpt')")
    # GPT2Config.activation_function; OpenAIGPTConfig.afn, where "gelu" means the tanh form
    tanh_gelu = ("gelu_new", "gelu_pytorch_tanh") if model_type == "gpt2" else ("gelu",)
    activation = d.get("activation_function", "gelu_new") if model_type == "gpt2" else d.get("afn", "gelu")
    if activation not in tanh_gelu:
        raise HFCheckpointError(f"activation {activation!r} is not the tanh GELU this model implements")
    if d.get("n_inner") not in (None, 4 * d.get("n_embd", 0)):
        raise HFCheckpointError(f"n_inner={d['n_inner']} is not 4 * n_embd: not supported")
    try:
        return GPTConfig(
            arch="gpt2" if model_type == "gpt2" else "gpt1",
            n_layer=int(d["n_layer"]), n_head=int(d["n_head"]), n_embd=int(d["n_embd"]),
            block_size=int(d["n_positions"]), vocab_size=int(d["vocab_size"]),
            dropout=float(d.get("resid_pdrop", 0.0)),
            layer_norm_epsilon=float(d.get("layer_norm_epsilon", 1e-5)),
        )
    except KeyError as e:
        raise HFCheckpointError(f"config.json lacks {e.args[0]!r}") from None


def save_hf_dir(model: GPT, folder: str | os.PathLike, tokenizer_files: Iterable[str | os.PathLike] | None = None,
                eot_token_id: int | None = None) -> str:
    """Write ``config.json`` + ``model.safetensors`` (+ copies of ``tokenizer_files``) as one folder, atomically.

    The folder is built under a temporary sibling name and renamed into place; an existing
    folder of that name is replaced only once the new one is complete. Returns the path.
    """
    sources = [os.fspath(f) for f in (tokenizer_files or [])]
    for source in sources:
        if not os.path.isfile(source):
            raise FileNotFoundError(f"tokenizer file {source} does not exist")
    state, config = hf_export_parts(model, eot_token_id)
    return write_hf_folder(folder, state, config, sources)


def hf_export_parts(model: GPT, eot_token_id: int | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """The weights (Hugging Face names, the tied ``lm_head`` left out) and ``config.json`` of ``model``."""
    state = to_hf_state_dict(model)
    del state["lm_head.weight"]  # tied: transformers re-ties it on load, as save_pretrained leaves it out
    dtype = str(next(iter(state.values())).dtype).removeprefix("torch.")
    return state, hf_config_dict(model.config, eot_token_id, dtype)


def write_hf_folder(folder: str | os.PathLike, state: dict, config: dict, extra_files: Iterable[str] = ()) -> str:
    """``config.json`` + ``model.safetensors`` (+ copies of ``extra_files``) as one folder: built
    under a hidden sibling name and renamed into place; an existing folder of that name is
    replaced only once the new one is complete. Returns the absolute path."""
    folder = os.path.abspath(os.fspath(folder))
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    staging = _new_hidden_folder(parent, os.path.basename(folder), "tmp")
    try:
        save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(staging, SAFETENSORS_NAME),
                  metadata={"format": "pt"})
        with open(os.path.join(staging, CONFIG_NAME), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
        for source in extra_files:
            shutil.copyfile(source, os.path.join(staging, os.path.basename(source)))
        mask = _umask()
        for name in os.listdir(staging):  # safetensors writes 0600: give the files the usual umask modes
            os.chmod(os.path.join(staging, name), 0o666 & ~mask)
        if os.path.exists(folder):
            old = _new_hidden_folder(parent, os.path.basename(folder), "old")
            os.replace(folder, os.path.join(old, "previous"))
            os.replace(staging, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _new_hidden_folder(parent: str, base: str, kind: str) -> str:
    """A new ``.<base>.<kind>-<pid>-<random>`` folder in ``parent``, with the umask's usual mode."""
    for _ in range(100):
        path = os.path.join(parent, f".{base}.{kind}-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise OSError(f"could not create a temporary folder in {parent}")


def _read_safetensors(path: str) -> dict[str, torch.Tensor]:
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise HFCheckpointError(f"{path}: not a readable safetensors file (corrupted or truncated?): {e}") from e


def load_hf_state_dict(folder: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The tensors of a Hugging Face model folder (safetensors, sharded safetensors, or a weights-only .bin)."""
    folder = os.fspath(folder)
    single = os.path.join(folder, SAFETENSORS_NAME)
    index = os.path.join(folder, SAFETENSORS_INDEX_NAME)
    legacy = os.path.join(folder, TORCH_NAME)
    if os.path.isfile(single):
        return _read_safetensors(single)
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise HFCheckpointError(f"{index}: not a valid safetensors index: {e}") from e
        state: dict[str, torch.Tensor] = {}
        for shard in shards:
            state.update(_read_safetensors(os.path.join(folder, shard)))
        return state
    if os.path.isfile(legacy):
        try:
            state = torch.load(legacy, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises UnpicklingError, RuntimeError, EOFError ... for bad files
            raise HFCheckpointError(f"{legacy}: cannot be read as a weights-only PyTorch state dict "
                                    f"(corrupted, or holds objects other than tensors): {e}") from e
        if not isinstance(state, dict):
            raise HFCheckpointError(f"{legacy}: holds a {type(state).__name__}, not a state dict")
        return state
    raise HFCheckpointError(f"{folder}: no weights found (expected {SAFETENSORS_NAME}, "
                            f"{SAFETENSORS_INDEX_NAME} or {TORCH_NAME})")


def load_hf_dir(folder: str | os.PathLike) -> GPT:
    """A ``GPT`` from a Hugging Face ``GPT2LMHeadModel`` / ``OpenAIGPTLMHeadModel`` folder."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise HFCheckpointError(f"{folder} is not a folder")
    config_path = os.path.join(folder, CONFIG_NAME)
    if not os.path.isfile(config_path):
        raise HFCheckpointError(f"{folder}: no {CONFIG_NAME}")
    try:
        with open(config_path, encoding="utf-8") as f:
            hf_config = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HFCheckpointError(f"{config_path}: not valid JSON: {e}") from e
    if not isinstance(hf_config, dict):
        raise HFCheckpointError(f"{config_path}: expected a JSON object")
    return from_hf_state_dict(load_hf_state_dict(folder), config_from_hf_dict(hf_config))
