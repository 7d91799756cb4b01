"""model/optim.py: the one learning-rate schedule (pre-training's cosine, fine-tuning's line) and
the schedule object both trainers drive. AdamW's groups and fused kernel: tests/test_train.py."""

from __future__ import annotations

import pytest
import torch

from model.optim import LRSchedule, lr_at


def test_linear_decay_is_gpt1s_schedule_to_the_last_bit():
    lr, warmup, total = 6.25e-5, 7, 1000
    for step in range(total + 3):
        if step < warmup:
            expected = lr * (step + 1) / warmup
        else:  # GPT-1 section 4.1: linear decay to 0 after the warmup
            expected = lr * max(0.0, (total - step) / max(1, total - warmup))
        assert lr_at(step, lr, 0.0, warmup, total, decay="linear") == expected, step


def test_linear_decay_ends_at_min_lr_and_the_cosine_is_the_default():
    values = [lr_at(s, 1.0, 0.1, 2, 12, decay="linear") for s in range(14)]
    assert values[:3] == [0.5, 1.0, 1.0]
    assert all(a > b for a, b in zip(values[2:12], values[3:12], strict=False))  # falls every step
    assert values[7] == pytest.approx(0.1 + 0.9 * 0.5) and values[12:] == [0.1, 0.1]
    cosine = [lr_at(s, 1.0, 0.1, 2, 12) for s in range(14)]
    assert cosine[7] == pytest.approx(0.55) and cosine[4] > values[4]  # a cosine stays high longer than the line


def test_the_schedule_sets_every_group_and_resumes_from_its_step_count():
    params = [torch.nn.Parameter(torch.zeros(2, 2)), torch.nn.Parameter(torch.zeros(2))]
    optimizer = torch.optim.AdamW([{"params": params[:1]}, {"params": params[1:]}], lr=1.0)
    schedule = LRSchedule(optimizer, 1.0, 0.0, 2, 6, decay="linear")
    seen = []
    for _ in range(4):
        seen.append(schedule.apply())
        schedule.step()
    assert seen == [0.5, 1.0, 1.0, 0.75]
    assert [g["lr"] for g in optimizer.param_groups] == [0.75, 0.75]
    again = LRSchedule(optimizer, 1.0, 0.0, 2, 6, decay="linear")
    again.load_state_dict(schedule.state_dict())
    assert again.apply() == lr_at(4, 1.0, 0.0, 2, 6, decay="linear") == 0.5
    with pytest.raises(ValueError, match="decay must be one of"):
        LRSchedule(optimizer, 1.0, 0.0, 2, 6, decay="step")
