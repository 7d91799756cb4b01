"""model/device.py: the one device resolver and dtype rule of train and finetune, and the RNG
states a checkpoint saves. The MFU peak table: tests/test_train.py."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from model.device import autocast_for, peak_flops, resolve_device, resolve_dtype, rng_state, set_rng_state


class RunError(ValueError):
    pass


def test_devices_and_dtypes_resolve_or_fail_with_the_callers_error():
    assert resolve_device("cpu", RunError) == torch.device("cpu")
    assert resolve_device("auto", RunError).type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(RunError, match="not a device torch knows"):
        resolve_device("gpu0", RunError)
    cpu = torch.device("cpu")
    assert resolve_dtype("fp32", cpu, RunError) == torch.float32 == resolve_dtype("auto", cpu, RunError)
    assert resolve_dtype("bf16", cpu, RunError) == torch.bfloat16
    with pytest.raises(RunError, match="--dtype must be auto, bf16 or fp32"):
        resolve_dtype("fp8", cpu, RunError)
    with autocast_for(cpu, torch.bfloat16)():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with autocast_for(cpu, torch.float32)():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    assert peak_flops(cpu) == (None, "CPU: MFU n/a") and peak_flops(cpu, 100.0)[0] == 100e12


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without a GPU")
def test_cuda_without_a_gpu_is_the_callers_error():
    with pytest.raises(RunError, match="--device cuda: this torch"):
        resolve_device("cuda", RunError)


def test_a_saved_rng_state_replays_the_same_draws():
    cpu = torch.device("cpu")
    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    state = rng_state(cpu)
    first = (torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)])
    set_rng_state(state, cpu)
    again = (torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)])
    assert again == first
