#!/usr/bin/env python3
"""Every C++ block of README.md and docs/*.md is checked against the code, so a
snippet that drifts fails a test. The line before each ```cpp block says how:

  <!-- doc-check: compile -->          compiled (g++ -fsyntax-only) against
                                       tests/docs/prelude.h, which names what
                                       the prose takes as given
  <!-- doc-check: excerpt FILE -->     each line but "..." appears in FILE, in
                                       order (a walk through a real program)
  <!-- doc-check: same FILE -->        the block is FILE, character for
                                       character (FILE is built and run by
                                       its own test)

Usage: check_doc_blocks.py SOURCE_DIR WORK_DIR [CXX]. Exits 1 naming each
block that fails, or that says nothing."""
import glob
import os
import re
import subprocess
import sys

BLOCK = re.compile(r"^```cpp\n(.*?)^```\n", re.S | re.M)
MARK = re.compile(r"<!-- doc-check: (compile|excerpt|same)(?: (\S+))? -->\s*$")


def blocks(path):
    text = open(path, encoding="utf-8").read()
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").split("\n")[-1]
        yield line, MARK.match(before.strip()), m.group(1)


def excerpt_of(code, path):
    """Whether each line of `code` but '...' appears in the file, in order."""
    lines = [l.strip() for l in open(path, encoding="utf-8").read().split("\n")]
    at = 0
    for want in (l.strip() for l in code.split("\n")):
        if not want or want == "...":
            continue
        while at < len(lines) and lines[at] != want:
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None


def as_unit(k, code):
    """A block as a namespace: #include lines hoisted, class and function
    definitions at namespace scope, statements in a function."""
    includes, decls, body = [], [], []
    lines = code.split("\n")
    i = 0
    while i < len(lines):
        l = lines[i]
        if l.startswith("#include"):
            includes.append(l)
        elif re.match(r"^(class|struct)\s+\w+[^;]*$", l) or re.match(r"^int main\(", l):
            closing = "};" if not l.startswith("int main") else "}"
            while i < len(lines) and lines[i] != closing:
                decls.append(lines[i])
                i += 1
            decls.append(closing)
        else:
            body.append(l)
        i += 1
    unit = "namespace doc_%d {\n%s\nvoid block() {\n%s\n}\n}  // namespace doc_%d\n" % (
        k, "\n".join(decls), "\n".join(body), k)
    return includes, unit


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    root, work = sys.argv[1], sys.argv[2]
    cxx = sys.argv[3] if len(sys.argv) > 3 else "g++"
    os.makedirs(work, exist_ok=True)
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    bad, units, includes, where, count = [], [], [], [], 0
    for path in files:
        rel = os.path.relpath(path, root)
        for line, mark, code in blocks(path):
            count += 1
            name = f"{rel}:{line}"
            if not mark:
                bad.append(f"{name}: a C++ block without a '<!-- doc-check: ... -->' line before it")
                continue
            how, target = mark.group(1), mark.group(2)
            if how in ("excerpt", "same"):
                if not target or not os.path.isfile(os.path.join(root, target)):
                    bad.append(f"{name}: doc-check {how} names no file of the repository ({target})")
                elif how == "excerpt":
                    missing = excerpt_of(code, os.path.join(root, target))
                    if missing:
                        bad.append(f"{name}: not an excerpt of {target}: '{missing}' is not there (in order)")
                elif code != open(os.path.join(root, target), encoding="utf-8").read():
                    bad.append(f"{name}: differs from {target}")
                continue
            inc, unit = as_unit(len(units), code)
            includes += inc
            units.append(f"#line {line + 1} \"{rel}\"\n" + unit)
            where.append(name)
    source = os.path.join(work, "doc_blocks.cpp")
    with open(source, "w") as f:
        # The blocks' own includes first, as a file has them above its
        # using-directives (the prelude's `using namespace xg` brings the
        # namespace xg::data into view, which xtl's unqualified data(...)
        # calls must not see while its headers are read).
        f.write("\n".join(sorted(set(includes))) + "\n")
        f.write('#include "tests/docs/prelude.h"\n')
        f.write("\n".join(units))
    r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unused-variable", "-Wno-unused-parameter",
                        "-I", root, source], capture_output=True, text=True)
    if r.returncode != 0:
        bad.append("the compiled blocks do not compile:\n" + r.stderr[:6000])
    for b in bad:
        print("check_doc_blocks: " + b)
    if bad:
        return 1
    print(f"check_doc_blocks: {count} C++ blocks in README.md and docs/: {len(units)} compile, "
          f"{count - len(units)} match the files they quote")
    return 0


if __name__ == "__main__":
    sys.exit(main())
