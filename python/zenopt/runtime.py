"""ctypes binding of libzenrt's C API (runtime/include/zenrt/zenrt.h).

Loading the C API through ctypes keeps the package independent of PyTorch's C++ ABI: tensors
are passed as raw addresses. The library is libzenrt.so of the build or install tree
(zenopt/_paths.py), or the file named by ZENOPT_LIBZENRT.
"""
import ctypes
import os
import threading
import weakref

from . import _paths

# zenrt_status
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_PLAN = 2
ERR_IO = 3
ERR_MISMATCH = 4
ERR_STATE = 5
ERR_TIMEOUT = 6
ERR_BACKEND = 7
ERR_ABORTED = 8
ERR_INTERNAL = 9

# zenrt_memory
MEMORY_HOST = 0
MEMORY_DEVICE = 1


class ZenoptError(RuntimeError):
    """An error reported by zenopt.

    `status` is the zenrt_status when libzenrt reported it. `every_rank` is true when every
    rank of the job raises it together (the ranks agreed on the outcome), so the job can end
    normally; zenopt.world aborts the job on any other uncaught error instead, so that no rank
    waits forever for one that has stopped.
    """

    def __init__(self, message, status=None, every_rank=False):
        super().__init__(message)
        self.status = status
        self.every_rank = every_rank


class _Options(ctypes.Structure):
    _fields_ = [
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("timeout_s", ctypes.c_double),
        ("mpi_comm", ctypes.c_void_p),
        ("keep_sent", ctypes.c_int),
        ("memory", ctypes.c_int),
    ]


_SIGNATURES = {
    "zenrt_options_init": (None, [ctypes.POINTER(_Options)]),
    "zenrt_init_file": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                       ctypes.POINTER(_Options)]),
    "zenrt_register": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                      ctypes.c_int64]),
    "zenrt_mark_ready": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "zenrt_wait": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "zenrt_wait_all": (ctypes.c_int, [ctypes.c_void_p]),
    "zenrt_finalize": (ctypes.c_int, [ctypes.c_void_p]),
    "zenrt_bucket_count": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    "zenrt_plan_hash": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]),
    "zenrt_world_init": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int),
                                        ctypes.POINTER(ctypes.c_int)]),
    "zenrt_world_broadcast": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
    "zenrt_world_exchange": (ctypes.c_int, [ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]),
    "zenrt_world_abort": (ctypes.c_int, [ctypes.c_int]),
    "zenrt_sparse_allreduce": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64,
                                              ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64),
                                              ctypes.c_double]),
    "zenrt_world_finalize": (ctypes.c_int, []),
    "zenrt_last_error": (ctypes.c_char_p, []),
    "zenrt_error_string": (ctypes.c_char_p, [ctypes.c_int]),
    "zenrt_version": (ctypes.c_char_p, []),
}

class SharedLibrary:
    """One of the package's native libraries, found next to the package (the environment
    variable overrides) and loaded once with its functions' signatures."""

    def __init__(self, file_name, variable, relative_path, signatures, mode=ctypes.DEFAULT_MODE):
        self.file_name, self.variable, self.relative_path = file_name, variable, relative_path
        self.signatures, self.mode = signatures, mode
        self._loaded = None
        self._lock = threading.Lock()

    def path(self):
        given = os.environ.get(self.variable)
        if given:
            return given
        return os.path.normpath(os.path.join(os.path.dirname(__file__), self.relative_path))

    def load(self):
        with self._lock:
            if self._loaded is None:
                path = self.path()
                if not os.path.exists(path):
                    raise ZenoptError(f"{path}: {self.file_name} not found (build zenopt, or set "
                                      f"{self.variable} to the library)")
                loaded = ctypes.CDLL(path, mode=self.mode)
                for name, (result, arguments) in self.signatures.items():
                    function = getattr(loaded, name)
                    function.restype = result
                    function.argtypes = arguments
                self._loaded = loaded
            return self._loaded


# RTLD_GLOBAL: Open MPI's components, which libmpi loads later, resolve its symbols globally.
# The library itself exports only zenrt_* (lib/zenrt.map).
_zenrt = SharedLibrary("libzenrt.so", "ZENOPT_LIBZENRT", _paths.LIBZENRT, _SIGNATURES,
                       mode=ctypes.RTLD_GLOBAL)


def library_path():
    """The libzenrt.so this package loads."""
    return _zenrt.path()


def library():
    """libzenrt, loaded once, with the C API's signatures."""
    return _zenrt.load()


def _check(status, every_rank=False):
    if status != OK:
        lib = library()
        message = lib.zenrt_last_error().decode(errors="replace")
        if not message:
            message = lib.zenrt_error_string(status).decode()
        raise ZenoptError(message, status=status, every_rank=every_rank)


def version():
    return library().zenrt_version().decode()


# The job (zenrt_world_*): MPI_COMM_WORLD, host memory.

def world_init():
    """(rank, size); initialises MPI unless it is initialised already."""
    rank, size = ctypes.c_int(-1), ctypes.c_int(-1)
    _check(library().zenrt_world_init(ctypes.byref(rank), ctypes.byref(size)))
    return rank.value, size.value


def world_broadcast(address, nbytes, root):
    """Copies nbytes at address (host memory) from rank `root` to every rank."""
    _check(library().zenrt_world_broadcast(ctypes.c_void_p(address), nbytes, root))


def world_exchange(value, size):
    """Every rank's 64-bit value, by rank."""
    values = (ctypes.c_uint64 * size)()
    _check(library().zenrt_world_exchange(value, values))
    return list(values)


def sparse_allreduce(scheme, rows, row_elements, nnz_rows, indices_address, values_address,
                     out_address, timeout_s=0.0):
    """zenrt_sparse_allreduce (collective over the world): sums the row-sparse gradient
    indices[nnz_rows] (int64, host memory) / values[nnz_rows * row_elements] (fp32) over the
    ranks with `scheme` into the dense out[rows * row_elements]; returns the number of rows
    any rank touched. Refused arguments fail every rank together."""
    touched = ctypes.c_int64(-1)
    status = library().zenrt_sparse_allreduce(
        scheme.encode(), rows, row_elements, nnz_rows, ctypes.c_void_p(indices_address),
        ctypes.c_void_p(values_address), ctypes.c_void_p(out_address), ctypes.byref(touched),
        timeout_s)
    _check(status, every_rank=status in (ERR_INVALID_ARGUMENT, ERR_MISMATCH))
    return touched.value


def world_abort(exit_code):
    library().zenrt_world_abort(exit_code)


def world_finalize():
    _check(library().zenrt_world_finalize())


_open_runtimes = weakref.WeakSet()


class Runtime:
    """One zenrt handle: a plan executed on registered gradient buffers."""

    def __init__(self, plan_path, device_memory=False, timeout_s=0.0):
        lib = library()
        options = _Options()
        lib.zenrt_options_init(ctypes.byref(options))
        options.timeout_s = timeout_s
        options.memory = MEMORY_DEVICE if device_memory else MEMORY_HOST
        handle = ctypes.c_void_p()
        # Initialisation is collective and its failures are agreed on by every rank.
        _check(lib.zenrt_init_file(ctypes.byref(handle), os.fsencode(plan_path),
                                   ctypes.byref(options)), every_rank=True)
        self._handle = handle
        self._lib = lib
        _open_runtimes.add(self)

    def register(self, tensor, address, elements):
        _check(self._lib.zenrt_register(self._handle, tensor, ctypes.c_void_p(address), elements))

    def mark_ready(self, tensor):
        _check(self._lib.zenrt_mark_ready(self._handle, tensor))

    def wait(self, tensor):
        _check(self._lib.zenrt_wait(self._handle, tensor))

    def wait_all(self):
        _check(self._lib.zenrt_wait_all(self._handle))

    def bucket_count(self):
        count = ctypes.c_int()
        _check(self._lib.zenrt_bucket_count(self._handle, ctypes.byref(count)))
        return count.value

    def plan_hash(self):
        value = ctypes.c_uint64()
        _check(self._lib.zenrt_plan_hash(self._handle, ctypes.byref(value)))
        return value.value

    def close(self):
        if self._handle:
            handle, self._handle = self._handle, None
            _open_runtimes.discard(self)
            _check(self._lib.zenrt_finalize(handle))

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.zenrt_finalize(self._handle)


def close_all_runtimes():
    """Finalises every open handle (before the world ends)."""
    for runtime in list(_open_runtimes):
        runtime.close()
