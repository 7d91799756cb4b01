"""model/validation.py: the evaluation loop both trainers use. The torchrun sum over ranks is
checked by tests/test_train.py (DDP through a real torchrun)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from model.validation import mean_loss


class Noisy(torch.nn.Module):
    """A linear layer behind dropout: in training mode its outputs are random."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.drop = torch.nn.Dropout(0.5)
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, x):
        return self.linear(self.drop(x)).squeeze(-1)


def test_the_mean_weights_each_batch_by_its_examples_without_dropout_or_gradients():
    model = Noisy().train()
    x, y = torch.randn(7, 3), torch.randn(7)
    seen = []

    def loss_of(rows):
        out = model(x[rows])
        seen.append((model.training, torch.is_grad_enabled()))
        return F.mse_loss(out, y[rows]), len(rows)

    got = mean_loss(model, [[0, 1, 2, 3], [4, 5], [6]], loss_of)
    assert model.training  # put back as it was
    assert seen == [(False, False)] * 3  # each batch in evaluation mode, with no graph
    model.eval()
    expected = float(F.mse_loss(model(x).double(), y.double()))  # the mean over all 7 examples
    assert math.isclose(got, expected, rel_tol=1e-6)


def test_training_mode_comes_back_and_no_batch_is_nan():
    model = Noisy().train()
    assert math.isnan(mean_loss(model, [], lambda batch: (torch.tensor(1.0), 1)))
    assert model.training
    model.eval()
    mean_loss(model, [1], lambda batch: (torch.tensor(2.0), batch))
    assert not model.training
