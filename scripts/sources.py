"""The C++ sources the repository's checks read (scripts/check_comments.py,
scripts/long_functions.py): the library's folders and apps/."""
import os
import sys

FOLDERS = ("engine", "autograd", "data", "nn", "optim", "models", "distributed", "train", "onnx", "apps")
SUFFIXES = (".h", ".cpp")


def source_files(root, folders=FOLDERS, who="sources"):
    """(path, path relative to root) of every .h and .cpp below the folders, in a fixed order."""
    for folder in folders:
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            print(f"{who}: no folder {top}", file=sys.stderr)
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SUFFIXES):
                    path = os.path.join(dirpath, name)
                    yield path, os.path.relpath(path, root).replace(os.sep, "/")
