#!/usr/bin/python3
# Counts the lines of each port's model (between "--- the model" and
# "--- end of the model" in examples/port_NAME.py and .cpp): every line that
# is not blank and not only a comment. For C++ it also counts the lines that
# Python has no counterpart for: member declarations ("std::shared_ptr<...>
# name;") and lines that only close a block ("}" or "};"). With --docs, also
# checks that the ports' table in that file (docs/nn.md) gives these counts;
# exits 1 naming each row that does not.
#   port_lines.py [EXAMPLES_DIR] [--docs FILE]
import argparse
import os
import re
import sys

PORTS = ["port_text_classifier", "port_resnet18", "port_dcgan", "port_unet"]


def model_lines(path, comment):
    text = open(path, encoding="utf-8").read()
    begin, end = text.find(f"{comment} --- the model"), text.find(f"{comment} --- end of the model")
    if begin < 0 or end < begin:
        sys.exit(f"port_lines.py: {path} lacks the '{comment} --- the model' ... '--- end of the model' markers")
    body = text[begin:end].splitlines()[1:]
    return [line for line in body if line.strip() and not line.strip().startswith(comment)]


def documented(docs):
    """{port: (C++ lines, Python lines)} from the rows "| `port_x` | ... | C / P (...) | ..." of `docs`."""
    rows = {}
    for line in open(docs, encoding="utf-8"):
        m = re.match(r"\| `(port_\w+)` \|.*\| (\d+) / (\d+) \(", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return rows


def main():
    ap = argparse.ArgumentParser(description="Line counts of the ports' models, C++ against Python.")
    ap.add_argument("folder", nargs="?", default=os.path.dirname(os.path.abspath(__file__)),
                    help="where the port_*.py and port_*.cpp files are (default: this script's folder)")
    ap.add_argument("--docs", help="a file whose ports' table must give these counts (docs/nn.md)")
    a = ap.parse_args()
    folder, docs = a.folder, a.docs
    if not os.path.isdir(folder):
        ap.error(f"{folder}: not a folder")
    if docs and not os.path.isfile(docs):
        ap.error(f"--docs {docs}: no such file")
    table = documented(docs) if docs else {}
    wrong = []
    print(f"{'port':<22} {'Python':>6} {'C++':>5} {'ratio':>6} {'C++ declarations':>17} {'C++ closing braces':>19}"
          f" {'ratio without them':>19}")
    for port in PORTS:
        py = model_lines(os.path.join(folder, port + ".py"), "#")
        cc = model_lines(os.path.join(folder, port + ".cpp"), "//")
        decl = sum(1 for line in cc if re.match(r"\s*std::shared_ptr<[\w:<>]+> [\w, ]+;\s*$", line))
        brace = sum(1 for line in cc if line.strip() in ("}", "};"))
        print(f"{port:<22} {len(py):>6} {len(cc):>5} {len(cc) / len(py):>6.2f} {decl:>17} {brace:>19}"
              f" {(len(cc) - decl - brace) / len(py):>19.2f}")
        if docs and table.get(port) != (len(cc), len(py)):
            wrong.append(f"{port}: {docs} gives {table.get(port, 'no row')}, the files {(len(cc), len(py))}")
    if wrong:
        sys.exit("port_lines.py: the documented line counts (C++, Python) differ:\n  " + "\n  ".join(wrong))


if __name__ == "__main__":
    main()
