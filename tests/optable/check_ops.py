#!/usr/bin/python3
"""The per-op sweep over the op table (optable.py): every entry alone, in
float64, with two oracles that xgrad did not write.

- PyTorch: for each entry, `--samples` random instances (shapes, options,
  optional arguments), each comparing the value, the first gradients with
  respect to every input, the second order (the first gradients
  differentiated with respect to every input), and the first gradient with
  respect to each input alone differentiated again (mixed partials); and,
  for an op with kinks, one instance whose input holds the kinks exactly
  (value and first gradient: PyTorch's one-sided choice there).
- Finite differences: the same instances through xgrad's gradcheck and
  gradgradcheck (mixed partials), in xg_difftest, where no kink is near.
- Export: each entry with an `onnx` spec, the forward of the first of its
  instances that exports (by xg_difftest --onnx), must hold the ONNX
  operators the spec names and agree with ONNX Runtime (difftest.py's
  --onnx rule).

Prints one line per family with the entries, instances and the worst
relative error against PyTorch, then 'N passed, M failed'.

  check_ops.py --binary build/tests/xg_difftest [--samples 6] [--only NAME ...]
  check_ops.py --binary ... --list          (the table's names, and the C++ side's)
"""
import argparse
import json
import os
import random
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "difftest"))
sys.path.insert(0, HERE)
import difftest as dt  # noqa: E402
import optable  # noqa: E402
import torch  # noqa: E402


def add_grads(g, y, leaves, order):
    """The gradients of value y to `order`: first with respect to every leaf
    (recorded), then each of those differentiated with respect to every leaf,
    then each leaf's first gradient alone differentiated again (mixed partials)."""
    if not leaves:
        return
    out = g.vals[y]
    w = g.const(tuple(out.shape), -1.5, 1.5)
    g.steps.append({"op": "grad", "outputs": [y], "grad_outputs": [w], "wrt": leaves, "create_graph": order >= 2})
    first = list(range(len(g.vals), len(g.vals) + len(leaves)))
    for leaf in leaves:
        g.vals.append(torch.zeros_like(g.vals[leaf]))
        g.kind.append("grad")
        g.rg.append(False)
    if order < 2:
        return
    seeds = [g.const(tuple(g.vals[f].shape), -1.5, 1.5) for f in first]
    g.steps.append({"op": "grad", "outputs": first, "grad_outputs": seeds, "wrt": leaves})
    for leaf in leaves:
        g.vals.append(torch.zeros_like(g.vals[leaf]))
    for j, leaf in enumerate(leaves):
        g.steps.append({"op": "grad", "outputs": [y], "grad_outputs": [w], "wrt": [leaf], "create_graph": True})
        one = len(g.vals)
        g.vals.append(torch.zeros_like(g.vals[leaf]))
        g.steps.append({"op": "grad", "outputs": [one], "grad_outputs": [seeds[j]], "wrt": leaves})
        for other in leaves:
            g.vals.append(torch.zeros_like(g.vals[other]))


def draw(op, seed):
    """A generator holding the op's arguments as fresh inputs, and the step."""
    for attempt in range(200):
        g = dt.Gen(seed * 1000 + attempt)
        s = {"op": op.name}
        args = op.draw(g, None, s, op.kinks)
        if args is not None:
            return g, s, args
    raise SystemExit(f"check_ops: no instance of {op.name} could be drawn in 200 attempts (seed {seed})")


def finite(out):
    return out.numel() > 0 and bool(torch.isfinite(out).all())


def instance(op, seed):
    """A program: fresh inputs, the op, and its gradients to second order;
    and the same op under gradcheck."""
    for attempt in range(50):
        g, s, args = draw(op, seed * 100 + attempt)
        while args and args[-1] is None:
            args.pop()
        s["args"] = args
        try:
            out = dt.forward(op.name, s, [None if a is None else g.vals[a] for a in args])
        except (RuntimeError, ValueError, IndexError):
            continue
        if not finite(out):
            continue
        target = dict(s)
        y = g.add_step(s, out.detach(), "fwd", False)
        leaves = [a for a in args if a is not None and g.steps[a]["op"] == "input" and g.steps[a].get("rg")]
        if op.grad:
            add_grads(g, y, leaves, op.torch_order)
        check = None
        if op.grad and leaves and not s.get("no_fd"):  # no_fd: a choice of PyTorch's that is not the derivative
            steps = [st for st in g.steps if st["op"] in ("input", "ids")]
            check = {"steps": steps + [{"op": "gradcheck", "target": target, "second_order": True}]}
        return {"steps": g.steps}, check
    raise SystemExit(f"check_ops: no finite instance of {op.name} (seed {seed})")


def module_instance(entry, seed, seed_index=0):
    """A program: the torch.nn class built with PyTorch's keyword arguments,
    its state dict (parameters random) loaded strictly, forward on the
    draw's inputs, and gradients to second order of inputs and parameters."""
    op = entry.op
    for attempt in range(50):
        g, s, args = draw(op, seed * 100 + attempt)
        n = len(args)
        tensors = {k: args[i] for k, i in entry.tensors.items() if -n <= i < n and args[i] is not None}
        inputs = entry.inputs(g, s, args) if entry.inputs else [a for a in args if a is not None and a not in tensors.values()]
        while inputs and inputs[-1] is None:  # optional trailing arguments left out
            inputs = inputs[:-1]
        step = {"op": "module", "class": entry.cls, "kwargs": entry.kwargs(s, g.r), "tensors": tensors,
                "args": inputs, "eval": entry.eval}
        try:
            m = optable.torch_module(step, g.vals)
            state = {}
            for k, t in m.state_dict().items():
                is_param = k in dict(m.named_parameters())
                v = torch.empty_like(t).uniform_(-1, 1, generator=torch.Generator().manual_seed(seed)) if is_param else t
                state[k] = {"shape": list(v.shape), "data": v.flatten().tolist()}
            step["state"] = state
            step["params"] = sorted(k for k, _ in m.named_parameters())
            out = optable.torch_module(step, g.vals)(*[None if i is None else g.vals[i] for i in inputs])
        except (RuntimeError, ValueError, IndexError):
            continue
        if not finite(out):
            continue
        target = dict(step)
        y = g.add_step(step, out.detach(), "fwd", False)
        for name in step["params"]:
            g.vals.append(torch.tensor(state[name]["data"], dtype=torch.float64).reshape(state[name]["shape"]))
            g.kind.append("fwd")
            g.rg.append(True)
        params = list(range(y + 1, y + 1 + len(step["params"])))
        leaves = [a for a in inputs if a is not None and g.steps[a]["op"] == "input" and g.steps[a].get("rg")] + params
        if op.grad:
            add_grads(g, y, leaves, op.torch_order)
        check = None
        # finite differences of inputs and parameters, for the first two samples (the parity with
        # PyTorch above takes every first gradient alone; here a sample of elements, all at once)
        if op.grad and leaves and not s.get("no_fd") and seed_index < 2:
            steps = [st for st in g.steps if st["op"] in ("input", "ids")]
            check = {"steps": steps + [{"op": "gradcheck", "target": target, "second_order": True}]}
        return {"steps": g.steps}, check
    raise SystemExit(f"check_ops: no instance of module {entry.cls} (seed {seed})")


def kink_instance(op):
    """The op on its kinks and beside them: value and first gradient."""
    for seed in range(50):
        r = random.Random(seed)
        s = {"op": op.name}
        g = dt.Gen(seed)
        probe = g.new_input((1,))
        if op.draw(g, probe, s, lambda s: []) != [probe]:  # unary ops only
            return None
        pts = op.kinks(s)
        if not pts:
            return None
        data = sorted(set(pts)) + [r.uniform(-2, 2) for _ in range(3)]
        prog = {"steps": [
            {"op": "input", "shape": [len(data)], "data": data, "rg": True},
            dict(s, args=[0]),
            {"op": "input", "shape": [len(data)], "data": [r.uniform(-1.5, 1.5) for _ in data], "rg": False},
            {"op": "grad", "outputs": [1], "grad_outputs": [2], "wrt": [0]},
        ]}
        return prog
    return None


def onnx_spec_met(spec, types):
    """Whether a graph of node types `types` holds what an entry's `onnx`
    spec names: alternatives split by " or ", each a comma list of operators
    that must all appear."""
    return any({t.strip() for t in alt.split(",")} <= types for alt in spec.split(" or "))


def check_exports(binary, ops, workdir, tries=16):
    """Export check: (failures, count). Each op with an `onnx` spec, the
    forward of its first instance that exports (instances with options that
    the export refuses by name, or that leave nothing to export, are passed
    over, up to `tries`), run by ONNX Runtime and its graph's operators
    held against the spec."""
    import onnx
    entries = [op for op in ops if op.onnx]
    failures, waiting, last = [], list(entries), {}
    for k in range(tries):  # a round exports the k-th instance of each entry still waiting
        if not waiting:
            break
        progs = [dt.forward_only(instance(op, zlib.crc32(op.name.encode()) + k)[0]) for op in waiting]
        results = dt.check_onnx(binary, progs, workdir, "export")
        still = []
        for j, (op, why) in enumerate(zip(waiting, results)):
            if why is not None and why.startswith(dt.SKIP):
                still.append(op)
                last[op.name] = why
            elif why is not None:
                failures.append(f"{op.name}: export: {why}")
            else:
                model = onnx.load(os.path.join(workdir, "export-onnx", f"p{j}.onnx"))
                types = {n.op_type for n in model.graph.node}
                if not onnx_spec_met(op.onnx, types):
                    failures.append(f"{op.name}: export: the graph's operators {sorted(types)} do not hold {op.onnx!r}")
        waiting = still
    failures += [f"{op.name}: export: none of {tries} instances exports ({last[op.name]})" for op in waiting]
    return failures, len(entries)


def worst_error(xr, tr):
    worst = 0.0
    for a, b in zip(xr["values"], tr["values"]):
        e = dt.close(a, b)
        worst = max(worst, e if e is not None else float("inf"))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True, help="the xg_difftest program")
    ap.add_argument("--samples", type=dt.positive, default=6, help="random instances per entry (>= 1)")
    ap.add_argument("--only", nargs="*", help="these entries alone")
    ap.add_argument("--workdir", default="optable-work", help="where programs and results go")
    ap.add_argument("--list", action="store_true", help="compare the table's names with xg_difftest's and exit")
    a = ap.parse_args()
    if not (os.path.isfile(a.binary) and os.access(a.binary, os.X_OK)):
        ap.error(f"--binary {a.binary}: not an executable file (build the xg_difftest target)")
    import subprocess
    cpp = set(subprocess.run([a.binary, "--list-table"], capture_output=True, text=True, check=True).stdout.split())
    py = set(optable.BY_NAME)
    if cpp != py:
        print(f"check_ops: the table (optable.py) and xg_difftest (table_ops.cpp) differ: only in the table "
              f"{sorted(py - cpp)}, only in C++ {sorted(cpp - py)}")
        print("0 passed, 1 failed")
        return 1
    cpp_modules = set(subprocess.run([a.binary, "--list-modules"], capture_output=True, text=True,
                                     check=True).stdout.split())
    if cpp_modules != set(optable.MODULES_BY_NAME):
        print(f"check_ops: the module table (optable.py) and xg_difftest (table_modules.cpp) differ: only in the "
              f"table {sorted(set(optable.MODULES_BY_NAME) - cpp_modules)}, only in C++ "
              f"{sorted(cpp_modules - set(optable.MODULES_BY_NAME))}")
        print("0 passed, 1 failed")
        return 1
    if a.list:
        print("\n".join(sorted(py)))
        return 0
    ops = optable.OPS if not a.only else [optable.BY_NAME[n] for n in a.only if n in optable.BY_NAME]
    os.makedirs(a.workdir, exist_ok=True)
    parity, checks, owners = [], [], []
    for op in ops:
        base = zlib.crc32(op.name.encode())
        for k in range(a.samples):
            p, c = instance(op, base + k)
            parity.append(p)
            owners.append((op, f"sample {k}"))
            if c is not None:
                checks.append((op, k, c))
        kp = kink_instance(op)
        if kp is not None:
            parity.append(kp)
            owners.append((op, "kinks"))
    mods = optable.MODULES if not a.only else [m for m in optable.MODULES if m.cls in a.only or m.op.name in a.only]
    for entry in mods:
        base = zlib.crc32(entry.cls.encode())
        for k in range(a.samples):
            p, c = module_instance(entry, base + k, k)
            parity.append(p)
            owners.append((entry, f"module sample {k}"))
            if c is not None:
                checks.append((entry, k, c))
    xs = dt.run_xgrad(a.binary, parity, a.workdir, "parity")
    passed = failed = 0
    worst = {}
    counts = {}
    for (op, what), p, x in zip(owners, parity, xs):
        t = dt.run_torch(p)
        msg = dt.compare(p, x, t)
        family = "modules" if isinstance(op, optable.ModuleEntry) else op.family
        name = op.cls if isinstance(op, optable.ModuleEntry) else op.name
        fam = worst.setdefault(family, [0.0, ""])
        counts[family] = counts.get(family, 0) + 1
        if x.get("error") is None and t.get("error") is None:
            e = worst_error(x, t)
            if e > fam[0]:
                fam[0], fam[1] = e, name
        if msg is None:
            passed += 1
        else:
            failed += 1
            path = os.path.join(a.workdir, f"failure-{name}-{what.replace(' ', '')}.json")
            with open(path, "w") as f:
                json.dump(p, f, indent=1)
            print(f"{name} {what}: {msg} ({path})")
    results = dt.run_xgrad(a.binary, [c for _, _, c in checks], a.workdir, "gradcheck")
    for (op, k, c), r in zip(checks, results):
        gc = (r.get("gradchecks") or [None])[0]
        if r.get("error") or gc is None or not gc["first"] or not gc["second"]:
            failed += 1
            why = r.get("error") or (gc and (gc["first_message"] if not gc["first"] else gc["second_message"]))
            print(f"{getattr(op, 'cls', None) or op.name} sample {k}: gradcheck failed: {why}")
        else:
            passed += 1
    for fam in sorted(worst):
        names = [m.cls for m in mods] if fam == "modules" else sorted({o.name for o in ops if o.family == fam})
        print(f"{fam}: {len(names)} {'classes' if fam == 'modules' else 'ops'}, {counts[fam]} instances against "
              f"PyTorch, worst relative error {worst[fam][0]:.2g} ({worst[fam][1] or '-'})")
    export_failures, exported = check_exports(a.binary, ops, a.workdir)
    for why in export_failures:
        print(why)
    failed += len(export_failures)
    passed += exported - len(export_failures)
    print(f"gradcheck + gradgradcheck: {len(checks)} instances")
    print(f"export: {exported} entries with an onnx spec, each exported alone and run by ONNX Runtime")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
