"""The Trainer's optimisers: Adam (AdamW with a weight decay) as torch's fused kernel, called
directly, on one flat buffer; and torch.optim.Adafactor with the same face (`make_optimizer`).

torch.optim.Adam(fused=True) runs the same kernel, but its first call imports torch._dynamo,
seconds of every training process (docs/performance.md, "Why the code is shaped as it is").

The parameters, their gradients and both Adam moments each live in one flat buffer, the tensors
being views into it: on a CPU a kernel over a list of tensors loops over them one by one, so one
buffer is a fraction of the cost. A parameter of OWN_GRADIENT_BYTES or more (a big vocabulary's
token table) keeps its own tensors instead, and the gradient backward made (FusedAdam says why):
one more kernel call, a gigabyte less at NLLB's size. Adam's update is elementwise, so the flat
step is bit for bit torch.optim.Adam(fused=True)'s (tests/core/test_optim.py checks it).

What a caller sees stays torch.optim's: `state[param]` = step, exp_avg, exp_avg_sq (views) once a
step was taken, `param_groups[0]["lr"]`. Code that swaps a parameter's storage or drops
its .grad (`p.data = ...` as Module.to does, model.zero_grad()) is put right at the next norm or
step: the values are taken back into the buffers, never silently skipped.

Weight decay, as transformers' Trainer groups it (Trainer.get_decay_parameter_names): every
parameter but biases and norms' weights (a parameter inside an nn.LayerNorm, or whose name says
bias or norm: T5's relative position bias is one, by its name); a fine-tune decays so unless
TrainConfig.decay_all, which decays every parameter (what minitx did before). The flat buffer
holds the decayed parameters first, so each part is one kernel call: AdamW's over the first,
Adam's over the rest.
"""

from __future__ import annotations

import re

import torch

# transformers' Trainer's names of parameters it does not decay (matched in the lowercased name)
NO_DECAY_NAMES = tuple(re.compile(p) for p in (r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)",
                                                r"_norm(?:$|\.)"))


def decayed_names(model: torch.nn.Module) -> set[str]:
    """The parameters transformers' Trainer decays: not inside an nn.LayerNorm, and not named
    as a bias or a norm (NO_DECAY_NAMES), as its get_parameter_names walks the modules."""
    norms = {f"{m}.{n}" if m else n for m, module in model.named_modules()
             if isinstance(module, torch.nn.LayerNorm) for n, _ in module.named_parameters()}
    return {name for name, _ in model.named_parameters()
            if name not in norms and not any(p.search(name.lower()) for p in NO_DECAY_NAMES)}


def decay_flags(model: torch.nn.Module, params: list[torch.Tensor], cfg) -> list[bool] | None:
    """Which of `params` (the model's) weight decay falls on: Trainer's groups for a fine-tune,
    every one with cfg.decay_all or from scratch (None)."""
    if not cfg.init or cfg.decay_all:
        return None
    decayed = decayed_names(model)
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] in decayed for p in params]


# A parameter this big keeps the gradient backward makes instead of a slot in the flat buffer
# (FusedAdam): the biggest of NLLB-600M's layers' weights is 16 MiB, its token table 1 GB
OWN_GRADIENT_BYTES = 1 << 25  # 32 MiB


class FusedAdam:
    """Adam over a fixed list of float parameters on one device; with weight_decay, AdamW
    (torch.optim.AdamW's decoupled decay, its fused kernel) on the parameters `decay` marks
    (default: all of them).

    A parameter of at least `own_bytes` (default OWN_GRADIENT_BYTES) stays out of the flat buffers: its
    gradient is the one backward makes, let go once the step has used it, as torch.optim's
    loop (step, zero_grad) lets it go. Backward sums a tied table's gradients (NLLB's 256,206 x
    1024 table feeds both embeddings and the output layer: 1 GB) in a tensor of its own and hands
    that tensor over as the gradient; a slot in the flat buffer would hold the same gigabyte
    twice, and beside the most activations, at the start of backward (docs/performance.md)."""

    FIELDS = ("step", "exp_avg", "exp_avg_sq")  # each parameter's state, as torch.optim names it

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float],
                 eps: float, weight_decay: float = 0.0, decay: list[bool] | None = None,
                 own_bytes: int | None = None) -> None:
        self.weight_decay = weight_decay
        self.params = list(params)
        decay = [True] * len(self.params) if decay is None else list(decay)
        if not self.params or len({(p.device, p.dtype) for p in self.params}) != 1:
            raise ValueError("FusedAdam needs parameters of one dtype on one device")
        self.param_groups = [{"lr": lr}]  # the Trainer sets each step's lr here
        self.betas, self.eps = betas, eps
        first = self.params[0]
        sizes = [p.numel() for p in self.params]
        own_bytes = OWN_GRADIENT_BYTES if own_bytes is None else own_bytes
        # the big ones (each its own tensors, decayed first) and the flat ones: the decayed
        # parameters first, the rest after (both in their order), one slice each
        own = [i for i, p in enumerate(self.params) if sizes[i] * p.element_size() >= own_bytes]
        self._own = sorted(own, key=lambda i: not decay[i])
        self._own_decayed = sum(decay[i] for i in self._own)
        order = sorted((i for i in range(len(self.params)) if i not in set(own)), key=lambda i: not decay[i])
        self._decayed = sum(sizes[i] for i in order if decay[i])  # elements of the first slice
        self._order, self._split = order, [sizes[i] for i in order]
        flat = [torch.zeros(sum(self._split), dtype=first.dtype, device=first.device) for _ in range(2)]
        self._weights, self._grads = flat  # each (N,)
        # Adam's two moments, made at the first step (or a resumed run's load): by then a
        # fine-tune's caller has let its base go, whose weights the model held until this
        # buffer took them (docs/performance.md)
        self._exp_avg: torch.Tensor | None = None
        self._exp_avg_sq: torch.Tensor | None = None
        self._moment_views: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._step = torch.zeros((), dtype=torch.float32, device=first.device)  # as torch.optim keeps it
        self._stepped = False
        self._gathered = False
        self._views = self._views_of(flat)  # flat parameter index -> (weight, grad)
        self._gather()  # each weight moves into its buffer, each .grad points at its own
        self._gathered = False  # and the first backward's result is gathered before use

    # -- the flat buffers ----------------------------------------------------------------------
    def _views_of(self, buffers: list[torch.Tensor]) -> dict[int, tuple[torch.Tensor, ...]]:
        """Each flat parameter's views into each of `buffers`, by the parameter's index."""
        chunks = [dict(zip(self._order, buf.split(self._split))) for buf in buffers]
        return {i: tuple(chunk[i].view_as(self.params[i]) for chunk in chunks) for i in self._order}

    def _moments(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each parameter's (exp_avg, exp_avg_sq), in the parameters' order (views, or a big
        parameter's own tensors), made (zeros) at first need."""
        if self._exp_avg is None:
            self._exp_avg, self._exp_avg_sq = (torch.zeros_like(self._weights) for _ in range(2))
            views = self._views_of([self._exp_avg, self._exp_avg_sq])
            views.update({i: (torch.zeros_like(self.params[i]), torch.zeros_like(self.params[i]))
                          for i in self._own})
            self._moment_views = [views[i] for i in range(len(self.params))]
        return self._moment_views

    def _attach_grads(self) -> None:
        for i, (_, grad) in self._views.items():
            self.params[i].grad = grad

    def _gather(self) -> None:
        """Before reading the gradient buffer: take back any parameter or gradient that code
        outside moved to other storage (its values are copied in, then it points here again).
        Once per step: the norm gathers, and the step after it need not again."""
        if self._gathered:
            return
        self._gathered = True
        with torch.no_grad():
            for i, (weight, grad) in self._views.items():
                p = self.params[i]
                if p.data_ptr() != weight.data_ptr():
                    weight.copy_(p)
                    p.data = weight
                if p.grad is not grad:
                    if p.grad is None:
                        grad.zero_()
                    else:
                        grad.copy_(p.grad)
                    p.grad = grad

    def _own_grads(self) -> list[torch.Tensor]:
        """The big parameters' gradients as backward left them (zeros where it made none)."""
        return [torch.zeros_like(self.params[i]) if self.params[i].grad is None else self.params[i].grad
                for i in self._own]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the gradient buffer (set_to_none is accepted for torch.optim's signature: the
        gradients must stay views into the buffer, so they are zeroed, not dropped); a big
        parameter's gradient is dropped."""
        self._grads.zero_()
        self._attach_grads()
        for i in self._own:
            self.params[i].grad = None
        self._gathered = False  # backward comes next: whatever it writes is gathered before use

    @torch.no_grad()
    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """torch.nn.utils.clip_grad_norm_ over the one buffer and the big parameters' own
        gradients: scale the gradients to at most max_norm (2-norm over all of them); returns
        the norm before clipping."""
        self._gather()
        own = [g for g in (self.params[i].grad for i in self._own) if g is not None]
        norm = torch.linalg.vector_norm(self._grads)
        if own:
            norm = torch.linalg.vector_norm(torch.stack([norm, *(torch.linalg.vector_norm(g) for g in own)]))
        scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        for grads in (self._grads, *own):
            grads.mul_(scale)
        return norm

    @torch.no_grad()
    def step(self) -> None:
        self._gather()
        self._gathered = False  # the next step's grads need gathering, zero_grad or not
        moments = self._moments()
        self._step.add_(1)
        self._stepped = True
        # AdamW's kernel only with a decay: Adam's stays bit for bit what scratch runs computed
        k = self._decayed if self.weight_decay else 0
        for part, decay in ((slice(0, k), self.weight_decay), (slice(k, None), 0.0)):
            self._kernel([self._weights[part]], [self._grads[part]], [self._exp_avg[part]],
                         [self._exp_avg_sq[part]], decay)
        grads = self._own_grads()
        k = self._own_decayed if self.weight_decay else 0
        for part, decay in ((slice(0, k), self.weight_decay), (slice(k, None), 0.0)):
            chosen = self._own[part]
            self._kernel([self.params[i].data for i in chosen], grads[part], [moments[i][0] for i in chosen],
                         [moments[i][1] for i in chosen], decay)
        for i in self._own:  # used: let go (the watching's pass after an evaluation makes its own)
            self.params[i].grad = None

    def _kernel(self, weights: list[torch.Tensor], grads: list[torch.Tensor], exp_avg: list[torch.Tensor],
                exp_avg_sq: list[torch.Tensor], decay: float) -> None:
        """torch's fused Adam (AdamW with a decay) over the tensors given (none: nothing)."""
        if not weights or not weights[0].numel():
            return
        kernel = torch._fused_adamw_ if decay else torch._fused_adam_
        kernel(weights, grads, exp_avg, exp_avg_sq, [], [self._step] * len(weights),
               amsgrad=False, lr=self.param_groups[0]["lr"], beta1=self.betas[0], beta2=self.betas[1],
               weight_decay=decay, eps=self.eps, maximize=False, grad_scale=None, found_inf=None)

    # -- state, as torch.optim shows it --------------------------------------------------------
    @property
    def state(self) -> dict[torch.Tensor, dict[str, torch.Tensor]]:
        """{param: {step, exp_avg, exp_avg_sq}}, views into the buffers (a big parameter's own
        tensors); empty before the first step, as torch.optim's."""
        if not self._stepped:
            return {}
        return {p: {"step": self._step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
                for p, (exp_avg, exp_avg_sq) in zip(self.params, self._moments())}

    @torch.no_grad()
    def load_state(self, state: dict[torch.Tensor, dict[str, torch.Tensor]]) -> None:
        """Take saved moments (torch.optim's layout, validated by the caller). The step count is
        one for all parameters: the largest saved (they are equal in every file minitx writes)."""
        if not state:
            return
        index = {id(p): i for i, p in enumerate(self.params)}
        for p, s in state.items():
            exp_avg, exp_avg_sq = self._moments()[index[id(p)]]
            exp_avg.copy_(s["exp_avg"])
            exp_avg_sq.copy_(s["exp_avg_sq"])
        self._step.fill_(max(float(s["step"]) for s in state.values()))
        self._stepped = True


class Adafactor:
    """torch.optim.Adafactor (T5's optimiser) with FusedAdam's face: the Trainer sets the lr in
    param_groups, clips, steps, and saves and restores `state` the same way."""

    FIELDS = ("step", "row_var", "col_var", "variance")  # a matrix keeps row/col, a vector variance

    def __init__(self, params: list[torch.Tensor], lr: float, weight_decay: float = 0.0,
                 decay: list[bool] | None = None) -> None:
        self.params = list(params)
        decay = [True] * len(self.params) if decay is None else list(decay)
        groups = [{"params": [p for p, d in zip(self.params, decay) if d == want],
                   "weight_decay": weight_decay if want else 0.0} for want in (True, False)]
        self._optim = torch.optim.Adafactor([g for g in groups if g["params"]], lr=lr)
        self.param_groups = self._optim.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._optim.zero_grad(set_to_none=False)
        for p in self.params:  # every parameter has a gradient, zero if backward left it out
            if p.grad is None:
                p.grad = torch.zeros_like(p)

    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        return torch.nn.utils.clip_grad_norm_(self.params, max_norm)

    def step(self) -> None:
        self._optim.step()

    @property
    def state(self) -> dict[torch.Tensor, dict[str, torch.Tensor]]:
        return {p: dict(s) for p, s in self._optim.state.items() if s}

    @torch.no_grad()
    def load_state(self, state: dict[torch.Tensor, dict[str, torch.Tensor]]) -> None:
        for p, s in state.items():
            self._optim.state[p] = {k: v.clone() for k, v in s.items()}


def make_optimizer(params: list[torch.Tensor], cfg, model: torch.nn.Module | None = None
                   ) -> FusedAdam | Adafactor:
    """The optimiser a TrainConfig names, set up as it says; weight decay on the parameters
    decay_flags picks from `model`'s (on all of them without a model)."""
    decay = decay_flags(model, params, cfg) if model is not None else None
    if cfg.optimizer == "adafactor":
        return Adafactor(params, cfg.lr, cfg.weight_decay, decay)
    return FusedAdam(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                     weight_decay=cfg.weight_decay, decay=decay)
