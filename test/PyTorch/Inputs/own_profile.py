"""zenopt.torch.plan() on the job's own measurements (own-profile.test): the ranks are
profiled on first use and the profile is cached; the model's steps are timed and priced
from; report() compares the predicted step with the measured one."""
import sys

import torch

import zenopt.torch
from zenopt.runtime import ZenoptError


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    torch.manual_seed(0)
    model = MLP()
    inputs, targets = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def loss_fn(output):
        return torch.nn.functional.cross_entropy(output, targets)

    plans = [zenopt.torch.plan(model, inputs, loss_fn=loss_fn, quick_profile=True)
             for _ in range(2)]  # the second from the cache
    rank = zenopt.torch.rank()
    if rank == 0:
        for plan in plans:
            summary = plan.summary
            print(f"planned on {summary['cluster']} ({summary['world_size']} ranks), compute "
                  f"{summary['compute_source']}", flush=True)
    zenopt.torch.broadcast_parameters(model)
    optimizer = zenopt.torch.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05), model, plans[0])
    try:
        zenopt.torch.report(optimizer)
    except ZenoptError as error:
        if rank == 0:
            print(f"too early: {error}", flush=True)
    for _ in range(8):
        optimizer.zero_grad()
        loss_fn(model(inputs)).backward()
        optimizer.step()
    result = zenopt.torch.report(optimizer, file=sys.stdout)
    assert result["steps"] == 6 and result["measured_ms"] > 0 and result["predicted_ms"] > 0
    if rank == 0:
        print("reported", sorted(result), flush=True)


if __name__ == "__main__":
    main()
