"""A GPT of a given config on PyTorch's meta device: every parameter's shape and dtype, no
memory and no random draws, for checking a checkpoint's tensors before anything is built
(``model.checkpoint``) and for loading weights into with ``load_state_dict(assign=True)``
(``model.checkpoint``, ``model.finetune.train``, ``model.hf``).

Built under ``torch.device("meta")`` alone, each module's constructor still runs its
``torch.nn.init`` draws on the meta tensors, and PyTorch runs those through Python
decompositions that import ``torch._dynamo`` first: 1.2-1.3 s in the first model a process
loads (``corpusforge sample``, ``eval``, ``finetune``, ``train --resume``). ``meta_gpt`` skips
the draws, which on meta tensors compute nothing. Tests: ``tests/test_shapes.py``.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from model.gpt import GPT, GPTConfig


class _NoInitOnMeta(TorchFunctionMode):
    """``torch.nn.init``'s functions, called on a meta tensor, give the tensor back untouched."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensor = args[0] if args else kwargs.get("tensor")
        if getattr(func, "__module__", None) == "torch.nn.init" and isinstance(tensor, torch.Tensor) and tensor.is_meta:
            return tensor
        return func(*args, **kwargs)


def meta_gpt(config: GPTConfig) -> GPT:
    """``GPT(config)`` on the meta device, its parameters' initial draws skipped."""
    with torch.device("meta"), _NoInitOnMeta():
        return GPT(config)
