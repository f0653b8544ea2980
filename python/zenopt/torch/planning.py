"""Plan a PyTorch model: export its graph to ONNX, run the planner, map gradients to parameters.

Planning runs the zenopt binary (`zenopt MODEL.onnx --cluster ... --dp ... -o PLAN --json`),
the same code and flags as on the command line. Under a job of several ranks, rank 0 exports and
plans and sends the plan to every rank, which writes its own copy; a failure is raised on every
rank.
"""
import atexit
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import torch

from .. import _paths, profile, runtime, world
from ..runtime import ZenoptError

# The ONNX opset of the export: torch 1.13's default, and one the importer reads.
ONNX_OPSET = 14

# plan() sets these flags itself.
_RESERVED_OPTIONS = {"output", "o", "json", "emit", "quiet", "q", "cluster", "dp", "frozen",
                     "measured_compute"}
# (with sparsity_batches, plan() also sets --sparsity)


def zenopt_binary():
    """The zenopt executable plan() runs (ZENOPT_BIN overrides the build/install tree's)."""
    given = os.environ.get("ZENOPT_BIN")
    if given:
        return given
    return os.path.normpath(os.path.join(os.path.dirname(_paths.__file__), _paths.ZENOPT))


class Plan(os.PathLike):
    """A plan file written by plan(): `path`, and `summary`, the planner's report (`zenopt
    --json`: strategy, iteration_us, buckets, compression, baselines, ...)."""

    def __init__(self, path, summary):
        self.path = path
        self.summary = summary

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"Plan({self.path!r})"

    def __str__(self):
        s = self.summary
        return (f"zenopt plan for {s['model']} on {s['cluster']} ({s['world_size']} ranks), "
                f"strategy {s['strategy']}: {s['gradient_tensors']} gradients in "
                f"{s['buckets']} buckets, compression {s['compression']}, predicted iteration "
                f"{s['iteration_us'] / 1000:.3f} ms ({self.path})")


def export_onnx(model, example_inputs, path):
    """Writes the model's training graph to `path` with the parameters' own names.

    Training mode keeps Dropout and BatchNorm as in training; no constant folding, so no
    parameter is folded into a renamed constant (torch 1.13 turns a transposed weight into
    `onnx::MatMul_N` when folding). Tracing runs the model once: its state (BatchNorm
    statistics, which the trace updates) and the random generators are restored afterwards,
    so the exporting rank stays identical to the others.
    """
    arguments = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    saved_state = copy.deepcopy(model.state_dict())
    was_training = model.training
    cuda_devices = sorted({p.device.index for p in model.parameters() if p.is_cuda})
    try:
        with torch.random.fork_rng(devices=cuda_devices), warnings.catch_warnings():
            # The exporter warns about in-place updates of BatchNorm's counters, which the
            # plan does not need (and the state is restored below).
            warnings.simplefilter("ignore", UserWarning)
            torch.onnx.export(model, arguments, path,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, export_params=True,
                              opset_version=ONNX_OPSET)
    except Exception as error:  # the exporter raises many kinds; report them as one
        raise ZenoptError(f"torch.onnx.export of {type(model).__name__} failed: "
                          f"{type(error).__name__}: {error}") from error
    finally:
        model.load_state_dict(saved_state)
        model.train(was_training)


def _flags(options):
    flags = []
    for key, value in options.items():
        if key in _RESERVED_OPTIONS:
            raise ZenoptError(f"plan(): option {key!r} is set by plan() itself")
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, (list, tuple)):
            flags += [flag, ",".join(str(item) for item in value)]
        else:
            flags += [flag, str(value)]
    return flags


def read_plan(path):
    """The plan file's JSON (the runtime validates it; this reads what Python needs)."""
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        raise ZenoptError(f"{path}: cannot read the plan: {error}") from error


def match_gradients(plan_json, model):
    """([(gradient name, parameter)] in plan order, [problems]): the plan's gradients by name
    in model.named_parameters(); problems describe every gradient or parameter that does not
    match (no problems: every trainable parameter has exactly its gradient in the plan)."""
    parameters = dict(model.named_parameters())
    tensors = plan_json["tensors"]
    planned = {tensor["name"] for tensor in tensors}
    planned |= {tensor["name"] for tensor in plan_json.get("sparse_tensors", [])}
    pairs, unknown, frozen, sizes = [], [], [], []
    for tensor in tensors:
        parameter = parameters.get(tensor["name"])
        if parameter is None:
            unknown.append(tensor["name"])
        elif not parameter.requires_grad:
            frozen.append(tensor["name"])  # plan() marks them --frozen: another plan
        elif parameter.numel() != tensor["elements"] or parameter.dtype != torch.float32:
            # An expert-parallel plan holds one rank's experts / ep of an expert tensor.
            share = (f", one rank's experts of {tensor['expert_parallel']}-way expert "
                     "parallelism" if tensor.get("expert_parallel", 1) > 1 else "")
            sizes.append(f"{tensor['name']} (plan: {tensor['elements']} f32 elements{share}, "
                         f"model: {parameter.numel()} {parameter.dtype} elements, shape "
                         f"{tuple(parameter.shape)})")
        else:
            pairs.append((tensor["name"], parameter))
    missing = [name for name, p in parameters.items() if p.requires_grad and name not in planned]
    problems = []
    if unknown:
        problems.append("gradients in the plan that are no parameter of the model: " +
                        ", ".join(unknown))
    if missing:
        problems.append("parameters missing from the plan: " + ", ".join(missing) +
                        " (a plan for another model, or parameters forward does not use)")
    if sizes:
        problems.append("gradients whose size or dtype differs: " + "; ".join(sizes))
    if frozen:
        problems.append("gradients of parameters that do not require grad: " +
                        ", ".join(frozen) + " (a plan made before they were frozen)")
    return pairs, problems


def match_sparse_gradients(plan_json, model):
    """([(sparse tensor entry, parameter)] in plan order, [problems]): the plan's
    `sparse_tensors` (row-sparse gradients: embedding tables) by name in
    model.named_parameters(), each a trainable fp32 [rows, row_elements] table."""
    parameters = dict(model.named_parameters())
    pairs, problems = [], []
    for entry in plan_json.get("sparse_tensors", []):
        parameter = parameters.get(entry["name"])
        shape = (entry["rows"], entry["row_elements"])
        if parameter is None:
            problems.append(f"a sparse gradient in the plan that is no parameter of the model: "
                            f"{entry['name']}")
        elif not parameter.requires_grad:
            problems.append(f"a sparse gradient of a parameter that does not require grad: "
                            f"{entry['name']}")
        elif tuple(parameter.shape) != shape or parameter.dtype != torch.float32:
            problems.append(f"sparse gradient {entry['name']}: plan: a {shape[0]} x {shape[1]} "
                            f"f32 table, model: {tuple(parameter.shape)} {parameter.dtype}")
        else:
            pairs.append((entry, parameter))
    return pairs, problems


def describe_mismatch(source, model, problems):
    return (f"{source}: the plan does not match model {type(model).__name__}:\n  " +
            "\n  ".join(problems))


def model_signature(named_tensors):
    """64-bit digest of tensor names, shapes and dtypes (ranks compare it)."""
    digest = hashlib.blake2b(digest_size=8)
    for name, tensor in named_tensors:
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
    return int.from_bytes(digest.digest(), "little")


_plan_directory = None


def _default_plan_path(model_name):
    """A fresh path in this process's plan directory, removed at exit."""
    global _plan_directory
    if _plan_directory is None:
        _plan_directory = tempfile.mkdtemp(prefix="zenopt-plans-")
        atexit.register(shutil.rmtree, _plan_directory, True)
    index = len(os.listdir(_plan_directory))
    return os.path.join(_plan_directory, f"{model_name}.{index}.plan.json")


def untrained_initializers(model):
    """Names the export writes as float initializers that get no gradient: buffers (BatchNorm
    statistics, masks, tables) and parameters that do not require grad. ONNX cannot tell them
    from parameters, so the planner is told (--frozen)."""
    names = [name for name, p in model.named_parameters() if not p.requires_grad]
    names += [name for name, b in model.named_buffers() if b.is_floating_point()]
    return names


def _as_tuple(inputs):
    return inputs if isinstance(inputs, tuple) else (inputs,)


def _lookup_samples(module, args):
    """The rows one forward call of an nn.Embedding / nn.EmbeddingBag looks up, per sample
    (an EmbeddingBag's offsets given positionally: torch 1.13's pre-hooks see no keywords)."""
    indices = args[0]
    offsets = args[1] if len(args) > 1 else None
    if isinstance(module, torch.nn.EmbeddingBag) and indices.dim() == 1 and offsets is not None:
        bounds = offsets.tolist() + [indices.numel()]
        flat = indices.tolist()
        return [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
    if indices.dim() == 0:
        return [[int(indices)]]
    return [row.reshape(-1).tolist() for row in indices]


def measure_sparsity(model, batches, ranks, directory, tables=None):
    """Zen's statistics from the first steps: runs `model` forward on each of `batches` (a
    step's local inputs each, no gradient, in eval mode, then restored) recording the rows
    every nn.Embedding / nn.EmbeddingBag looks up, and has `zenopt sparsity` measure each
    table's density, gamma up to `ranks` (k consecutive steps standing for k ranks, as the
    command documents) and skew. Returns ["PARAM=stats.json", ...] for zenopt's --sparsity,
    for the tables in `tables` (parameter names; default all)."""
    recorded, hooks = {}, []
    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
            parameter = f"{name}.weight" if name else "weight"
            if tables is not None and parameter not in tables:
                continue
            recorded[parameter] = (module.num_embeddings, [], [])

            def hook(module, args, parameter=parameter):
                samples = _lookup_samples(module, args)
                recorded[parameter][1].extend(samples)
                recorded[parameter][2].append(len(samples))
            hooks.append(module.register_forward_pre_hook(hook))
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            for batch in batches:
                model(*_as_tuple(batch))
    finally:
        for handle in hooks:
            handle.remove()
        model.train(was_training)
    flags = []
    for parameter, (rows, samples, per_call) in recorded.items():
        if not samples:
            continue
        calls_per_step = max(1, len(per_call) // max(1, len(batches)))
        batch = sum(per_call[:calls_per_step])
        indices = os.path.join(directory, f"{parameter}.indices.txt")
        statistics = os.path.join(directory, f"{parameter}.sparsity.json")
        with open(indices, "w") as file:
            for sample in samples:
                file.write(" ".join(str(row) for row in sample) + "\n")
        command = [zenopt_binary(), "sparsity", "--indices", indices, "--rows", str(rows),
                   "--batch", str(batch), "--ranks", str(ranks), "-o", statistics]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise ZenoptError(f"measuring the sparsity of {parameter} failed (zenopt exit code "
                              f"{result.returncode}): {result.stderr.strip()}")
        flags.append(f"{parameter}={statistics}")
    return flags


def _row_sparse_gradients(onnx_path):
    """The parameters zenopt finds row-sparse in the export (zenopt inspect --json)."""
    result = subprocess.run([zenopt_binary(), "inspect", "--json", onnx_path],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise ZenoptError(f"zenopt inspect {onnx_path} failed: {result.stderr.strip()}")
    return {entry["name"] for entry in json.loads(result.stdout).get("sparse_gradients", [])}


def _default_loss(output):
    """A scalar that backward runs through every output: what training's loss costs to
    differentiate, whatever the values."""
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    terms = [o.float().sum() for o in outputs
             if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad]
    if not terms:
        raise ZenoptError("measuring the compute: the model's output has no floating-point "
                          "tensor that depends on the parameters (pass loss_fn=)")
    return sum(terms)


def measure_compute(model, example_inputs, steps=3, loss_fn=None, warmup=1):
    """Times the model's own training step on this rank as DistributedOptimizer runs it:
    forward, backward (with the optimizer's copy of each gradient into its runtime buffer)
    and the step (the averages copied back, then SGD with momentum, the planner's; on
    copies), with a timestamp where forward first reads each parameter (forward pre-hooks of
    the modules that own parameters) and where backward has produced each gradient (gradient
    hooks). `warmup` steps, then `steps` timed ones; the step with the median forward +
    backward is kept. The model's state, its gradients and the random generators are
    restored afterwards. Returns the JSON object zenopt's --measured-compute reads
    (microseconds)."""
    if steps < 1 or warmup < 0:
        raise ZenoptError(f"measure_compute: steps must be >= 1 and warmup >= 0, got {steps} "
                          f"and {warmup}")
    arguments = _as_tuple(example_inputs)
    loss_fn = loss_fn or _default_loss
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    cuda = any(p.is_cuda for _, p in trainable)
    cuda_devices = sorted({p.device.index for _, p in trainable if p.is_cuda})

    def now():
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    first_read, ready, hooks = {}, {}, []
    owner = {id(p): name for name, p in trainable}
    for module in model.modules():
        owned = [owner[id(p)] for p in module.parameters(recurse=False) if id(p) in owner]
        if owned:
            def pre_hook(_module, _args, owned=owned):
                stamp = now()
                for name in owned:
                    first_read.setdefault(name, stamp)
            hooks.append(module.register_forward_pre_hook(pre_hook))
    buffers = {name: torch.empty(p.numel(), dtype=p.dtype, device=p.device)
               for name, p in trainable}
    for name, parameter in trainable:
        def gradient_hook(gradient, name=name):
            with torch.no_grad():
                buffers[name].copy_(gradient.to_dense().reshape(-1) if gradient.is_sparse
                                    else gradient.reshape(-1))
            ready[name] = now()  # the last: a tied weight's gradient is complete then
            return gradient
        hooks.append(parameter.register_hook(gradient_hook))

    with torch.no_grad():  # what the timed optimizer step updates: copies
        optimizer_copies = [(p.detach().clone(), torch.empty_like(p), torch.zeros_like(p),
                             buffers[name]) for name, p in trainable]
    saved_state = copy.deepcopy(model.state_dict())
    saved_gradients = [p.grad for _, p in trainable]
    was_training = model.training
    measured = []
    try:
        model.train()
        with torch.random.fork_rng(devices=cuda_devices), torch.enable_grad():
            for step in range(warmup + steps):
                first_read.clear()
                ready.clear()
                for _, p in trainable:
                    if p.grad is not None:  # reused, as optimizer.zero_grad() leaves them
                        p.grad = None if p.grad.is_sparse else p.grad.zero_()
                start = now()
                loss = loss_fn(model(*arguments))
                forward_end = now()
                loss.backward()
                backward_end = now()
                optimizer_us = _time_optimizer_step(optimizer_copies, now)
                if step >= warmup:
                    measured.append({
                        "forward_us": (forward_end - start) * 1e6,
                        "backward_us": (backward_end - forward_end) * 1e6,
                        "optimizer_us": optimizer_us,
                        "parameters": _points(trainable, first_read, ready, start,
                                              forward_end, backward_end)})
    finally:
        for handle in hooks:
            handle.remove()
        for (_, p), gradient in zip(trainable, saved_gradients):
            p.grad = gradient
        model.load_state_dict(saved_state)
        model.train(was_training)
    # The optimizer's median on its own: its first runs also fault its copies' pages in.
    optimizer_us = sorted(m["optimizer_us"] for m in measured)[len(measured) // 2]
    measured.sort(key=lambda m: m["forward_us"] + m["backward_us"])
    chosen = measured[len(measured) // 2]
    chosen["optimizer_us"] = optimizer_us
    synchronised = ", CUDA synchronised" if cuda else ""
    chosen["method"] = (f"torch {torch.__version__} hooks on rank {world.rank()}: the median of "
                        f"{steps} steps after {warmup} warm-up (forward pre-hooks, gradient "
                        f"hooks, DistributedOptimizer's gradient copies{synchronised}; "
                        "optimizer: SGD with momentum on copies)")
    return chosen


def _points(trainable, first_read, ready, start, forward_end, backward_end):
    """Each parameter's measured points in microseconds from the start of its pass (a
    parameter no module hook saw, or that got no gradient, lacks that point)."""
    def offset(stamp, begin, end):
        return min(max(0.0, stamp - begin), end - begin) * 1e6
    points = {}
    for name, _ in trainable:
        point = {}
        if name in first_read:
            point["first_read_us"] = offset(first_read[name], start, forward_end)
        if name in ready:
            point["ready_us"] = offset(ready[name], forward_end, backward_end)
        if point:
            points[name] = point
    return points


def _time_optimizer_step(copies, now):
    """Microseconds of DistributedOptimizer's step on `copies` (weight, gradient, momentum,
    buffer): each averaged gradient copied from its buffer, then one SGD-with-momentum
    update."""
    with torch.no_grad():
        start = now()
        for weight, gradient, momentum, buffer in copies:
            gradient.copy_(buffer.view_as(gradient))
            momentum.mul_(0.9).add_(gradient)
            weight.add_(momentum, alpha=-0.01)
        return (now() - start) * 1e6


def _plan_here(model, example_inputs, cluster, dp, options, sparsity_batches=None,
               measured=None):
    """Exports and plans in this process: (plan text, summary). measured: the compute as
    measure_compute timed it, or None."""
    name = type(model).__name__
    with tempfile.TemporaryDirectory(prefix="zenopt-export-") as scratch:
        onnx_path = os.path.join(scratch, f"{name}.onnx")
        plan_path = os.path.join(scratch, f"{name}.plan.json")
        export_onnx(model, example_inputs, onnx_path)
        command = [zenopt_binary(), onnx_path, "--cluster", cluster, "--dp", str(dp),
                   "-o", plan_path, "--json", "--quiet"] + _flags(options)
        if measured is not None:
            measured_path = os.path.join(scratch, f"{name}.compute.json")
            with open(measured_path, "w") as file:
                json.dump(measured, file)
            command += ["--measured-compute", measured_path]
        if sparsity_batches is not None:
            tables = _row_sparse_gradients(onnx_path)
            measured = measure_sparsity(model, sparsity_batches, dp, scratch, tables) \
                if tables else []
            if measured:
                command += ["--sparsity", ",".join(measured)]
        frozen = untrained_initializers(model)
        if frozen:
            command += ["--frozen", ",".join(frozen)]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as error:
            raise ZenoptError(f"cannot run the planner {command[0]}: {error} (build zenopt, "
                              "or set ZENOPT_BIN)") from error
        if result.returncode != 0:
            raise ZenoptError(f"planning {name} failed (zenopt exit code {result.returncode}):"
                              f" {result.stderr.strip()}\n  command: {' '.join(command)}")
        with open(plan_path) as file:
            text = file.read()
        _, problems = match_gradients(json.loads(text), model)
        if problems:
            raise ZenoptError(describe_mismatch(f"{name}.onnx", model, problems))
        return text, json.loads(result.stdout)


# The presets a CUDA job's profile refines, by the GPU's name (the profile measures NCCL and
# reshapes the preset to the job; the preset supplies what is not measured: peak FLOP/s).
_GPU_PRESETS = (("H100", "h100x256"), ("A100", "a100x8"), ("V100", "v100x16-10gbe"))


def _own_profile(model, rank, quick):
    """The job's profile (zenopt.profile.job_profile) for the model's device: MPI on CPUs,
    NCCL on CUDA. The cluster file's path on rank 0."""
    devices = {p.device for p in model.parameters()}
    device = devices.pop() if len(devices) == 1 else torch.device("cpu")
    if device.type == "cuda":
        gpu = torch.cuda.get_device_name(device)
        base = next((preset for marker, preset in _GPU_PRESETS if marker in gpu), "a100x8")
        backend = "nccl"
    else:
        gpu, base, backend = None, "cpu-local", "mpi"

    def say(text):
        if rank == 0:
            print(f"zenopt: {text}", file=sys.stderr, flush=True)
    return profile.job_profile(backend=backend, base=base, device=gpu, quick=quick,
                               progress=say)


def plan(model, example_inputs, cluster=None, dp=None, output=None, sparsity_batches=None,
         measure_steps=None, loss_fn=None, quick_profile=False, **options):
    """Plans the communication of `model` and returns the Plan (its path and summary).

    Every rank calls it (collective): rank 0 exports and plans, the others receive the plan.

    example_inputs: one local batch (a tensor or a tuple of forward's arguments); its batch
    size is the planner's. cluster: a preset name or cluster JSON file; None (the default)
    plans for this job as measured: its ranks are profiled on first use (MPI on CPUs, NCCL
    for CUDA tensors; cached per machine set and world size, zenopt.profile) and the model's
    own steps are timed on every rank at once (measure_compute) and the slowest rank's
    timing is priced. quick_profile: profile with `zenopt profile --quick`'s sweep (messages
    up to 1 MiB: seconds, for tests) instead of the full one (up to 16 MiB: about 20 s at 2
    ranks, once per machine set). measure_steps: steps timed (default 3 when the job is
    profiled, else 0: a preset or file prices the compute from FLOPs); loss_fn(output) the
    loss they differentiate (default: the sum of the outputs). dp: ranks to plan for
    (default: the job's). output: where to write the plan (default: a temporary file removed
    at exit). sparsity_batches: the first steps' local inputs (as many as ranks, at least):
    the row-sparse gradients' statistics are measured from the rows their embeddings look up
    (measure_sparsity, as Zen measures them) instead of taken from the Zipf model. Other
    keyword options are zenopt's flags: strategy="ddp", buckets=[3, 5],
    compressor="topk:0.01", precision="bf16", batch=32, trace="t.json", ...
    """
    rank, size = world.init()
    dp = size if dp is None else dp
    if cluster is None:
        cluster = _own_profile(model, rank, quick_profile)
        measure_steps = 3 if measure_steps is None else measure_steps
    measured = None
    if measure_steps:
        # Every rank times its steps at once: the ranks share the machine as in training.
        world.agree(None, "to time the model's steps")
        error = None
        try:
            measured = measure_compute(model, example_inputs, steps=measure_steps,
                                       loss_fn=loss_fn)
        except ZenoptError as failure:
            error = f"rank {rank}: {failure}"
        except Exception as failure:  # the model's own code raises any kind
            error = (f"rank {rank}: timing {type(model).__name__}'s steps failed: "
                     f"{type(failure).__name__}: {failure}")
        world.agree(error, "to time the model's steps")
        # A step ends when every rank has its averages: price the slowest rank's timing.
        total = int(measured["forward_us"] + measured["backward_us"] + measured["optimizer_us"])
        totals = runtime.world_exchange(total, size) if size > 1 else [total]
        slowest = max(range(size), key=lambda r: (totals[r], -r))
        measured = json.loads(world.broadcast_bytes(
            json.dumps(measured).encode() if rank == slowest else None, root=slowest))
    if rank == 0:
        try:
            text, summary = _plan_here(model, example_inputs, cluster, dp, options,
                                       sparsity_batches, measured)
            outcome = {"plan": text, "summary": summary}
        except ZenoptError as error:
            outcome = {"error": f"rank 0: {error}" if size > 1 else str(error)}
        message = json.dumps(outcome).encode()
    else:
        message = None
    outcome = json.loads(world.broadcast_bytes(message, root=0))
    if "error" in outcome:
        raise ZenoptError(outcome["error"] if rank == 0 else
                          f"rank {rank}: rank 0 could not plan: {outcome['error']}",
                          every_rank=True)
    path = os.fspath(output) if output is not None else _default_plan_path(type(model).__name__)
    # Atomically, so that ranks sharing a file system never read a half-written plan.
    staging = f"{path}.rank{rank}.tmp"
    try:
        with open(staging, "w") as file:
            file.write(outcome["plan"])
        os.replace(staging, path)
        error = None
    except OSError as failure:
        error = f"rank {rank}: cannot write the plan to {path}: {failure}"
    world.agree(error, "to write the plan")
    return Plan(path, outcome["summary"])
