"""DistributedOptimizer: a plan executed on a PyTorch model's gradients during backward."""
import os
import time

import torch

from .. import runtime, world
from ..runtime import Runtime, ZenoptError
from .planning import (describe_mismatch, match_gradients, match_sparse_gradients,
                       model_signature, read_plan)


class DistributedOptimizer(torch.optim.Optimizer):
    """Wraps `optimizer` so that step() uses gradients averaged over the ranks, as `plan` says.

    A hook on each parameter's gradient accumulator copies the gradient into a buffer
    registered with libzenrt and marks it ready as soon as backward has produced it, so the
    runtime fuses, compresses and communicates buckets while backward goes on, in the plan's
    order and streams. step() (or synchronize(), e.g. before clipping gradients) waits for
    every bucket, writes the averages into `p.grad` and steps the wrapped optimizer.
    Error-feedback residuals stay in the runtime from step to step.

    Row-sparse gradients (embedding tables, the plan's `sparse_tensors`) are summed by
    libzenrt's sparse all-reduce with the scheme the plan chose for each, exactly (every scheme
    gives the same bits on every rank): a sparse COO gradient (nn.Embedding(sparse=True)) by
    its rows, a dense one by its non-zero rows (Zen's case: most models leave sparse off).
    The average keeps the gradient's layout (sparse COO stays sparse, over the rows any rank
    touched whose average is non-zero). A gradient in a dense bucket that arrives sparse is
    averaged dense and handed back sparse.

    Gradient accumulation: with backward_passes_per_step=N, the gradients are communicated
    after the N-th backward; fewer passes before step() are fine (step() sends what p.grad
    holds). Parameters that got no gradient in a step contribute zeros.

    timeout_s: seconds any wait for a bucket may take before it fails naming the bucket
    (0: the environment's ZENRT_TIMEOUT_S, else 300), so a rank that stopped never leaves the
    others waiting forever.

    The wrapper shares param_groups and state with the wrapped optimizer, so learning-rate
    schedulers and state_dict() work on either. Gradients are fp32 on CPUs (MPI) or on one
    CUDA device per rank (NCCL, when libzenrt is built with CUDA).
    """

    def __init__(self, optimizer, model, plan, backward_passes_per_step=1, timeout_s=0.0):
        # Not Optimizer.__init__: the wrapped optimizer owns the parameter groups and state.
        self._optimizer = optimizer
        self.defaults = optimizer.defaults
        self.param_groups = optimizer.param_groups
        self.state = optimizer.state
        if backward_passes_per_step < 1:
            raise ZenoptError(f"backward_passes_per_step is {backward_passes_per_step}; "
                              "it must be >= 1")
        self._passes_per_step = backward_passes_per_step
        self._hooks = []
        self._runtime = None
        world.init()
        path = os.fspath(plan)
        device = self._device_of(model)

        # Collective, and failing on every rank together: an unreadable or invalid plan,
        # ranks given different plans, a plan for another world size.
        self._runtime = Runtime(path, device_memory=device.type == "cuda", timeout_s=timeout_s)
        plan_json = read_plan(path)
        pairs, problems = match_gradients(plan_json, model)
        sparse_pairs, sparse_problems = match_sparse_gradients(plan_json, model)
        problems += sparse_problems
        mapped = {id(p) for _, p in pairs} | {id(p) for _, p in sparse_pairs}
        names = {id(p): name for name, p in model.named_parameters()}
        unplanned = [names.get(id(p), f"<unnamed {tuple(p.shape)}>") for group in
                     optimizer.param_groups for p in group["params"]
                     if p.requires_grad and id(p) not in mapped]
        if unplanned and not problems:
            problems.append("the optimizer has parameters without a gradient in the plan: " +
                            ", ".join(unplanned))
        world.agree(f"rank {world.rank()}: " + describe_mismatch(path, model, problems)
                    if problems else None, "to match the model to the plan")
        world.agree_on_value(model_signature(model.named_parameters()),
                             "models (parameter names, shapes or dtypes)")

        self._gradients = pairs
        self._sparse = sparse_pairs
        # What report() compares: the plan's predicted step and when each step() began.
        self.predicted_step_us = plan_json["predictions"]["iteration_us"]
        self.step_starts = []
        # Tables whose gradients torch makes sparse: a rank without one gets the average sparse.
        self._sparse_layout = {id(m.weight) for m in model.modules()
                               if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))
                               and m.sparse}
        self._timeout_s = timeout_s
        self._device = device
        self._names = {name: name.encode() for name, _ in pairs}
        self._buffers = {}
        for name, parameter in pairs:
            buffer = torch.zeros(parameter.numel(), dtype=torch.float32, device=device)
            self._runtime.register(self._names[name], buffer.data_ptr(), buffer.numel())
            self._buffers[name] = buffer
        decoupled = [bucket for bucket in plan_json["buckets"]
                     if bucket["collectives"][-1]["decoupled"]]
        # A decoupled all-gather may finish after wait_all; the optimizer step needs it.
        self._decoupled = [self._names[t["name"]] for bucket in decoupled
                           for t in bucket["tensors"]]
        self._passes = {name: 0 for name, _ in pairs}
        self._marked = set()
        self._synchronized = False
        self._cuda = device.type == "cuda"
        with torch.enable_grad():
            for name, parameter in pairs:
                # The AccumulateGrad node of the parameter: its hook runs once p.grad holds
                # this backward's gradient (the pattern that works in torch 1.13).
                accumulator = parameter.expand_as(parameter).grad_fn.next_functions[0][0]
                self._hooks.append((accumulator, accumulator.register_hook(
                    self._gradient_hook(name, parameter))))

    @staticmethod
    def _device_of(model):
        devices = {p.device for p in model.parameters()}
        if len(devices) != 1:
            raise ZenoptError(f"model {type(model).__name__} has parameters on "
                              f"{sorted(map(str, devices))}: zenopt needs one device per rank")
        return devices.pop()

    def _gradient_hook(self, name, parameter):
        def hook(*_):
            passes = self._passes[name] + 1
            if passes > self._passes_per_step:
                raise ZenoptError(
                    f"rank {world.rank()}: parameter {name} got {passes} gradients before step(), but "
                    f"backward_passes_per_step is {self._passes_per_step} (call step() after "
                    "each backward, or pass backward_passes_per_step=N to accumulate)")
            self._passes[name] = passes
            if passes == self._passes_per_step:
                self._mark_ready(name, parameter)
        return hook

    def _mark_ready(self, name, parameter):
        buffer = self._buffers[name]
        with torch.no_grad():
            if parameter.grad is None:
                buffer.zero_()
            elif parameter.grad.is_sparse:  # planned dense: averaged dense
                buffer.copy_(parameter.grad.to_dense().reshape(-1))
            else:
                buffer.copy_(parameter.grad.reshape(-1))
        if self._cuda:  # libzenrt reads the buffer on its own streams
            torch.cuda.current_stream(buffer.device).synchronize()
        self._runtime.mark_ready(self._names[name])
        self._marked.add(name)

    def synchronize(self):
        """Waits for every bucket and writes the averaged gradients into p.grad."""
        for name, parameter in self._gradients:
            if name not in self._marked:
                self._mark_ready(name, parameter)
        # While the buckets are in flight (the runtime's own thread and communicators).
        for entry, parameter in self._sparse:
            self._synchronize_sparse(entry, parameter)
        self._runtime.wait_all()
        for name in self._decoupled:
            self._runtime.wait(name)
        with torch.no_grad():
            for name, parameter in self._gradients:
                averaged = self._buffers[name].view_as(parameter)
                if parameter.grad is None:
                    parameter.grad = (averaged.to_sparse(1) if id(parameter) in
                                      self._sparse_layout else averaged.clone())
                elif parameter.grad.is_sparse:
                    parameter.grad = averaged.to_sparse(parameter.grad.sparse_dim())
                else:
                    parameter.grad.copy_(averaged)
        self._passes = dict.fromkeys(self._passes, 0)
        self._marked.clear()
        self._synchronized = True

    def _synchronize_sparse(self, entry, parameter):
        """Averages a row-sparse gradient over the ranks (zenrt_sparse_allreduce, collective:
        every rank calls it for every sparse tensor, in plan order, with or without a
        gradient)."""
        rows, width = entry["rows"], entry["row_elements"]
        grad = parameter.grad
        with torch.no_grad():
            if grad is None:
                indices = torch.zeros(0, dtype=torch.int64)
                values = torch.zeros(0, width, dtype=torch.float32)
            elif grad.is_sparse:
                coalesced = grad.coalesce()
                indices = coalesced.indices()[0]
                values = coalesced.values().reshape(-1, width)
            else:
                dense = grad.reshape(rows, width)
                indices = (dense != 0).any(dim=1).nonzero().flatten()
                values = dense.index_select(0, indices)
            # The C API works on host memory.
            indices = indices.to("cpu", torch.int64).contiguous()
            values = values.to("cpu", torch.float32).contiguous()
            summed = torch.empty(rows, width, dtype=torch.float32)
            scheme = entry["scheme"]
            for parameter_name in ("block_rows", "dense_threshold"):
                if parameter_name in entry:
                    scheme += f":{entry[parameter_name]}"
            touched = runtime.sparse_allreduce(scheme, rows, width, indices.numel(),
                                               indices.data_ptr(), values.data_ptr(),
                                               summed.data_ptr(), self._timeout_s)
            if touched == 0:  # no rank has a gradient: none here either, as without zenopt
                parameter.grad = None
                return
            averaged = summed.div_(world.size()).to(self._device)
            if grad is None:
                sparse = id(parameter) in self._sparse_layout
            else:
                sparse = grad.is_sparse
            if sparse:
                parameter.grad = averaged.to_sparse(1)
            elif grad is None:
                parameter.grad = averaged
            else:
                grad.copy_(averaged.view_as(grad))

    def step(self, closure=None):
        if closure is not None:
            raise ZenoptError("DistributedOptimizer.step(): closures are not supported (their "
                              "gradients would not be averaged); call backward, then step()")
        self.step_starts.append(time.perf_counter())
        if not self._synchronized:
            self.synchronize()
        self._synchronized = False
        return self._optimizer.step()

    def zero_grad(self, *args, **kwargs):
        return self._optimizer.zero_grad(*args, **kwargs)

    def state_dict(self):
        return self._optimizer.state_dict()

    def load_state_dict(self, state_dict):
        return self._optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group):
        raise ZenoptError("DistributedOptimizer: parameters cannot be added after planning "
                          "(plan the model with them)")

    def close(self):
        """Removes the hooks and ends the runtime (also done at exit)."""
        for _, handle in self._hooks:
            handle.remove()
        self._hooks = []
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None

    def __repr__(self):
        return f"DistributedOptimizer({self._optimizer!r})"
