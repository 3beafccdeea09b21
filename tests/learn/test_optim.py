"""SharedAdam / SharedRMSprop: same numbers as torch.optim on the same gradients; state shared across processes."""

import pytest
import torch
import torch.multiprocessing as mp

from a3c.learn.optim import SharedAdam, SharedRMSprop, make_optimizer


def _gradients(n, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, generator=g) for _ in range(steps)]


def _unfused_adam(p):
    opt = SharedAdam(p, lr=1e-2, slots=3)
    opt.fused = False  # the rule for torch builds without the fused kernel
    return opt


@pytest.mark.parametrize(
    "ours,theirs",
    [
        (lambda p: SharedAdam(p, lr=1e-2, slots=3), lambda p: torch.optim.Adam([p], lr=1e-2, fused=True)),
        (_unfused_adam, lambda p: torch.optim.Adam([p], lr=1e-2, foreach=False)),
        (
            lambda p: SharedRMSprop(p, lr=1e-2, alpha=0.99, eps=1e-5, slots=3),
            lambda p: torch.optim.RMSprop([p], lr=1e-2, alpha=0.99, eps=1e-5, foreach=False),
        ),
    ],
)
def test_matches_torch_optim_on_same_gradients(ours, theirs):
    start = torch.randn(50, generator=torch.Generator().manual_seed(1))
    mine = start.clone().share_memory_()
    reference = start.clone().requires_grad_(True)
    opt, ref_opt = ours(mine).share_memory_(), theirs(reference)
    for i, grad in enumerate(_gradients(50, 25)):
        opt.step(grad, slot=i % 3)  # the slot (worker) does not change the maths, only who counts the step
        reference.grad = grad.clone()
        ref_opt.step()
        torch.testing.assert_close(mine, reference.detach(), rtol=1e-5, atol=1e-6)
    assert opt.step_count() == 25
    assert opt.steps.tolist() == [9, 8, 8]


def test_fused_adam_is_torch_optims_fused_adam_bit_for_bit():
    """The default path is one call of the kernel torch.optim.Adam(fused=True) calls, with the global step count:
    the same numbers exactly, step after step (and within rounding of the single-tensor rule, above)."""
    start = torch.randn(1000, generator=torch.Generator().manual_seed(2))
    mine, reference = start.clone(), start.clone().requires_grad_(True)
    opt, ref_opt = SharedAdam(mine, lr=3e-3, slots=2), torch.optim.Adam([reference], lr=3e-3, fused=True)
    assert opt.fused
    for i, grad in enumerate(_gradients(1000, 40, seed=3)):
        opt.step(grad, slot=i % 2)
        reference.grad = grad.clone()
        ref_opt.step()
        assert torch.equal(mine, reference.detach())
    assert torch.equal(opt.state["exp_avg_sq"], ref_opt.state[reference]["exp_avg_sq"])


def test_the_per_process_scratch_is_not_pickled():
    """The fused step's count tensor and the numpy view of the counts are made in each process: a pickled optimizer
    (what a worker receives) carries neither, so no two workers write one count tensor."""
    import pickle

    opt = SharedAdam(torch.zeros(4), lr=1e-3, slots=2)
    opt.step(torch.ones(4), slot=1)
    assert opt._step_tensor is not None and opt._steps_np is not None
    copy = pickle.loads(pickle.dumps(opt))
    assert copy._step_tensor is None and copy._steps_np is None
    copy.step(torch.ones(4), slot=0)
    assert copy.steps.tolist() == [1, 1] and opt.steps.tolist() == [0, 1]


def test_state_is_created_eagerly_and_shared():
    p = torch.zeros(10).share_memory_()
    opt = make_optimizer("adam", p, lr=1e-3, slots=2)
    assert opt.steps.is_shared() and opt.state["exp_avg"].is_shared() and opt.state["exp_avg_sq"].is_shared()
    assert opt.step_count() == 0


def _child_step(opt, grad):
    opt.step(grad, slot=1)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_state_updated_in_a_child_is_seen_by_the_parent(method):
    params = torch.ones(8).share_memory_()
    opt = make_optimizer("adam", params, lr=0.1, slots=2)
    grad = torch.arange(8, dtype=torch.float32)
    proc = mp.get_context(method).Process(target=_child_step, args=(opt, grad))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert opt.steps.tolist() == [0, 1]
    torch.testing.assert_close(opt.state["exp_avg"], 0.1 * grad)
    assert params[1:].lt(1.0).all()  # the parent sees the child's parameter update


def test_load_state_dict_keeps_sharing_and_total_step():
    p = torch.zeros(4).share_memory_()
    opt = make_optimizer("adam", p, lr=1e-3, slots=2)
    opt.step(torch.ones(4), slot=0)
    opt.step(torch.ones(4), slot=1)
    state = opt.state_dict()
    other = make_optimizer("adam", torch.zeros(4).share_memory_(), lr=1e-3, slots=5)
    other.load_state_dict(state)
    assert other.step_count() == 2 and other.state["exp_avg"].is_shared()
    torch.testing.assert_close(other.state["exp_avg_sq"], opt.state["exp_avg_sq"])


def test_rmsprop_tf_starts_from_ones_with_eps_inside_the_root():
    """TensorFlow's RMSprop (SB3's RMSpropTFLike), step by step on fixed gradients, against its formula; and unlike
    PyTorch's, its first step is not ~10 * lr in every coordinate whatever the gradient's size."""
    from a3c.learn.optim import OPTIMIZERS, SharedRMSpropTF
    from a3c.spec.config import OPTIMIZERS as NAMES

    assert tuple(OPTIMIZERS) == NAMES
    torch.manual_seed(0)
    start = torch.randn(5)
    grads = [torch.randn(5) * 1e-3 for _ in range(4)]
    params = start.clone()
    opt = SharedRMSpropTF(params, lr=0.01, alpha=0.9, eps=1e-5)
    expected, square_avg = start.clone(), torch.ones(5)
    for g in grads:
        opt.step(g)
        square_avg = 0.9 * square_avg + 0.1 * g * g
        expected -= 0.01 * g / torch.sqrt(square_avg + 1e-5)
        torch.testing.assert_close(params, expected)
    torch_style = start.clone()
    make_optimizer("rmsprop", torch_style, lr=0.01, slots=1).step(grads[0])
    assert (start - torch_style).abs().min() > 0.05  # PyTorch's: ~ lr / sqrt(1 - alpha) = 0.1 each
    assert (start - params).abs().max() < 1e-3


def test_rmsprop_tf_matches_sb3_s_rmsprop_tf_like_where_sb3_is_installed():
    sb3 = pytest.importorskip("stable_baselines3.common.sb2_compat.rmsprop_tf_like")
    from a3c.learn.optim import SharedRMSpropTF

    torch.manual_seed(1)
    start = torch.randn(7)
    ours = start.clone()
    theirs = torch.nn.Parameter(start.clone())
    opt = SharedRMSpropTF(ours, lr=7e-4, alpha=0.99, eps=1e-5)
    reference = sb3.RMSpropTFLike([theirs], lr=7e-4, alpha=0.99, eps=1e-5)
    for _ in range(5):
        g = torch.randn(7)
        opt.step(g)
        theirs.grad = g.clone()
        reference.step()
    torch.testing.assert_close(ours, theirs.detach())
