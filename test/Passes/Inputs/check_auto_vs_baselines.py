"""For every model x preset cluster, with compression off and allowed: import the
model, run zen-autotune, and check that the predicted iteration time is no worse
than any baseline's and never below the lower bound (which covers the allowed compressors).
Prints one line per case and a final verdict."""
import re
import subprocess
import sys

models_dir = sys.argv[1]
models = ["resnet50", "vgg16", "bert_base_encoder", "gpt2_small"]
clusters = ["a100x64", "a100x8", "h100x256", "v100x16-10gbe", "cpu-local"]
compressors = ["", "fp16,topk:0.01,powersgd:4"]
number = r"([-+.e0-9]+) : f64"


def prediction(text):
    """The `key = value : f64` fields of zen.predicted's #zen.prediction."""
    body = re.search(r"zen\.predicted = #zen\.prediction<([^>]*)>", text).group(1)
    return {key: float(value) for key, value in re.findall(r"(\w+) = " + number, body)}


def baselines_of(text):
    """zen.baselines' predicted iterations by name (its #zen.baseline entries)."""
    body = re.search(r"zen\.baselines = \[([^\]]*)\]", text).group(1)
    return {name: float(value) for name, value in
            re.findall(r'#zen\.baseline<name = "([\w-]+)", iteration_us = ' + number, body)}


failures = 0
for model in models:
    ir = subprocess.run(["zenopt", "inspect", f"{models_dir}/{model}.onnx", "--mlir"],
                        check=True, capture_output=True, text=True).stdout
    for cluster in clusters:
        for compressor in compressors:
            option = f"--zen-autotune=cluster={cluster} compressor={compressor}"
            planned = subprocess.run(["zenopt-opt", option], input=ir, check=True,
                                     capture_output=True, text=True).stdout
            header = planned.splitlines()[0]
            predicted = prediction(header)
            baselines = baselines_of(header)
            auto = predicted["iteration_us"]
            best = min(baselines.values())
            ok = (auto <= best and len(baselines) == 5
                  and auto >= predicted["lower_bound_us"] * (1 - 1e-9))
            failures += not ok
            print(f"{'ok' if ok else 'FAIL'} {model} {cluster} [{compressor or 'none'}] "
                  f"auto={auto:.1f} best_baseline={best:.1f} "
                  f"lower_bound={predicted['lower_bound_us']:.1f}")
print("ALL OK" if failures == 0 else f"{failures} FAILED")
