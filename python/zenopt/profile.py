"""The job's own profile: `zenopt profile` run by the job's ranks, cached per machine set.

job_profile() is collective: every rank measures (libzenprofile.so, the same measurement as
`mpirun -np N zenopt profile`), so the ranks share cores or GPUs as they will while training;
rank 0 writes the cluster file. The file is cached under the cache directory, keyed by what
the profile depends on: every rank's host, processor, cores and GPU, the world size, the
backend, the base cluster, the zenopt version and the profiler's build. A change to any of
them (another machine, more ranks, ranks placed differently, a rebuilt zenopt) profiles again.
"""
import ctypes
import hashlib
import json
import os
import platform
import socket

from . import _paths, runtime, world
from .runtime import SharedLibrary, ZenoptError

_profiler = SharedLibrary(
    "libzenprofile.so", "ZENOPT_LIBZENPROFILE", _paths.LIBZENPROFILE,
    {"zenprofile_cluster": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                           ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t])})


def _library_digest():
    """The profiler's own build: a rebuilt zenopt may measure differently."""
    digest = hashlib.blake2b(digest_size=8)
    try:
        with open(_profiler.path(), "rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as error:
        raise ZenoptError(f"{_profiler.path()}: cannot read libzenprofile.so: {error} (build "
                          "zenopt, or set ZENOPT_LIBZENPROFILE to the library)") from error
    return digest.hexdigest()


def cache_directory():
    """Where profiles are kept: $ZENOPT_CACHE_DIR, else $XDG_CACHE_HOME/zenopt, else
    ~/.cache/zenopt (a profiles/ folder in it)."""
    given = os.environ.get("ZENOPT_CACHE_DIR")
    if given:
        return os.path.join(given, "profiles")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "zenopt", "profiles")


def _processor():
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_rank(device=None):
    """What this rank's measurements depend on: host, processor, the cores it may run on,
    and its GPU (device: a CUDA device's name, or None)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"host={socket.gethostname()};cpu={_processor()};cores={cores};gpu={device or '-'}"


def _digest(text):
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def job_profile(backend="mpi", base="cpu-local", device=None, quick=False, progress=None):
    """The path of this job's profiled cluster file on rank 0 (None on the other ranks),
    measured on first use and read from the cache afterwards. Collective: every rank calls
    it. backend: "mpi" (host) or "nccl" (CUDA); base: the preset or cluster file the
    measurements refine; device: this rank's GPU name (part of the cache key); quick: the
    --quick sweep (seconds). progress(text): told when the job is profiled."""
    rank, size = world.init()
    described = describe_rank(device)
    # Every rank's description, by its digest: the key changes when any rank's does.
    digests = runtime.world_exchange(_digest(described), size) if size > 1 else [_digest(described)]
    key_text = (f"zenopt {runtime.version()};profiler={_library_digest()};ranks={size};"
                f"backend={backend};base={base};quick={bool(quick)};" +
                ",".join(str(d) for d in digests))
    key = hashlib.blake2b(key_text.encode(), digest_size=12).hexdigest()
    path = os.path.join(cache_directory(), f"{key}.cluster.json")

    cached = rank == 0 and _readable_cluster(path)
    hit = json.loads(world.broadcast_bytes(json.dumps(cached).encode(), root=0))
    if hit:
        return path if rank == 0 else None

    error = None
    if rank == 0:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as failure:
            error = f"cannot create the profile cache {os.path.dirname(path)}: {failure}"
    world.agree(error, "to create the profile cache")
    if rank == 0 and progress:
        progress(f"profiling the job ({size} ranks, backend {backend}) for {path}")
    staging = f"{path}.{os.getpid()}.tmp"
    message = ctypes.create_string_buffer(4096)
    code = _profiler.load().zenprofile_cluster(base.encode(), backend.encode(),
                                               1 if quick else 0, staging.encode(), message,
                                               len(message))
    if code != 0:  # the same code on every rank
        why = message.value.decode(errors="replace") if rank == 0 else "see rank 0"
        raise ZenoptError(f"rank {rank}: profiling the job failed (exit code {code}): {why}",
                          every_rank=True)
    error = None
    if rank == 0:
        try:
            os.replace(staging, path)  # atomically: a concurrent job never reads half a file
        except OSError as failure:
            error = f"cannot store the profile in {path}: {failure}"
    world.agree(error, "to store the profile")
    return path if rank == 0 else None


def _readable_cluster(path):
    """True when `path` holds a cluster file with measurements (a broken one is profiled
    again and replaced)."""
    try:
        with open(path) as file:
            return "profiled" in json.load(file)
    except (OSError, ValueError):
        return False
