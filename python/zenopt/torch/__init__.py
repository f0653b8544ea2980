"""zenopt for PyTorch: plan a model's gradient communication and train with the plan.

    plan = zenopt.torch.plan(model, example_batch)                        # rank 0 plans
    zenopt.torch.broadcast_parameters(model)                              # same start
    optimizer = zenopt.torch.DistributedOptimizer(optimizer, model, plan) # planned averaging
    ...                                                                   # train some steps
    zenopt.torch.report(optimizer)              # predicted against measured step time

plan() profiles the job's ranks on first use (cached; zenopt.profile) and times the model's
own steps, so the plan is priced from this job on this machine; pass cluster= to plan for
a preset or a cluster file instead.

Horovod-style collectives on tensors (metrics, sparse ones included; collectives.py):
allreduce, allgather, broadcast, broadcast_optimizer_state, local_rank, local_size.

Run the script under `mpirun -np N` (CPUs: MPI; CUDA tensors: NCCL when libzenrt has CUDA).
The package loads libzenrt's C API through ctypes and runs the zenopt binary to plan, so it
does not depend on PyTorch's C++ ABI.
"""
import torch

from .. import runtime, world
from ..runtime import ZenoptError
from .collectives import (allgather, allreduce, broadcast, broadcast_optimizer_state,
                          local_rank, local_size)
from .optimizer import DistributedOptimizer
from .planning import Plan, export_onnx, measure_compute, model_signature, plan
from .report import report

__all__ = ["init", "rank", "size", "local_rank", "local_size", "plan", "Plan", "report",
           "measure_compute",
           "DistributedOptimizer", "broadcast_parameters", "broadcast_optimizer_state",
           "allreduce", "allgather", "broadcast", "export_onnx", "ZenoptError"]


def init():
    """Starts libzenrt's backend (idempotent; every other call here starts it too); returns
    (rank, size)."""
    return world.init()


def rank():
    return world.rank()


def size():
    return world.size()


def broadcast_parameters(model, root=0):
    """Copies rank `root`'s parameters and buffers (a module's state_dict, or a dict of
    tensors) to every rank, in place."""
    world.init()
    tensors = model.state_dict() if isinstance(model, torch.nn.Module) else model
    named = list(tensors.items())
    # Ranks with different models would send mismatched sizes: refuse before sending.
    world.agree_on_value(model_signature(named), "models (tensor names, shapes or dtypes)")
    if world.size() == 1:
        return
    with torch.no_grad():
        for _, tensor in named:
            in_place = tensor.device.type == "cpu" and tensor.is_contiguous()
            staging = tensor if in_place else tensor.detach().to("cpu").contiguous()
            runtime.world_broadcast(staging.data_ptr(),
                                          staging.numel() * staging.element_size(), root)
            if not in_place:
                tensor.copy_(staging)
