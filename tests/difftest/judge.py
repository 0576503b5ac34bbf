"""The third judge of the differential fuzzer: when xgrad and PyTorch give
different gradients in float64, an independent value decides which side is
wrong.

A gradient is the derivative of a scalar, S = sum(seed * output) over the
step's outputs (the seeds held at their values), with respect to one tensor
w. The judge computes it by central finite differences of S in float64,
refined by Richardson extrapolation: the program is run again in PyTorch
with one element of w moved by +-h, and only its forward values and the
gradients of lower order (on which both libraries agreed) are read; the
derivative that differs is never taken by either library's autograd.

What autograd treats as a constant stays one: every value that did not
require a gradient in the unperturbed run (an input without requires_grad,
a gradient taken without create_graph, a grad() read after such a backward)
keeps its unperturbed value in the perturbed runs, and so do the seeds.

An intermediate value is moved in place as soon as it is defined, before
anything reads it. Where the derivative depends on how a library wrote its
backward formulas there is no truth to find, and the judge gives no
verdict: when a lower-order gradient runs through the value's producer and
that producer's backward saved the value itself (exp, tanh, softmax, ...),
PyTorch's version check stops the perturbed run; and a value that is
another value's alias (an op that changed nothing) is not judged.
A forward value that differs is judged by running PyTorch's op on xgrad's
arguments: equal to xgrad's, the difference is inherited from an argument.
"""
import math

H0 = (2.0 ** -7, 2.0 ** -12)  # the first step of each attempt, times max(1, |w_j|)
LEVELS = 5                    # central differences at h, h/2, ..., h/16
ELEMENTS = 64                 # more differing elements than this in one tensor: no verdict
REL = 1e-9                    # the judge's own resolution, relative to max(1, |estimate|, |xgrad's value|)


class Kink(Exception):
    """The function is not smooth at the point: its one-sided slopes differ."""


class Probe:
    """A perturbed run: element j of value vid moved by delta; `frozen`
    and `rg` from the unperturbed run; the run stops at step `stop` and
    returns the sum of seed * output over the roots of `sum_steps`."""

    def __init__(self, base, vid, j, delta, stop, sum_steps):
        self.frozen, self.rg = base["frozen"], base["rg"]
        self.vid, self.j, self.delta, self.stop, self.sum_steps = vid, j, delta, stop, set(sum_steps)
        self.total = 0.0


def richardson(f, x):
    """f'(0) from central differences, with an error estimate: the best of
    the attempts, each a Richardson table over LEVELS halvings of h. Raises
    Kink where the second difference f(h) - 2 f(0) + f(-h) shrinks like h
    rather than h^2 over the last halving (one-sided slopes that differ: a
    central difference there is their mean, a convention, not a derivative)."""
    best = None
    f0 = f(0.0)
    for h0 in H0:
        h = h0 * max(1.0, abs(x))
        table, second = [], []
        for k in range(LEVELS):
            hk = h / 2 ** k
            up, down = f(hk), f(-hk)
            second.append(up - 2 * f0 + down)
            row = [(up - down) / (2 * hk)]
            for m in range(1, k + 1):
                row.append(row[m - 1] + (row[m - 1] - table[k - 1][m - 1]) / (4 ** m - 1))
            table.append(row)
        noise = 1e3 * 2.0 ** -52 * max(1.0, abs(f0))
        if abs(second[-1]) > noise and abs(second[-2]) < 3 * abs(second[-1]):
            raise Kink(f"the second difference went {second[-2]:.3g} -> {second[-1]:.3g} as h halved")
        est, err = table[-1][-1], abs(table[-1][-1] - table[-2][-2])
        if best is None or err < best[1]:
            best = (est, err)
    return best


def owners(steps, produces):
    """The step that defines each value, and the first value of each step."""
    owner, first = [], []
    for k, s in enumerate(steps):
        first.append(len(owner))
        owner += [k] * produces(s)
    return owner, first


def accumulating(steps, leaf_vid, stop, same):
    """The backward steps before `stop` that add to the leaf's grad(): those
    after the last zero_grad of it."""
    out = []
    for k, s in enumerate(steps[:stop]):
        if s["op"] == "zero_grad" and same(s["args"][0], leaf_vid):
            out = []
        elif s["op"] == "backward":
            out.append(k)
    return out


def judge_entry(prog, base, run_probe, vid, stop, sum_steps, x, t):
    """The verdict on one differing tensor, the derivative of the sum at
    `sum_steps` with respect to value vid: 'pytorch', 'xgrad' or
    'undecided', and one line of figures per judged element."""
    if not base["rg"][vid]:
        truth = lambda j: (0.0, 0.0)  # autograd's constant: its derivative is 0
    else:
        def truth(j):
            x0 = base["frozen"][vid].reshape(-1)[j].item()
            return richardson(lambda d: run_probe(Probe(base, vid, j, d, stop, sum_steps)), x0)
    x = [0.0] * len(t) if x is None else x
    t = [0.0] * len(x) if t is None else t
    if any(v is None for v in x + t):
        return "undecided", ["a value is not finite"]
    scale = max([1.0] + [abs(v) for v in x + t if math.isfinite(v)])
    # every element beyond the fuzzer's own tolerance
    diffs = sorted(((abs(a - b) if math.isfinite(a - b) else math.inf, j) for j, (a, b) in enumerate(zip(x, t))
                    if not abs(a - b) <= 1e-10 * scale), reverse=True)
    if len(diffs) > ELEMENTS:
        return "undecided", [f"{len(diffs)} elements differ, more than the {ELEMENTS} the judge takes"]
    verdicts, lines = [], []
    for d, j in diffs:
        try:
            est, err = truth(j)
        except Kink as e:
            verdicts.append("undecided")
            lines.append(f"element {j}: not smooth here ({e})")
            continue
        except Exception as e:  # noqa: BLE001 (a perturbed run that fails decides nothing)
            verdicts.append("undecided")
            lines.append(f"element {j}: a perturbed run failed ({type(e).__name__}: {str(e)[:80]})")
            continue
        # the resolution from the judge's value and xgrad's alone: PyTorch's, wrong, must not widen it
        tol = max(REL * max(1.0, abs(est), abs(x[j])), 8 * err)
        dx, dt = abs(x[j] - est), abs(t[j] - est)
        v = "pytorch" if dx <= tol < dt else "xgrad" if dt <= tol < dx else "undecided"
        verdicts.append(v)
        lines.append(f"element {j}: xgrad {x[j]:.12g}, pytorch {t[j]:.12g}, judge {est:.12g} +- {err:.1e} "
                     f"(tolerance {tol:.1e}): {v + ' wrong' if v != 'undecided' else v}")
    if not verdicts:
        return "undecided", ["no element differs by more than the fuzzer's tolerance"]
    if "xgrad" in verdicts:
        return "xgrad", lines
    return ("pytorch" if all(v == "pytorch" for v in verdicts) else "undecided"), lines


def judge(prog, xr, tr, base, run_probe, forward_value, produces, close, rtol):
    """Judges every tensor on which xr (xgrad) and tr (PyTorch) differ.
    Returns ('pytorch', lines) when each is a gradient PyTorch has wrong or a
    forward value that follows from xgrad's own arguments, with at least one
    of the first kind; else ('xgrad' or 'undecided', lines)."""
    steps = prog["steps"]
    owner, first = owners(steps, produces)
    same = lambda a, b: base["objs"][a] is base["objs"][b]
    leaf_vids = [first[k] for k, s in enumerate(steps) if s["op"] == "input"]
    verdicts, lines = [], []

    def add(what, verdict, more):
        verdicts.append(verdict)
        lines.append(f"{what}: {verdict + ' wrong' if verdict in ('pytorch', 'xgrad') else verdict}")
        lines.extend("  " + m for m in more)

    if len(xr["values"]) != len(tr["values"]) or len(xr["leaf_grads"]) != len(tr["leaf_grads"]):
        return "undecided", ["the two sides defined different numbers of values"]
    entries = [("values", i) for i in range(min(len(xr["values"]), len(tr["values"])))]
    entries += [("leaf_grads", i) for i in range(min(len(xr["leaf_grads"]), len(tr["leaf_grads"])))]
    for kind, i in entries:
        x, t = xr[kind][i], tr[kind][i]
        e = close(x, t)
        if e is not None and e <= rtol:
            continue
        if e is None:
            add(f"{kind} {i}", "undecided", ["the sizes differ"])
            continue
        if kind == "leaf_grads":
            vid = leaf_vids[i]
            add(f"grad() of leaf {i} at the end", *judge_entry(prog, base, run_probe, vid, len(steps),
                                                                accumulating(steps, vid, len(steps), same), x, t))
            continue
        k = owner[i]
        s = steps[k]
        what = f"value {i} (step {k}, {s['op']})"
        if s["op"] == "grad":
            w = s["wrt"][i - first[k]]
            if any(same(w, v) for v in range(len(base["objs"])) if v != w):
                add(what, "undecided", [f"value {w} is also another value (an op that changed nothing)"])
            else:
                add(what, *judge_entry(prog, base, run_probe, w, k, [k], x, t))
        elif s["op"] == "leaf_grad":
            vid = s["args"][0]
            add(what, *judge_entry(prog, base, run_probe, vid, k, accumulating(steps, vid, k, same), x, t))
        elif s["op"] in ("input", "ids", "module"):
            add(what, "undecided", ["not a gradient and not an op of the table"])
        else:
            try:
                y = forward_value(k, xr)
            except Exception as e:  # noqa: BLE001
                add(what, "undecided", [f"PyTorch's op on xgrad's arguments failed: {e}"])
                continue
            ok = close(x, y) is not None and close(x, y) <= rtol
            add(what, "inherited" if ok else "undecided",
                ["PyTorch's op on xgrad's arguments gives xgrad's value" if ok else
                 "PyTorch's op on xgrad's arguments does not give xgrad's value"])
    if "xgrad" in verdicts:
        return "xgrad", lines
    if "pytorch" in verdicts and all(v in ("pytorch", "inherited") for v in verdicts):
        return "pytorch", lines
    return "undecided", lines
