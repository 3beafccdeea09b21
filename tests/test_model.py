"""ActorCritic, the flat parameter/gradient buffers, and the cheap action sampler."""

import numpy as np
import torch

from a3c.model import ActorCritic, flatten_parameters, sample_actions


def test_shapes():
    model = ActorCritic(4, 3, (16, 8))
    logits, value = model(torch.zeros(5, 4))
    assert logits.shape == (5, 3) and value.shape == (5,)


def test_parameters_and_gradients_are_views_of_the_flat_buffers():
    model = ActorCritic(4, 2, (8,))
    before = [p.detach().clone() for p in model.parameters()]
    flat, grads = flatten_parameters(model)
    assert flat.numel() == sum(p.numel() for p in model.parameters())
    for p, b in zip(model.parameters(), before, strict=True):
        torch.testing.assert_close(p.detach(), b)  # values kept
    flat.zero_()
    assert all(float(p.detach().abs().sum()) == 0 for p in model.parameters())  # views, not copies
    flat.normal_()
    logits, value = model(torch.randn(3, 4))
    (logits.sum() + value.sum()).backward()
    assert grads.abs().sum() > 0
    torch.testing.assert_close(grads, torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    # backward accumulates; zeroing the flat buffer clears every .grad
    grads.zero_()
    assert all(float(p.grad.abs().sum()) == 0 for p in model.parameters())


def test_shared_flat_buffers():
    flat, grads = flatten_parameters(ActorCritic(4, 2, (8,)), shared=True)
    assert flat.is_shared() and grads.is_shared()


def test_sample_actions_follows_the_policy():
    logits = torch.log(torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]]) + 1e-12)
    rng = np.random.default_rng(0)
    draws = sample_actions(logits.repeat(20000, 1), rng).reshape(20000, 2)  # 20000 independent draws per row
    freq0 = np.bincount(draws[:, 0], minlength=3) / len(draws)
    freq1 = np.bincount(draws[:, 1], minlength=3) / len(draws)
    np.testing.assert_allclose(freq0, [0.1, 0.2, 0.7], atol=0.015)
    np.testing.assert_allclose(freq1, [0.5, 0.5, 0.0], atol=0.015)
    assert draws.dtype == np.int64 and draws.min() >= 0 and draws.max() <= 2
