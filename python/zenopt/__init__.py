"""zenopt: plan the communication of distributed training, and run the plan.

`zenopt.torch` plans a PyTorch model and trains it with the plan (see README.md, "PyTorch").
`zenopt.runtime` is the ctypes binding of libzenrt's C API it is built on, and `zenopt.world`
the job it runs in (rank, size, exit handling).
"""
from .runtime import ZenoptError

__all__ = ["ZenoptError"]
