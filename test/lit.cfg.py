# lit configuration for zenopt's FileCheck tests.
import os
import lit.formats

config.name = "zenopt"
config.test_format = lit.formats.ShTest(not lit_config.isWindows)
config.suffixes = [".mlir", ".test", ".txt"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "README.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zen_obj_root, "test")

# Tools: ours first, then LLVM's FileCheck/not/count/split-file.
config.environment["PATH"] = os.pathsep.join(
    [config.zen_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%models", os.path.join(config.zen_src_root, "examples", "models")))
config.substitutions.append(("%src", config.zen_src_root))
config.substitutions.append(("%python", config.python_executable))
# A wrapper that gives every MPI job its own session directory (see test/mpirun.sh).
config.environment["ZEN_MPIEXEC"] = config.mpiexec
config.substitutions.append(("%mpirun", os.path.join(config.zen_src_root, "test", "mpirun.sh")))
if config.zen_have_cuda:
    config.available_features.add("cuda")
    # A visible GPU: device paths run instead of being refused.
    import shutil, subprocess
    smi = shutil.which("nvidia-smi")
    if smi and subprocess.run([smi, "-L"], capture_output=True).returncode == 0:
        config.available_features.add("gpu")
# zenopt.torch: Debian's interpreter with PyTorch and the build tree's package; waits time out
# after a minute, so that a test that should fail fails rather than hangs.
if config.torch_python:
    config.available_features.add("torch")
    config.substitutions.append(("%torch-python", "env PYTHONPATH={} ZENRT_TIMEOUT_S=60 {}".format(
        config.zen_python_dir, config.torch_python)))
