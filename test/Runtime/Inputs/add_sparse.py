"""Adds row-sparse tensors (docs/plan-format.md "sparse_tensors") to a plan file, one per
--scheme (a SparseScheme spelling, with omnireduce's block_rows or sparcml's dense_threshold
after a colon), as zenopt's planner writes them, for the runtime tests."""
import argparse
import json


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plan")
    parser.add_argument("--scheme", required=True, help="comma-separated, e.g. balanced,omnireduce:64")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--row-elements", type=int, default=8)
    parser.add_argument("--density", type=float, default=0.02)
    parser.add_argument("--skew", type=float, default=0.6)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    with open(args.plan) as file:
        plan = json.load(file)
    powers = plan["cluster"]["world_size"].bit_length()  # 1, 2, 4, ... ranks merged
    plan["sparse_tensors"] = []
    for index, spec in enumerate(args.scheme.split(",")):
        scheme, _, parameter = spec.partition(":")
        entry = {"name": f"table.{index}", "rows": args.rows,
                 "row_elements": args.row_elements, "scheme": scheme}
        if scheme == "omnireduce":
            entry["block_rows"] = int(parameter or 256)
        if scheme == "sparcml":
            entry["dense_threshold"] = float(parameter or 0.25)
        entry["statistics"] = {"density": args.density,
                               "gamma": [min(2.0 ** k, 1.0 + 0.9 * k) for k in range(powers)],
                               "skew": args.skew, "source": "model"}
        entry["predicted_us"] = 100.0
        plan["sparse_tensors"].append(entry)
    with open(args.output, "w") as file:
        json.dump(plan, file, indent=2)


if __name__ == "__main__":
    main()
