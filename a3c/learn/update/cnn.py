"""The CNN's update after its acting passes: a worker's image model (a3c.learn.model.CnnTorso, shared by actor and
critic, no LSTM core, linear heads) acts through ``CnnBackprop.policy``, which keeps every layer's activations of the
rollout; the update then needs no forward pass over the rollout's observations, only over its boundary observation
(the bootstrap value), and backpropagates by hand through the kept activations.

Why it is valid: a worker pulls the global weights before a rollout and changes them only after its update, so the
activations its acting passes computed are those the update's forward pass would compute again (to float rounding:
oneDNN may pick another kernel for a batch of K than for T x K rows). This is the MLP path's reuse
(a3c.learn.update.mlp.MlpBackprop.record) for the CNN, where the forward pass is the expensive part: on Pong the
update's
forward pass over 84 observations was a fifth of a worker's time (py-spy; docs/benchmarks/atari.md).

The backward pass by hand, layer by layer from the heads down (ReLU everywhere in the torso):
  heads      dW = d^T f, db = the sum of d over rows; d f = d_params W_pi + d_values w_v
  ReLU       d z = d h where h > 0, else 0 (h: the layer's output after the ReLU, kept)
  dense      dW = d z^T x, db = sum; d x = d z W (x: the flattened output of the last convolution)
  conv       ``torch.ops.aten.convolution_backward`` (the kernel autograd's Conv2d backward calls) gives d input,
             d weight and d bias from d z, the layer's input and its weight; the first layer's d input is not needed
The convolutions' backward runs on channels-last tensors (oneDNN's backward there is 20-35% cheaper;
docs/benchmarks/atari.md), so
the kept activations are stored channels-last as they are recorded. Every parameter's gradient is *written* into its
``.grad`` (views of the worker's flat gradient buffer), so the worker need not zero them first.

``--bf16``: the torso's layers compute in bfloat16 here too, on bfloat16 copies of their weights made once a rollout
(at its first acting pass: the weights were pulled just before it and stay as they are until its update), where
CnnTorso.forward's autocast casts every weight on every call (the dense layer's 6.4 MB on every acting pass). The
kept activations and the frames' copy are bfloat16 (half the memory traffic); the heads, the loss and every gradient
buffer stay in the parameters' dtype: each layer's gradient is computed in bfloat16, as autocast's backward computes
it, and written into the float32 gradient. With uint8 frames the input scale (1/255) is in the first layer's copy
instead of the frames, so acting converts each step's frames once, unscaled, into the update's buffer (the record's
``inputs``), and the update copies no frames at all (it did: ~2.4 ms of a Pong update of 80 rows).

``CnnBackprop.covers`` says why a model is not covered (an LSTM core, a non-Linear policy head such as the
Gaussian's, an MLP torso) and ``CnnBackprop.of`` is None for it: such a model takes another update path
(a3c.learn.update.paths: the reference, autograd, where no fast path covers it). ``CnnByHand`` is this module's network
pass
in the update protocol (a3c.learn.update.protocol)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from a3c.learn.model import ActorCritic, CnnTorso
from a3c.learn.update.by_hand import PassByHand


@dataclass
class CnnPass:
    """What the update's backward needs: the rollout's rows (``rows``) of the torso's input (unscaled, channels-last)
    and of every layer's output after its ReLU (channels-last convolution outputs, then the dense layer's features)."""

    rows: int
    inputs: torch.Tensor
    conv_outs: list[torch.Tensor]
    features: torch.Tensor


class _Record:
    """A rollout's acting passes: each layer's outputs for its T x K rows in buffers made once (channels-last for the
    convolutions), the policy's params, and the buffer the update copies the rollout's frames into. ``steps_done``
    counts the passes recorded in order since the rollout began (a pass out of order is not recorded, and the update
    then computes the forward pass itself)."""

    def __init__(
        self,
        steps: int,
        envs: int,
        image_shape: tuple[int, int, int],
        conv_shapes: list[torch.Size],
        width: int,
        param_dim: int,
        dtype: torch.dtype,
        params_dtype: torch.dtype,
    ) -> None:
        rows = steps * envs
        self.steps, self.envs = steps, envs
        cl = torch.channels_last
        self.conv_outs = [torch.zeros(rows, *shape, dtype=dtype).contiguous(memory_format=cl) for shape in conv_shapes]
        self.inputs = torch.zeros(rows, *image_shape, dtype=dtype).contiguous(memory_format=cl)
        self.features = torch.zeros(rows, width, dtype=dtype)
        self.params = torch.zeros(rows, param_dim, dtype=params_dtype)
        self.steps_done = 0

    def next_is(self, step: int, batch: int) -> bool:
        if step == 0:
            self.steps_done = 0
        return batch == self.envs and step == self.steps_done < self.steps

    def complete(self, steps: int, envs: int) -> bool:
        return self.steps_done == steps == self.steps and envs == self.envs


class CnnBackprop:
    """Acting, the update's forward pass and its backward pass for an ActorCritic with a shared CnnTorso and linear
    heads; build it with ``CnnBackprop.of(model)``."""

    writes_all_grads = True  # every parameter is a torso layer or a linear head: all gradients are written

    def __init__(self, model: ActorCritic, convs: list[nn.Conv2d], dense: nn.Linear, policy_head: nn.Linear) -> None:
        torso = model.actor
        assert isinstance(torso, CnnTorso)
        self.model, self.torso, self.convs, self.dense = model, torso, convs, dense
        self.policy_head, self.value_head = policy_head, model.value_head
        self.recorded: _Record | None = None
        self.dtype = dense.weight.dtype  # the parameters', their gradients' and the heads'
        # the torso's layers' (weight, bias), and what they compute with: themselves, or under --bf16 bfloat16 copies
        # (refreshed by _refresh_copies at each rollout's start)
        self.layer_params: list[tuple[torch.Tensor, torch.Tensor]] = []
        layers: list[nn.Conv2d | nn.Linear] = [*convs, dense]
        for layer in layers:
            assert layer.bias is not None  # (checked by ``of``)
            self.layer_params.append((layer.weight, layer.bias))
        self.copies: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.compute_dtype = self.dtype
        if torso.bf16:
            self.compute_dtype = torch.bfloat16
            # the convolutions' copies channels-last: their outputs then come channels-last too, the layout the
            # record keeps for the update (a plain copy a step, not a transposition) and oneDNN's faster one
            self.copies = [(_bf16_copy(w), b.detach().to(torch.bfloat16)) for w, b in self.layer_params]
        self.compute_params = self.layer_params if self.copies is None else self.copies  # what the layers run with
        # --bf16 of uint8 frames: the input scale (1/255) goes into the first layer's bfloat16 copy, so the layers
        # take the frames unscaled (exact in bfloat16), and acting converts each step's frames once, straight into
        # the update's copy of them (the record's ``inputs``): no scaling pass a step, no copy of the rollout's frames
        # at the update. conv(x, s W) = conv(s x, W) up to bfloat16's rounding of either product.
        self.scale_in_weights = self.copies is not None and torso.scale != 1.0
        # the frames' background level (a3c.spec.background), in the frames' own units: subtracted from every input
        # before anything else (CnnTorso.forward subtracts it after the scale: the same, (x - m) s = s x - c), so
        # the record and the update's copy hold the frames minus their background, which for uint8 frames are
        # integers in -255..255, exact in bfloat16 too. (Not a bias folded into the first layer, b - c sum(W): its
        # weight gradient would then be s sum(d x) - c sum(d), two near-equal terms on a frame that is mostly
        # background, whose difference bfloat16's rounding of the first swamps)
        self.level = torso.shift / torso.scale if torso.shift else 0.0

    @staticmethod
    def covers(model: ActorCritic) -> str | None:
        """None where the passes by hand cover ``model``'s shape (a CnnTorso of Conv2d + ReLU layers and a dense
        ReLU layer, shared by actor and critic, no core, a Linear policy head); else why not, in a few words."""
        torso = model.actor
        if model.lstm:
            return "an LSTM core (--lstm)"
        if not isinstance(torso, CnnTorso):
            return f"a {type(torso).__name__}, not a CNN torso"
        if model.critic is not None:
            return "a separate critic torso"
        head = model.policy_head
        if not isinstance(head, nn.Linear) or head.bias is None:
            return f"a {type(head).__name__} policy head, not one Linear layer"
        if CnnBackprop._layers_of(torso) is None:
            return "a CNN torso of other layers than Conv2d + ReLU and a dense ReLU layer"
        return None

    @staticmethod
    def _layers_of(torso: CnnTorso) -> tuple[list[nn.Conv2d], nn.Linear] | None:
        """The torso's convolutions and its dense layer, where it is made of the layers the passes by hand know."""
        modules = list(torso.convs)
        convs, relus = modules[0:-1:2], modules[1:-1:2]
        if not (
            isinstance(modules[-1], nn.Flatten)
            and len(convs) == len(relus) > 0
            and all(isinstance(c, nn.Conv2d) and c.bias is not None and c.groups == 1 for c in convs)
            and all(isinstance(r, nn.ReLU) for r in relus)
        ):
            return None
        dense = torso.fc[0]
        if not (isinstance(dense, nn.Linear) and isinstance(torso.fc[1], nn.ReLU) and len(torso.fc) == 2):
            return None
        return convs, dense  # type: ignore[return-value]

    @classmethod
    def of(cls, model: ActorCritic) -> CnnBackprop | None:
        if cls.covers(model) is not None:
            return None
        if any(p.grad is None for p in model.parameters()):
            return None  # the gradients go into existing .grad tensors (the flat buffer's views)
        assert isinstance(model.actor, CnnTorso) and isinstance(model.policy_head, nn.Linear)
        layers = cls._layers_of(model.actor)
        assert layers is not None
        return cls(model, layers[0], layers[1], model.policy_head)

    # -- forward ----------------------------------------------------------------------------------------------------
    def image(self, obs: torch.Tensor | np.ndarray) -> torch.Tensor:
        """The observations as the convolutions take them, [B, C, H, W], in their own dtype, unscaled (a view)."""
        x = torch.from_numpy(obs) if isinstance(obs, np.ndarray) else obs
        if self.torso.add_channel:
            return x.unsqueeze(1)
        return x.permute(0, 3, 1, 2) if self.torso.channels_last else x

    def inputs(self, obs: torch.Tensor | np.ndarray) -> torch.Tensor:
        """What the layers take: [B, C, H, W] in their compute dtype, scaled (CnnTorso.forward's input), or unscaled
        where the first layer's weights carry the scale (``scale_in_weights``)."""
        return self._converted(self.image(obs))

    def _converted(self, image: torch.Tensor) -> torch.Tensor:
        x = self._shifted(image)
        return x if self.scale_in_weights else x * self.torso.scale

    def _shifted(self, image: torch.Tensor) -> torch.Tensor:
        """The frames in the compute dtype, minus the background level (a new tensor then, never ``image``): uint8
        frames converted first (integers, exact in bfloat16 too), others in the parameters' dtype first (as
        CnnTorso.forward computes it, before autocast rounds it to bfloat16)."""
        if not self.level:
            return image.to(self.compute_dtype)
        if image.dtype == torch.uint8:
            return image.to(self.compute_dtype, copy=True).sub_(self.level)
        return (image.to(self.dtype) - self.level).to(self.compute_dtype)

    def backward_inputs(self, obs: torch.Tensor, into: torch.Tensor | None = None) -> torch.Tensor:
        """The update's copy of the first convolution's input: the compute dtype, channels-last, *unscaled* (one
        conversion of the uint8 frames, exact in bfloat16 too; ``backward`` scales the first layer's weight gradient
        instead, which is linear in it), minus the background level."""
        image = self.image(obs)
        if into is None:
            into = torch.empty(image.shape, dtype=self.compute_dtype, memory_format=torch.channels_last)
        if self.level and image.dtype != torch.uint8:
            return into.copy_(image.to(self.dtype) - self.level)  # (as ``_shifted``: rounded once)
        into.copy_(image)
        return into.sub_(self.level) if self.level else into

    def _refresh_copies(self) -> None:
        """--bf16: the layers' bfloat16 copies from their weights as they are now (a no-op otherwise)."""
        if self.copies is not None:
            for i, ((w, b), (w_copy, b_copy)) in enumerate(zip(self.layer_params, self.copies, strict=True)):
                w_copy.copy_(w * self.torso.scale if i == 0 and self.scale_in_weights else w)
                b_copy.copy_(b)

    def _layers(self, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Each convolution's output after its ReLU, and the dense layer's features (no autograd), in the compute
        dtype."""
        outs = []
        for i, conv in enumerate(self.convs):
            if self.copies is None:  # (the modules themselves: their hooks see what they would in CnnTorso.forward)
                x = conv(x)
            else:
                x = F.conv2d(x, *self.compute_params[i], conv.stride, conv.padding, conv.dilation)
            x = F.relu(x, inplace=True)
            outs.append(x)
        features = F.relu(F.linear(x.flatten(1), *self.compute_params[-1]), inplace=True)
        return outs, features

    def _heads(self, features: torch.Tensor, head: nn.Linear) -> torch.Tensor:
        """A head's output on the torso's features, in the parameters' dtype."""
        return F.linear(features.to(self.dtype), head.weight, head.bias)

    def record(self, steps: int, envs: int) -> None:
        """From now on keep the acting passes of each rollout of ``steps`` x ``envs`` for its update (the weights do
        not change between a rollout's acting and its update)."""
        with torch.no_grad():
            dtype = self.compute_dtype
            outs, features = self._layers(torch.zeros(1, *self.torso.image_shape, dtype=dtype))
        param_dim = self.policy_head.out_features
        shapes = [o.shape[1:] for o in outs]
        self.recorded = _Record(
            steps, envs, self.torso.image_shape, shapes, features.shape[1], param_dim, dtype, self.dtype
        )

    def policy(self, obs: torch.Tensor | np.ndarray, step: int | None = None) -> torch.Tensor:
        """ActorCritic.policy's params for acting (no autograd); with ``step`` (the rollout step these observations
        are), the pass's activations are recorded for the update. At a rollout's first step (and without a step)
        --bf16's copies are made from the weights first."""
        if step is None or step == 0:
            self._refresh_copies()
        with torch.no_grad():
            image = self.image(obs)
            rec = self.recorded
            recording = rec is not None and step is not None and rec.next_is(step, image.shape[0])
            rows = slice(step * rec.envs, (step + 1) * rec.envs) if rec is not None and step is not None else None
            if recording and self.scale_in_weights:
                assert rec is not None and rows is not None
                # the frames unscaled, converted once: the update's input too. (Converted first, then laid out
                # channels-last: a conversion and a transposition in one copy_ take 2.3x as long, 118 against 52 us)
                x = rec.inputs[rows].copy_(self._shifted(image))
            else:
                x = self._converted(image)
            outs, features = self._layers(x)
            params = self._heads(features, self.policy_head)
            if recording:
                assert rec is not None and rows is not None
                for kept, out in zip(rec.conv_outs, outs, strict=True):
                    kept[rows] = out
                rec.features[rows] = features
                rec.params[rows] = params
                rec.steps_done += 1
        return params

    def unroll(
        self, obs: torch.Tensor | np.ndarray, final_obs: torch.Tensor | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, CnnPass]:
        """ActorCritic.unroll of this model: obs [T+1, K, ...] -> (params [T*K, P], values [T+1, K], V(final_obs)
        [T, K] or None, what ``backward`` needs), as arrays. After a recorded rollout only the boundary observations
        obs[T] go through the network; otherwise the whole rollout does (still without autograd)."""
        obs_t = torch.from_numpy(obs) if isinstance(obs, np.ndarray) else obs
        T, K = obs_t.shape[0] - 1, obs_t.shape[1]
        rows = T * K
        flat = obs_t.reshape((T + 1) * K, *obs_t.shape[2:])
        with torch.no_grad():
            rec = self.recorded
            recorded = rec is not None and rec.complete(T, K)
            if recorded and self.scale_in_weights:
                assert rec is not None
                inputs = rec.inputs  # (written by the acting passes)
            else:
                inputs = self.backward_inputs(
                    flat[:rows], None if rec is None or rec.inputs.shape[0] != rows else rec.inputs
                )
            if recorded:
                assert rec is not None
                conv_outs, features, params = rec.conv_outs, rec.features, rec.params
                boundary = self._layers(self.inputs(flat[rows:]))[1]
                all_features = torch.cat((features, boundary))
            else:
                self._refresh_copies()  # (acting was not recorded: its copies may be older than the weights)
                outs, all_features = self._layers(self.inputs(flat))
                conv_outs = [o[:rows].contiguous(memory_format=torch.channels_last) for o in outs]
                features = all_features[:rows]
                params = self._heads(features, self.policy_head)
            if rec is not None:
                rec.steps_done = 0  # used once: the next update needs the next rollout's acting passes
            values = self._heads(all_features, self.value_head).view(T + 1, K)
            final_values = None
            if final_obs is not None:  # (an episode truncated in this rollout: V of its final observation)
                final_t = torch.from_numpy(final_obs) if isinstance(final_obs, np.ndarray) else final_obs
                final_features = self._layers(self.inputs(final_t.reshape(rows, *final_t.shape[2:])))[1]
                final_values = self._heads(final_features, self.value_head).view(T, K).numpy()
        return params.numpy(), values.numpy(), final_values, CnnPass(rows, inputs, list(conv_outs), features)

    def forward(self, obs: torch.Tensor | np.ndarray) -> tuple[np.ndarray, np.ndarray, CnnPass]:
        """obs [B, *obs_shape] -> (params [B, P], values [B], what ``backward`` needs), with the weights as they are
        now (no record: a minibatch of a later epoch, after a pull)."""
        obs_t = torch.from_numpy(obs) if isinstance(obs, np.ndarray) else obs
        with torch.no_grad():
            self._refresh_copies()
            inputs = self.backward_inputs(obs_t)
            outs, features = self._layers(self.inputs(obs_t))
            conv_outs = [o.contiguous(memory_format=torch.channels_last) for o in outs]
            params = self._heads(features, self.policy_head)
            values = self._heads(features, self.value_head).view(-1)
        return params.numpy(), values.numpy(), CnnPass(obs_t.shape[0], inputs, conv_outs, features)

    # -- backward ---------------------------------------------------------------------------------------------------
    def backward(self, saved: CnnPass, dparams: torch.Tensor | np.ndarray, dvalues: torch.Tensor | np.ndarray) -> None:
        """Into the parameters' .grad (written, not accumulated): the gradient of sum(dparams * params) +
        sum(dvalues * values[:T*K]), as autograd would leave it in zeroed gradients (to float rounding)."""
        dp = torch.from_numpy(dparams) if isinstance(dparams, np.ndarray) else dparams
        dv = torch.from_numpy(dvalues) if isinstance(dvalues, np.ndarray) else dvalues
        compute = self.compute_dtype
        features = saved.features.to(self.dtype)  # (the heads' dtype: a copy under --bf16 only)
        with torch.no_grad():
            dp, dv = dp.to(self.dtype), dv.to(self.dtype)
            head, value = self.policy_head, self.value_head
            assert head.weight.grad is not None and head.bias is not None and head.bias.grad is not None
            assert value.weight.grad is not None and value.bias is not None and value.bias.grad is not None
            torch.mm(dp.t(), features, out=head.weight.grad)
            torch.sum(dp, 0, out=head.bias.grad)
            torch.mm(dv.unsqueeze(0), features, out=value.weight.grad)
            value.bias.grad.copy_(dv.sum().reshape(1))
            # d features, then through the dense layer's ReLU
            d = torch.addmm(dv.unsqueeze(1) * value.weight, dp, head.weight)
            d = _relu_backward(d, features)
            d = d.to(compute)  # from here down, the torso's dtype (a no-op but under --bf16)
            dense = self.dense
            assert dense.weight.grad is not None and dense.bias is not None and dense.bias.grad is not None
            last = saved.conv_outs[-1]
            # (flatten: the logical C, H, W order, any layout; under --bf16 the product in bfloat16, then written)
            if self.copies is None:
                torch.mm(d.t(), last.flatten(1), out=dense.weight.grad)
                torch.sum(d, 0, out=dense.bias.grad)
            else:
                dense.weight.grad.copy_(torch.mm(d.t(), last.flatten(1)))
                dense.bias.grad.copy_(torch.sum(d, 0, dtype=self.dtype))
            # d (the last convolution's output), [rows, C, H, W] in its contiguous layout, then channels-last
            d_out = torch.mm(d, self.compute_params[-1][0]).view(last.shape)
            d_out = d_out.contiguous(memory_format=torch.channels_last)
            for i in range(len(self.convs) - 1, -1, -1):
                conv, out = self.convs[i], saved.conv_outs[i]
                d_out = _relu_backward(d_out, out)
                layer_input = saved.inputs if i == 0 else saved.conv_outs[i - 1]
                d_in, d_w, d_b = torch.ops.aten.convolution_backward(
                    d_out,
                    layer_input,
                    self.compute_params[i][0],
                    [conv.out_channels],
                    list(conv.stride),
                    list(conv.padding),
                    list(conv.dilation),
                    False,
                    [0, 0],
                    1,
                    [i > 0, True, True],
                )
                assert conv.weight.grad is not None and conv.bias is not None and conv.bias.grad is not None
                conv.weight.grad.copy_(d_w)
                if i == 0 and self.torso.scale != 1.0:
                    conv.weight.grad.mul_(self.torso.scale)  # the inputs were kept unscaled (backward_inputs)
                conv.bias.grad.copy_(d_b)
                d_out = d_in


class CnnByHand(PassByHand):
    """The update protocol's network pass by hand for the CNN, float32 or --bf16, any input dtype (CnnBackprop)."""

    backprop = CnnBackprop


def _bf16_copy(weight: torch.Tensor) -> torch.Tensor:
    """A layer's bfloat16 weight for --bf16 (refreshed in place, keeping its layout): channels-last for a
    convolution's."""
    copy = weight.detach().to(torch.bfloat16)
    return copy.contiguous(memory_format=torch.channels_last) if copy.dim() == 4 else copy


def _relu_backward(grad: torch.Tensor, relu_out: torch.Tensor) -> torch.Tensor:
    """The gradient through a ReLU from its output: ``grad`` where the output is positive, else 0, in one pass (the
    kernel autograd's ReLU backward calls). ``grad * (out > 0)`` makes a mask and converts it to ``grad``'s dtype
    first: 1.84 ms against 0.16 ms for the first convolution's 80 x 32 x 20 x 20 in bfloat16, channels-last."""
    return torch.ops.aten.threshold_backward(grad, relu_out, 0)
