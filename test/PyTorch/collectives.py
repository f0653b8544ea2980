"""zenopt.torch's Horovod-style collectives under mpirun -np N: allreduce (dense and sparse
COO, sum and average: exact, the ranks added in rank order), allgather (first dimensions
differing per rank, sparse too), broadcast (dense in place, sparse), broadcast_optimizer_state,
local_rank/local_size (one host here). Every rank computes every rank's tensors from the seeds
and checks the results bit for bit."""
import sys

import torch

import zenopt.torch


def tensor_of(rank, rows=5):
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(rows, 3, generator=generator) * 10 ** (rank % 3)


def sparse_of(rank):
    generator = torch.Generator().manual_seed(200 + rank)
    rows = torch.randint(0, 20, (4 + rank,), generator=generator)  # duplicates too
    values = torch.randn(rows.numel(), 3, generator=generator)
    return torch.sparse_coo_tensor(rows[None], values, (20, 3))


def rank_ordered_sum(tensors):
    total = tensors[0].clone()
    for tensor in tensors[1:]:
        total += tensor
    return total


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and \
        a.contiguous().view(torch.int32 if a.dtype == torch.float32 else a.dtype).equal(
            b.contiguous().view(torch.int32 if b.dtype == torch.float32 else b.dtype))


def main():
    torch.set_num_threads(1)
    rank, size = zenopt.torch.init()
    ranks = range(size)

    summed = zenopt.torch.allreduce(tensor_of(rank), average=False)
    assert same_bits(summed, rank_ordered_sum([tensor_of(r) for r in ranks])), "dense sum"
    mean = zenopt.torch.allreduce(tensor_of(rank))
    assert same_bits(mean, rank_ordered_sum([tensor_of(r) for r in ranks]) / size), "mean"
    count = zenopt.torch.allreduce(torch.tensor(rank + 1), average=False)
    assert count.item() == size * (size + 1) // 2 and count.dtype == torch.int64, count
    dense_sparse = rank_ordered_sum([sparse_of(r).to_dense() for r in ranks])
    for scheme in ("balanced", "agsparse", "omnireduce"):
        result = zenopt.torch.allreduce(sparse_of(rank), average=False, scheme=scheme)
        assert result.is_sparse, scheme
        assert same_bits(result.to_dense(), dense_sparse), f"sparse sum ({scheme})"

    gathered = zenopt.torch.allgather(tensor_of(rank, rows=rank + 1))
    assert same_bits(gathered, torch.cat([tensor_of(r, rows=r + 1) for r in ranks])), "allgather"
    sparse_gathered = zenopt.torch.allgather(sparse_of(rank))
    assert same_bits(sparse_gathered.to_dense(),
                     torch.cat([sparse_of(r).to_dense() for r in ranks])), "sparse allgather"

    own = tensor_of(rank)
    assert zenopt.torch.broadcast(own, root=size - 1) is own
    assert same_bits(own, tensor_of(size - 1)), "broadcast"
    received = zenopt.torch.broadcast(sparse_of(rank), root=1 % size)
    assert same_bits(received.to_dense(), sparse_of(1 % size).to_dense()), "sparse broadcast"

    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (rank + 1), momentum=0.9)
    if rank == 0:  # only rank 0 has momentum buffers and its learning rate
        model(torch.ones(1, 3)).sum().backward()
        optimizer.step()
    zenopt.torch.broadcast_optimizer_state(optimizer, root=0)
    state = optimizer.state_dict()
    assert state["param_groups"][0]["lr"] == 0.1, state["param_groups"]
    buffers = [state["state"][i]["momentum_buffer"] for i in sorted(state["state"])]
    assert len(buffers) == 2, state
    for buffer in buffers:
        assert same_bits(zenopt.torch.broadcast(buffer.clone(), root=0), buffer), "state"

    assert (zenopt.torch.local_rank(), zenopt.torch.local_size()) == (rank, size)
    if rank == 0:
        print(f"collectives: ok on {size} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
