"""Prints the configuration of a large-model plan: from a `--json` summary's `parallel`, or
from a plan file's `parallel` section (JSON text)."""
import json
import sys

data = json.load(open(sys.argv[1]))
parallel = data["parallel"]
if isinstance(parallel, str):
    parallel = json.loads(parallel)
print("tp {} pp {} dp {} sequence_parallel {}".format(parallel["tp"], parallel["pp"], parallel["dp"],
                                                      json.dumps(parallel["sequence_parallel"])))
