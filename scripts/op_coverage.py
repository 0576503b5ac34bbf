#!/usr/bin/python3
"""Every public function of autograd/ops.h and autograd/losses.h is drawn by
the differential fuzzer (tests/difftest/difftest.py's own ops, or an entry of
the op table tests/optable/optable.py, under its name or the name
optable.SAME_AS gives it), or listed in optable.NOT_DRAWN with the reason.
Prints the count; exits 1 naming each function in neither, and each name
listed that the headers no longer declare. Each of those functions is also
named as code in docs/*.md (in backticks; `max_pool1d/2d/3d` names all
three), so that a user finds every op in the docs; one that is not fails
too. Exits 77
without PyTorch (the tables import it).
  op_coverage.py ROOT"""
import os
import re
import sys


def declared(root):
    """The names of the functions the two headers declare at namespace level."""
    names = set()
    decl = re.compile(r"^(?!struct|enum|using|class|namespace|#|//|template)([A-Za-z_][\w:<>, ]*?)\s+\*?&?([a-z_][a-z0-9_]*)\(",
                      re.M)
    for header in ("autograd/ops.h", "autograd/losses.h"):
        with open(os.path.join(root, header)) as f:
            names |= {m.group(2) for m in decl.finditer(f.read())}
    return names


def undocumented(root, names):
    """The names that no page of docs/ writes as code (inside backticks), so
    that a word of prose ("where", "sum") does not count."""
    text = ""
    for page in sorted(os.listdir(os.path.join(root, "docs"))):
        if page.endswith(".md"):
            with open(os.path.join(root, "docs", page)) as f:
                text += f.read() + "\n"
    # `max_pool1d/2d/3d` -> max_pool1d max_pool2d max_pool3d
    text = re.sub(r"\b(\w+?)([123]d)((?:/[123]d)+)",
                  lambda m: " ".join(m.group(1) + d for d in [m.group(2)] + m.group(3).split("/")[1:]), text)
    code = " ".join(re.findall(r"`([^`]*)`", text))
    return sorted(n for n in names if not re.search(r"\b" + re.escape(n) + r"\b", code))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: op_coverage.py ROOT")
    root = sys.argv[1]
    try:
        import torch  # noqa: F401
    except ImportError:
        print("op_coverage: python3-torch is not installed (scripts/setup.sh installs it)")
        return 77
    sys.path.insert(0, os.path.join(root, "tests", "difftest"))
    sys.path.insert(0, os.path.join(root, "tests", "optable"))
    import difftest
    import optable
    names = declared(root)
    drawn = set(difftest.OPS) | set(optable.BY_NAME)
    covered = drawn | {n for n, alias in optable.SAME_AS.items() if alias in drawn}
    missing = sorted(names - covered - set(optable.NOT_DRAWN))
    stale = sorted((set(optable.NOT_DRAWN) | set(optable.SAME_AS)) - names)
    for n in missing:
        print(f"op_coverage: {n} (autograd/ops.h or losses.h) is neither drawn by the fuzzer nor in optable.NOT_DRAWN")
    for n in stale:
        print(f"op_coverage: {n} is listed in optable.py but no header declares it")
    unnamed = undocumented(root, names)
    for n in unnamed:
        print(f"op_coverage: {n} (autograd/ops.h or losses.h) is named nowhere in docs/*.md")
    drawn_public = len(names & covered)
    print(f"op_coverage: {len(names)} public functions: {drawn_public} drawn by the fuzzer, "
          f"{len(names) - drawn_public - len(missing)} not drawn (each with its reason), {len(missing)} unaccounted, "
          f"{len(unnamed)} not in the docs")
    return 1 if missing or stale or unnamed else 0


if __name__ == "__main__":
    sys.exit(main())
