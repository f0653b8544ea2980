"""report(): the plan's predicted step time against the step time the job measures."""
import statistics
import sys

from .. import runtime, world
from ..runtime import ZenoptError


def report(optimizer, warmup=1, file=None):
    """Compares the plan's predicted step with the measured one after some steps of training
    with `optimizer` (a DistributedOptimizer). Collective: every rank calls it.

    The measured step is the median time between consecutive step() calls after `warmup`
    steps, on the slowest rank (a step ends when every rank has its averages). Rank 0 prints
    one line to `file` (default stderr). Returns {"predicted_ms", "measured_ms", "steps",
    "error"} (error: measured / predicted - 1) on every rank."""
    starts = getattr(optimizer, "step_starts", None)
    if starts is None:
        raise ZenoptError("report() needs the zenopt.torch.DistributedOptimizer the job "
                          f"trains with, got {type(optimizer).__name__}")
    intervals = [b - a for a, b in zip(starts[warmup:], starts[warmup + 1:])]
    rank, size = world.init()
    error = None if intervals else (f"rank {rank}: report() needs at least {warmup + 2} steps "
                                    f"(warm-up {warmup}), the job has made {len(starts)}")
    world.agree(error, "to report the step time")
    median_us = round(statistics.median(intervals) * 1e6)
    steps = len(intervals)
    if size > 1:
        median_us = max(runtime.world_exchange(median_us, size))
        steps = min(runtime.world_exchange(steps, size))
    predicted_ms = optimizer.predicted_step_us / 1000
    measured_ms = median_us / 1000
    result = {"predicted_ms": predicted_ms, "measured_ms": measured_ms, "steps": steps,
              "error": measured_ms / predicted_ms - 1 if predicted_ms > 0 else float("inf")}
    if rank == 0:
        print(f"zenopt: step time predicted {predicted_ms:.3f} ms, measured {measured_ms:.3f} ms "
              f"(median of {steps} steps, slowest of {size} ranks): "
              f"{100 * result['error']:+.1f}%", file=file or sys.stderr, flush=True)
    return result
