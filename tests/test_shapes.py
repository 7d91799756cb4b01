"""model.shapes: a GPT on the meta device with its initial draws skipped: the same parameters
as the model itself, nothing allocated, and no ``torch._dynamo`` import on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model.checkpoint import check_weights
from model.gpt import GPT, INIT_STD, GPTConfig
from model.shapes import meta_gpt

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=300),
           GPTConfig(arch="gpt1", n_layer=3, n_head=4, n_embd=16, block_size=8, vocab_size=70, bias=False)]


@pytest.mark.parametrize("config", CONFIGS, ids=["gpt2", "gpt1-no-bias"])
def test_the_meta_model_has_the_models_parameters_and_holds_no_memory(config):
    meta, real = meta_gpt(config).state_dict(), GPT(config).state_dict()
    assert {k: (tuple(v.shape), v.dtype) for k, v in meta.items()} == {k: (tuple(v.shape), v.dtype) for k, v in real.items()}
    assert all(v.is_meta for v in meta.values())
    check_weights(real, config)  # the checkpoint check reads its expected shapes from the meta model


def test_only_the_meta_models_draws_are_skipped():
    meta_gpt(CONFIGS[0])
    weight = GPT(CONFIGS[0]).transformer.wte.weight.detach()  # built afterwards, on the CPU: drawn as always
    assert abs(float(weight[:300].std()) - INIT_STD) < 0.002
    with torch.device("meta"):
        assert GPT(CONFIGS[0]).transformer.wte.weight.is_meta


PROBE = """
import json, sys, torch
from model.gpt import GPT, GPTConfig
from model.shapes import meta_gpt
config = GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=300)
if sys.argv[1] == "meta_gpt":
    meta_gpt(config)
else:
    with torch.device("meta"):
        GPT(config)
print(json.dumps("torch._dynamo" in sys.modules))
"""


@pytest.mark.pipeline  # fresh interpreters, each loading torch
def test_building_the_meta_model_does_not_import_torch_dynamo():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    loaded = {way: json.loads(subprocess.run([sys.executable, "-c", PROBE, way], capture_output=True, text=True, check=True,
                                             env=env, cwd=ROOT, timeout=120).stdout)
              for way in ("meta_gpt", "device_context")}
    assert loaded == {"meta_gpt": False, "device_context": True}  # the plain way draws on meta tensors through dynamo
