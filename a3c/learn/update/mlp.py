"""The update's forward and backward pass through MLP torsos by hand, for the models that have them (no LSTM core):
the gradients autograd would compute, in a few array operations a layer; and the acting forward pass without
nn.Module calls. Both run in numpy, on numpy views of the worker's flat parameter and gradient buffers.

On a worker's update path a 64-64 actor and critic over 48 observations is a few dozen microseconds of arithmetic
and about a millisecond of dispatch through autograd, which records a node per operation and replays it backwards.
By hand each layer costs a matrix product, a bias add and an in-place tanh forward, and backward three elementwise
operations for tanh' (1 - h^2), one product into the weight's gradient, one sum into the bias's, and one product to
the layer below (skipped for the first layer). In numpy rather than torch because at these sizes torch's own
operations cost more than their arithmetic too (tanh on [48, 64]: 7.8 us against 0.9; an elementwise product 1.2 us
against 0.5; the matrix products about the same). The gradients are written into the parameters' existing ``.grad``
tensors, the views of the worker's flat gradient buffer (a3c.learn.model.flatten_parameters), where autograd would
accumulate them into zeroed ones; they are autograd's up to the order of float rounding (tests/learn/
test_backprop.py).

The update reuses the acting passes: a worker's weights are the same from its pull through its rollout to its
update, so the actor's activations and logits the rollout's acting computed for its observations are what the
update's forward would compute again. ``record`` has the acting passes write them into arrays the update then reads
(``_Acted``), and the update runs only the critic's chain (over the rollout and its boundary observation).

Linear heads (Categorical's and MultiCategorical's logits; the value head) are done by hand too; a head with more
than a Linear layer (the Gaussian's state-independent log-std, gSDE's) runs under autograd on the torso's features
as a leaf, and the features' gradient it leaves continues by hand through the torso. Only the first ``rows``
outputs carry gradient (the rollout's T x K samples; the boundary observation's row is a bootstrap target).

The CNN, float32 and ``--bf16``, has its own pass by hand (a3c.learn.update.cnn). ``MlpByHand`` is this module's
network pass in the update protocol (a3c.learn.update.protocol; a3c.learn.update.paths registers it); models it does
not cover (an
LSTM core, a CNN) take another path. ``backward_from`` is the hand-off to autograd where autograd runs: the reference
path's backward through the whole model (a3c.learn.update.reference) and the Gaussian (and gSDE) head here: the
gradient of
sum(grad * output) from one scalar root, not from explicit gradient tensors, which would make torch import sympy in
every worker (see its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from a3c.learn.distributions import GaussianHead
from a3c.learn.model import ActorCritic, MlpTorso
from a3c.learn.update.by_hand import PassByHand
from a3c.learn.update.protocol import backward_from


@dataclass(frozen=True)
class _Layer:
    """A Linear layer's weight and bias and their .grad, as numpy arrays on the same memory (the worker's flat
    parameter and gradient buffers): ``np.matmul(..., out=grad_w)`` writes into the flat gradient in place."""

    w: np.ndarray
    b: np.ndarray
    grad_w: np.ndarray
    grad_b: np.ndarray

    w_t: np.ndarray = field(init=False)  # W^T, [in, out] ([2, in, out] for a pair): a view made once
    b_row: np.ndarray = field(init=False)  # b as a row, [1, out] ([2, 1, out] for a pair): adds to [B, out] outputs

    def __post_init__(self) -> None:
        object.__setattr__(self, "w_t", self.w.swapaxes(-1, -2))  # (np.swapaxes costs ~2 us a call)
        object.__setattr__(self, "b_row", self.b[..., None, :])

    @classmethod
    def of(cls, layer: nn.Linear) -> _Layer:
        assert layer.bias is not None and layer.weight.grad is not None and layer.bias.grad is not None
        views = (layer.weight, layer.bias, layer.weight.grad, layer.bias.grad)
        return cls(*(t.detach().numpy() for t in views))


@dataclass
class Pass:
    """What the forward pass keeps for the backward: each chain's activations (the input first, then every layer's
    tanh output), and the policy head's leaf features and output when the head runs under autograd."""

    actor: list[np.ndarray]
    critic: list[np.ndarray] | None  # None: the critic shares the actor's torso (or runs paired with it, below)
    head_leaf: torch.Tensor | None = None
    head_out: torch.Tensor | None = None
    pair: list[np.ndarray] | None = None  # the paired chains' activations, [2, B, width] each ([B, in] first)
    # the same, of the rows that carry gradient, and the buffer for the last layer's output gradient: made once
    # where the arrays are the record's (``MlpBackprop.record``), else by ``backward``
    pair_rows: list[np.ndarray] | None = None
    d_pair: np.ndarray | None = None


def _chain(torso: nn.Module) -> list[nn.Linear] | None:
    """The torso's Linear layers when it is an MlpTorso of Linear + Tanh pairs (what ``mlp`` builds); else None."""
    if not isinstance(torso, MlpTorso):
        return None
    modules = list(torso.net)
    linears = modules[0::2]
    tanhs = modules[1::2]
    if len(linears) != len(tanhs) or not linears:
        return None
    if not all(isinstance(m, nn.Linear) and m.bias is not None for m in linears):
        return None
    if not all(isinstance(m, nn.Tanh) for m in tanhs):
        return None
    return linears  # type: ignore[return-value]


class MlpBackprop:
    """Forward and backward of ``model`` (an ActorCritic with MLP torsos and no core) by hand; build it with
    ``MlpBackprop.of(model)``, which is None for a model it does not cover (the worker then uses autograd)."""

    def __init__(self, model: ActorCritic, actor: list[nn.Linear], critic: list[nn.Linear] | None) -> None:
        self.model, self.actor, self.critic = model, actor, critic
        assert isinstance(model.actor, MlpTorso)
        self.obs_dim, self.scale = model.actor.obs_dim, model.actor.scale
        head = model.policy_head
        self.linear_head = head if isinstance(head, nn.Linear) and head.bias is not None else None
        self.value_head = model.value_head
        # the update's passes run in numpy on views of the same memory: on a [48, 64] batch a matmul costs about what
        # torch's addmm does, but tanh a third and an elementwise operation half, without torch's dispatch
        self.actor_np = [_Layer.of(layer) for layer in actor]
        self.critic_np = None if critic is None else [_Layer.of(layer) for layer in critic]
        self.value_np = _Layer.of(model.value_head)
        self.linear_np = None if self.linear_head is None else _Layer.of(self.linear_head)
        # DiagGaussian's head (a Linear mean and one learned log-std a dimension) by hand too: on a MuJoCo worker's
        # acting pass of one env its torch call cost about as much as the rest of the pass
        self.gauss_np: _Layer | None = None
        self.log_std_np: np.ndarray | None = None
        self.log_std_grad: np.ndarray | None = None
        if type(head) is GaussianHead:  # (not gSDE's head: its std depends on the features)
            self.gauss_np = _Layer.of(head.mean)
            self.log_std_np = head.log_std.detach().numpy()
            grad = head.log_std.grad
            self.log_std_grad = None if grad is None else grad.numpy()
        # separate actor and critic of one shape: the update runs both chains as one (see _paired)
        self.pair_np = None if critic is None else _paired(actor, critic)
        self.acted: _Acted | None = None  # the acting passes of the rollout in hand (see ``record``)
        self.by_hand_head = self.linear_np is not None or self.gauss_np is not None
        # whether ``backward`` writes every parameter's gradient (linear heads, every layer by hand): the caller then
        # need not zero the gradients first
        written = [*actor, *(critic or []), model.value_head, *([head] if self.by_hand_head else [])]
        self.writes_all_grads = self.by_hand_head and sum(
            p.numel() for layer in written for p in layer.parameters()
        ) == sum(p.numel() for p in model.parameters())

    @staticmethod
    def covers(model: ActorCritic) -> str | None:
        """None where the passes by hand cover ``model``'s shape (MLP torsos of Linear + Tanh layers, no core);
        else why not, in a few words."""
        if model.lstm:
            return "an LSTM core (--lstm)"
        if _chain(model.actor) is None or (model.critic is not None and _chain(model.critic) is None):
            return f"a {type(model.actor).__name__}, not an MLP of Linear + Tanh layers"
        return None

    @classmethod
    def of(cls, model: ActorCritic) -> MlpBackprop | None:
        if cls.covers(model) is not None:
            return None
        if any(p.grad is None for p in model.parameters()):
            return None  # the gradients go into existing .grad tensors (the flat buffer's views)
        actor = _chain(model.actor)
        critic = _chain(model.critic) if model.critic is not None else None
        assert actor is not None
        return cls(model, actor, critic)

    def unroll(
        self, obs: torch.Tensor | np.ndarray, final_obs: torch.Tensor | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, Pass]:
        """ActorCritic.unroll of a model without a core, by hand, in numpy: obs [T+1, K, ...] (a tensor or an
        array) -> (params [T*K, P], values [T+1, K], V(final_obs) [T, K] or None, what ``backward`` needs), arrays on
        the worker's update path (each torch view or slice there costs a microsecond or two)."""
        T, K = obs.shape[0] - 1, obs.shape[1]
        flat = self.inputs(obs, (T + 1) * K)
        acted = self.acted
        if acted is not None and acted.complete(T, K):
            params, values, saved = self._forward_after_acting(flat, acted)
        else:
            params, values, saved = self._forward(flat)
        if acted is not None:
            acted.steps_done = 0  # used once: the next update needs the next rollout's acting passes
        final_values = None
        if final_obs is not None:  # (an episode truncated in this rollout: V of its final observation)
            x = self.inputs(final_obs, T * K)
            chain = self.actor_np if self.critic_np is None else self.critic_np
            features = _forward_np(chain, x)[-1]
            final_values = (np.matmul(features, self.value_np.w[0]) + self.value_np.b).reshape(T, K)
        return params[: T * K], values.reshape(T + 1, K), final_values, saved

    def record(self, steps: int, envs: int) -> None:
        """From now on, keep what the acting passes of each rollout of ``steps`` x ``envs`` compute (``policy`` with
        its ``step``), for its update: the actor's activations and the policy's params of the rollout's observations
        are then not computed twice. The update (``unroll``) runs only the critic's chain, on all (T + 1) K rows, and
        reads the actor's from here. Valid because acting and the update use the same weights: a worker pulls the
        global weights before a rollout and changes them only after its update; whoever changes the weights
        between a rollout's acting and its update must not ``record``. Only for paired chains (separate actor and
        critic of one shape, the default model); elsewhere a no-op."""
        if self.pair_np is None:
            return
        widths = [layer.b.shape[-1] for layer in self.pair_np]
        dtype = self.actor_np[0].w.dtype
        param_dim = None if self.linear_np is None else self.linear_np.b.shape[-1]
        self.acted = _Acted(steps, envs, widths, param_dim, dtype)

    def policy(self, obs: torch.Tensor | np.ndarray, step: int | None = None) -> torch.Tensor:
        """ActorCritic.policy's params (acting, no autograd): the actor's chain and head in numpy on the same weights
        (a batch of 8 through a 64-64 MLP: 10 us, against 23 us for the same operations through torch). ``step``:
        the rollout step these observations are, for ``record``."""
        x = self.inputs(obs)
        acted = self.acted
        if acted is None or step is None or not acted.next_is(step, x.shape[0]):
            features = _forward_np(self.actor_np, x)[-1]
            if self.linear_np is not None:
                return torch.from_numpy(features @ self.linear_np.w_t + self.linear_np.b)
            if self.gauss_np is not None:
                return torch.from_numpy(self._gaussian(features))
            with torch.no_grad():
                return self.model.policy_head(torch.from_numpy(features))
        outs = acted.step_views[step]
        x = _forward_np(self.actor_np, x, outs)[-1]  # into the record
        acted.steps_done += 1
        if self.linear_np is not None:
            logits = np.matmul(x, self.linear_np.w_t, out=outs[-1])
            logits += self.linear_np.b
            return torch.from_numpy(logits)
        if self.gauss_np is not None:
            return torch.from_numpy(self._gaussian(x))
        with torch.no_grad():
            return self.model.policy_head(torch.from_numpy(x))

    def _gaussian(self, features: np.ndarray) -> np.ndarray:
        """GaussianHead's output by hand: [mean = features W^T + b, log_std for every row], [B, 2 A]."""
        assert self.gauss_np is not None and self.log_std_np is not None
        dim = self.log_std_np.shape[-1]
        out = np.empty((features.shape[0], 2 * dim), dtype=features.dtype)  # (np.concatenate and broadcast_to: 36 us)
        mean = np.matmul(features, self.gauss_np.w_t, out=out[:, :dim])
        mean += self.gauss_np.b
        out[:, dim:] = self.log_std_np
        return out

    def inputs(self, obs: torch.Tensor | np.ndarray, rows: int | None = None) -> np.ndarray:
        """MlpTorso.inputs in numpy: the observations (a tensor or an array; ``rows`` of them, flattened from
        the leading dimensions, or [B, ...]) as [rows, obs_dim] in the weights' dtype, scaled (uint8 frames). On every
        acting step and every update, where torch's version costs ~5 us."""
        if isinstance(obs, np.ndarray):
            x = obs
        else:
            x = obs.detach().numpy() if obs.requires_grad else obs.numpy()
        x = x.reshape(x.shape[0] if rows is None else rows, self.obs_dim)
        dtype = self.actor_np[0].w.dtype
        if x.dtype != dtype:  # uint8 or bool observations; float32 ones for a float64 copy of the model (tests)
            x = x.astype(dtype)
        if self.scale != 1.0:
            x = x * dtype.type(self.scale)
        return x

    def forward(self, obs: torch.Tensor | np.ndarray) -> tuple[np.ndarray, np.ndarray, Pass]:
        """obs [B, *obs_shape] -> (policy params [B, P], values [B], what backward needs); no autograd graph but
        the non-Linear policy head's."""
        return self._forward(self.inputs(obs))

    def _forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, Pass]:
        pair = None
        if self.pair_np is not None:
            pair = _forward_np(self.pair_np, x)
            actor, critic = [x], None
            features, value_features = pair[-1][0], pair[-1][1]
        else:
            actor = _forward_np(self.actor_np, x)
            critic = None if self.critic_np is None else _forward_np(self.critic_np, x)
            features = actor[-1]
            value_features = features if critic is None else critic[-1]
        values = np.matmul(value_features, self.value_np.w[0]) + self.value_np.b
        if self.linear_np is not None:
            head = self.linear_np
            return features @ head.w_t + head.b, values, Pass(actor, critic, pair=pair)
        if self.gauss_np is not None:
            return self._gaussian(features), values, Pass(actor, critic, pair=pair)
        leaf = torch.from_numpy(features).requires_grad_(True)
        with torch.enable_grad():
            out = self.model.policy_head(leaf)
        return out.detach().numpy(), values, Pass(actor, critic, leaf, out, pair)

    def _forward_after_acting(self, x: np.ndarray, acted: _Acted) -> tuple[np.ndarray, np.ndarray, Pass]:
        """``_forward`` of a rollout whose acting passes were recorded: the critic's chain over every row (into the
        record's second halves: the pair's activations are then whole), the actor's taken from the record. The
        boundary rows of the actor's half are never computed (zeros): the update's gradient has no row there."""
        assert self.pair_np is not None and self.critic_np is not None
        h = _forward_np(self.critic_np, x, acted.critic_halves)[-1]
        pair = [x, *acted.layers]
        pair_rows = [x[: acted.steps * acted.envs], *acted.layer_rows]
        values = np.matmul(h, self.value_np.w[0]) + self.value_np.b
        if acted.params is not None:
            return acted.params, values, Pass([x], None, pair=pair, pair_rows=pair_rows, d_pair=acted.d_last)
        if self.gauss_np is not None:
            params = self._gaussian(acted.layers[-1][0, : acted.steps * acted.envs])
            return params, values, Pass([x], None, pair=pair, pair_rows=pair_rows, d_pair=acted.d_last)
        leaf = torch.from_numpy(acted.layers[-1][0, : acted.steps * acted.envs]).requires_grad_(True)
        with torch.enable_grad():
            out_t = self.model.policy_head(leaf)
        return out_t.detach().numpy(), values, Pass([x], None, leaf, out_t, pair, pair_rows, acted.d_last)

    def backward(self, saved: Pass, dparams: torch.Tensor | np.ndarray, dvalues: torch.Tensor | np.ndarray) -> None:
        """Into the parameters' .grad, the gradient of sum(dparams * params[:rows]) + sum(dvalues * values[:rows]),
        rows = len(dparams), as ``torch.autograd.backward((params[:rows], values[:rows]), (dparams, dvalues))`` would
        put it there into zeroed gradients: the torsos' and the linear heads' gradients are *written* (each is
        produced once, and a product written straight into the flat gradient buffer saves an add and a temporary
        per layer); a non-Linear policy head's are accumulated by autograd. The caller zeroes the gradients first
        unless ``writes_all_grads``."""
        rows = dparams.shape[0]
        pair = None
        if saved.pair is not None:
            if saved.pair_rows is not None and saved.d_pair is not None and saved.d_pair.shape[1] == rows:
                pair, d_pair = saved.pair_rows, saved.d_pair
            else:
                pair = [saved.pair[0][:rows]] + [h[:, :rows] for h in saved.pair[1:]]
                # the two chains' output gradients side by side, [2, rows, width]: written below, one per chain
                d_pair = np.empty_like(pair[-1])
            features, value_features = pair[-1][0], pair[-1][1]
            d_features, d_value_features = d_pair[0], d_pair[1]
        else:
            actor = [a[:rows] for a in saved.actor]
            critic = None if saved.critic is None else [c[:rows] for c in saved.critic]
            features = actor[-1]
            value_features = features if critic is None else critic[-1]
            d_features, d_value_features = None, None
        # the value head, one output: its products as a vector product and a broadcast one (numpy's matmul with
        # an inner dimension of 1 takes a slow path: 4 us where the broadcast multiply takes 1.5)
        dv, value = _as_numpy(dvalues), self.value_np
        np.matmul(dv, value_features, out=value.grad_w[0])
        value.grad_b[0] = np.add.reduce(dv)
        d_value_features = np.multiply(dv[:, None], value.w[0], out=d_value_features)
        if self.linear_np is not None:
            dp = _as_numpy(dparams)
            _linear_backward_np(self.linear_np, features, dp)
            d_features = np.matmul(dp, self.linear_np.w, out=d_features)
        elif self.gauss_np is not None:  # the mean's Linear layer, and the log-std's sum over the rows
            assert self.log_std_grad is not None
            dp = _as_numpy(dparams)
            dims = self.gauss_np.b.shape[-1]
            d_mean = np.ascontiguousarray(dp[:, :dims])
            _linear_backward_np(self.gauss_np, features, d_mean)
            np.add.reduce(dp[:, dims:], axis=0, out=self.log_std_grad)
            d_features = np.matmul(d_mean, self.gauss_np.w, out=d_features)
        else:
            assert saved.head_leaf is not None and saved.head_out is not None
            grad_out = torch.zeros_like(saved.head_out)
            grad_out[:rows] = torch.as_tensor(dparams)
            backward_from((saved.head_out,), (grad_out,))  # the head's parameters' .grad, and the leaf's
            assert saved.head_leaf.grad is not None
            leaf_grad = saved.head_leaf.grad[:rows].numpy()
            if d_features is None:
                d_features = leaf_grad
            else:
                d_features[...] = leaf_grad
        if pair is not None:
            assert self.pair_np is not None
            _backward_np(self.pair_np, pair, d_pair)
        elif critic is None:
            _backward_np(self.actor_np, actor, d_features + d_value_features)
        else:
            assert self.critic_np is not None
            _backward_np(self.actor_np, actor, d_features)
            _backward_np(self.critic_np, critic, d_value_features)


class _Acted:
    """A rollout's acting passes, recorded (``MlpBackprop.record``): per layer of the paired chains a [2, (T + 1) K,
    width] array whose first half the acting passes fill row block by row block (step t: rows t K to (t + 1) K) and
    whose second half the update's critic pass fills, and the policy's params [T K, P] (linear heads). The arrays
    are reused by every rollout."""

    def __init__(self, steps: int, envs: int, widths: list[int], param_dim: int | None, dtype: np.dtype) -> None:
        self.steps, self.envs = steps, envs
        self.layers = [np.zeros((2, (steps + 1) * envs, w), dtype=dtype) for w in widths]
        self.params = None if param_dim is None else np.zeros((steps * envs, param_dim), dtype=dtype)
        self.steps_done = 0  # acting passes recorded, in order, since the last update
        # the rows that carry gradient (all but the boundary's), and the last layer's output gradient's buffer
        self.layer_rows = [layer[:, : steps * envs] for layer in self.layers]
        self.critic_halves = [layer[1] for layer in self.layers]  # what the update's critic pass writes
        self.d_last = np.empty((2, steps * envs, widths[-1]), dtype=dtype)
        # step t's rows of each layer's actor half (and of the params), as views made once
        self.step_views = [
            [layer[0, t * envs : (t + 1) * envs] for layer in self.layers]
            + ([] if self.params is None else [self.params[t * envs : (t + 1) * envs]])
            for t in range(steps)
        ]

    def next_is(self, step: int, batch: int) -> bool:
        """Whether an acting pass of ``batch`` rows at rollout ``step`` is the next to record (a new rollout at step
        0 starts the record afresh); a pass out of order is not recorded, and the update then runs the whole
        forward pass itself."""
        if step == 0:
            self.steps_done = 0
        return batch == self.envs and step == self.steps_done < self.steps

    def complete(self, steps: int, envs: int) -> bool:
        return self.steps_done == steps == self.steps and envs == self.envs


def _as_numpy(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.detach().numpy()


def _paired(actor: list[nn.Linear], critic: list[nn.Linear]) -> list[_Layer] | None:
    """The actor's and the critic's chains as one chain of stacked layers, when they have the same shapes: layer i's
    weight as a [2, out, in] numpy view whose first index steps from the actor's weight to the critic's *in the flat
    buffer* (a stride of the distance between them: no copy, so every pull of the global weights is seen), and so
    its bias, its weight's gradient and its bias's. One matrix product, one tanh, one sum then does a layer of both
    networks (numpy's matmul loops over the stack inside one call): on the update path that halves the number of
    array operations through the torsos, each of which costs a microsecond or two of call overhead at these sizes.
    None where the shapes differ or the tensors are not in one buffer at a fixed distance (then the chains run one
    after the other)."""
    if len(actor) != len(critic):
        return None
    pairs = []
    for a, c in zip(actor, critic, strict=True):
        if a.weight.shape != c.weight.shape:
            return None
        views = []
        for x, y in (
            (a.weight, c.weight),
            (a.bias, c.bias),
            (a.weight.grad, c.weight.grad),
            (a.bias.grad, c.bias.grad),
        ):
            assert y is not None and x is not None
            if x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr() or not (
                x.is_contiguous() and y.is_contiguous()
            ):
                return None  # not views of one flat buffer
            gap = (y.data_ptr() - x.data_ptr()) // x.element_size()
            if abs(gap) < x.numel():
                return None  # overlapping: not two different tensors
            first = x.detach().numpy()
            views.append(
                np.lib.stride_tricks.as_strided(first, (2, *first.shape), (gap * first.itemsize, *first.strides))
            )
        pairs.append(_Layer(*views))
    return pairs


def _forward_np(layers: list[_Layer], x: np.ndarray, into: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """[x, h1, h2, ...]: h = tanh(x W^T + b), layer by layer, each h computed in place in its own new array, or in
    ``into[i]`` (a record's rows: ``MlpBackprop.record``). For paired layers (``_paired``) x [B, in] broadcasts over
    the pair and every h is [2, B, out]."""
    outs = [x]
    for i, layer in enumerate(layers):
        z = np.matmul(x, layer.w_t, out=None if into is None else into[i])
        z += layer.b_row
        x = np.tanh(z, out=z)
        outs.append(x)
    return outs


def _linear_backward_np(layer: _Layer, x: np.ndarray, dy: np.ndarray) -> None:
    """y = x W^T + b: dW = dy^T x, db = the sum over rows of dy, written into the flat gradient buffer's memory (for
    paired layers, dy [2, rows, out] and x [rows, in] or [2, rows, in]: each network's own)."""
    np.matmul(dy.swapaxes(-1, -2), x, out=layer.grad_w)
    np.add.reduce(dy, axis=-2, out=layer.grad_b)


def _backward_np(layers: list[_Layer], outs: list[np.ndarray], d_out: np.ndarray) -> None:
    """From d loss / d (the chain's last tanh output) down through every layer: d z = d h * (1 - h^2), then the
    layer's weight and bias gradients, and d x = d z W for the layer below (none below the first)."""
    for i in range(len(layers) - 1, -1, -1):
        h = outs[i + 1]
        dz = h * h
        np.subtract(1.0, dz, out=dz)
        dz *= d_out
        _linear_backward_np(layers[i], outs[i], dz)
        if i:
            d_out = dz @ layers[i].w


class MlpByHand(PassByHand):
    """The update protocol's network pass by hand for MLP torsos without a core (MlpBackprop)."""

    backprop = MlpBackprop
