"""Horovod-style collectives on tensors over the job's ranks (every rank calls each, in the
same order): allreduce, allgather, broadcast, broadcast_optimizer_state, local_rank and
local_size.

Sums go through libzenrt's exact sparse all-reduce (zenrt_sparse_allreduce): ranks are added
in rank order, so every rank gets the same bits. A dense tensor is a table whose rows are its
first dimension, all rows touched, summed with the `dense` scheme; a sparse COO tensor is summed
by its coalesced rows (its sparse dimensions flattened to one row index) with `scheme`. Values
travel as fp32 (other dtypes are converted and back: integers beyond 2^24 would round) in host
memory (CUDA tensors are copied).
"""
import hashlib
import io
import math
import socket

import torch

from .. import runtime, world
from ..runtime import ZenoptError


def _rows_and_width(shape):
    """A tensor as a table: (rows, elements per row)."""
    if len(shape) == 0:
        return 1, 1
    rows = shape[0]
    return rows, math.prod(shape[1:]) if len(shape) > 1 else 1


def _agree_on_shape(tensor, name, what, skip_first=False):
    shape = tuple(tensor.shape[1:] if skip_first else tensor.shape)
    signature = hashlib.blake2b(f"{shape}:{tensor.dtype}:{tensor.is_sparse}".encode(),
                                digest_size=8).digest()
    world.agree_on_value(int.from_bytes(signature, "little"),
                         f"{what} tensors{f' ({name})' if name else ''} (shape, dtype or layout)")


def _summed_table(rows, width, indices, values, scheme):
    """The sum over ranks of the rows `indices` (int64, host) with `values` [n, width]."""
    indices = indices.to("cpu", torch.int64).contiguous()
    values = values.to("cpu", torch.float32).contiguous()
    out = torch.empty(rows, width, dtype=torch.float32)
    touched = runtime.sparse_allreduce(scheme, rows, width, indices.numel(), indices.data_ptr(),
                                       values.data_ptr(), out.data_ptr())
    return out, touched


def allreduce(tensor, average=True, name=None, scheme="balanced"):
    """The sum (average=True: the mean) of `tensor` over the ranks, a new tensor of its shape,
    dtype, device and layout. A sparse COO tensor is summed row-sparse with `scheme` (a
    zen/SparseScheme.h spelling) and comes back coalesced, over the rows whose sum is
    non-zero; a dense one is summed whole."""
    world.init()
    _agree_on_shape(tensor, name, "allreduce")
    size = world.size()
    with torch.no_grad():
        if tensor.is_sparse:
            coalesced = tensor.coalesce()
            sparse_dims = tensor.shape[:coalesced.sparse_dim()]
            dense_dims = tensor.shape[coalesced.sparse_dim():]
            rows = math.prod(sparse_dims)
            width = math.prod(dense_dims) if len(dense_dims) else 1
            # The sparse dimensions as one row index, row-major.
            flat = torch.zeros(coalesced.indices().shape[1], dtype=torch.int64)
            for d, extent in enumerate(sparse_dims):
                flat = flat * extent + coalesced.indices()[d].cpu()
            summed, _ = _summed_table(rows, width, flat, coalesced.values().reshape(-1, width),
                                      scheme)
            if average:
                summed.div_(size)
            nonzero = (summed != 0).any(dim=1).nonzero().flatten()
            indices = _unravel(nonzero, sparse_dims)
            values = summed.index_select(0, nonzero).reshape((-1,) + tuple(dense_dims))
            return torch.sparse_coo_tensor(indices, values.to(tensor.dtype), tensor.shape,
                                           device=tensor.device).coalesce()
        rows, width = _rows_and_width(tensor.shape)
        summed, _ = _summed_table(rows, width, torch.arange(rows),
                                  tensor.reshape(rows, width), "dense")
        if average:
            summed.div_(size)
        return summed.reshape(tensor.shape).to(tensor.device, tensor.dtype)


def _unravel(flat, shape):
    """Row indices back to coordinates of the sparse dimensions `shape` [len(shape), n]."""
    coordinates = []
    for extent in reversed(shape):
        coordinates.append(flat % extent)
        flat = flat // extent
    return torch.stack(list(reversed(coordinates)))


def broadcast(tensor, root=0, name=None):
    """Rank `root`'s tensor on every rank: dense tensors are overwritten in place and returned;
    a sparse COO tensor comes back as a new tensor (its non-zeros differ per rank)."""
    world.init()
    _agree_on_shape(tensor, name, "broadcast")
    with torch.no_grad():
        if tensor.is_sparse:
            buffer = io.BytesIO()
            if world.rank() == root:
                torch.save(tensor.coalesce().cpu(), buffer)
            received = torch.load(io.BytesIO(world.broadcast_bytes(buffer.getvalue(), root)))
            return received.to(tensor.device)
        staging = tensor.detach().to("cpu").contiguous()
        runtime.world_broadcast(staging.data_ptr(), staging.numel() * staging.element_size(),
                                root)
        tensor.copy_(staging)
        return tensor


def allgather(tensor, name=None):
    """Every rank's tensor concatenated along the first dimension in rank order (the first
    dimension may differ between ranks; the others must not). Sparse COO tensors concatenate
    too (their indices along the first dimension shifted)."""
    world.init()
    _agree_on_shape(tensor, name, "allgather", skip_first=True)
    rank, size = world.rank(), world.size()
    if tensor.dim() == 0:
        raise ZenoptError(f"rank {rank}: allgather{f' ({name})' if name else ''}: a scalar "
                          "has no first dimension to concatenate along (reshape it to [1])")
    with torch.no_grad():
        pieces = []
        for source in range(size):
            if tensor.is_sparse:
                payload = io.BytesIO()
                if rank == source:
                    torch.save(tensor.coalesce().cpu(), payload)
                pieces.append(torch.load(io.BytesIO(world.broadcast_bytes(payload.getvalue(),
                                                                          source))))
            else:
                payload = tensor.detach().cpu().contiguous().numpy().tobytes() \
                    if rank == source else None
                data = world.broadcast_bytes(payload, source)
                piece = torch.frombuffer(bytearray(data), dtype=tensor.dtype) \
                    if data else torch.zeros(0, dtype=tensor.dtype)
                pieces.append(piece.reshape((-1,) + tuple(tensor.shape[1:])))
        return torch.cat(pieces).to(tensor.device)


def broadcast_optimizer_state(optimizer, root=0):
    """Rank `root`'s optimizer state (state_dict: per-parameter state and hyper-parameters) on
    every rank, e.g. after rank 0 loaded a checkpoint."""
    world.init()
    payload = io.BytesIO()
    if world.rank() == root:
        torch.save(optimizer.state_dict(), payload)
    state = torch.load(io.BytesIO(world.broadcast_bytes(payload.getvalue(), root)),
                       map_location="cpu")
    if world.rank() != root:
        optimizer.load_state_dict(state)


_local = None


def _local_rank_and_size():
    """(rank among the ranks on this host, their number): ranks compare host name digests."""
    global _local
    if _local is None:
        rank, size = world.init()
        digest = int.from_bytes(hashlib.blake2b(socket.gethostname().encode(),
                                                digest_size=8).digest(), "little")
        hosts = runtime.world_exchange(digest, size) if size > 1 else [digest]
        _local = (sum(1 for r in range(rank) if hosts[r] == digest),
                  sum(1 for h in hosts if h == digest))
    return _local


def local_rank():
    """This rank's position among the ranks on its host (collective at the first call)."""
    return _local_rank_and_size()[0]


def local_size():
    """The number of ranks on this rank's host (collective at the first call)."""
    return _local_rank_and_size()[1]
