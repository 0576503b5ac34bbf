#!/usr/bin/env python3
"""Bad-input probe of xgrad's programs, as a new user would try them.

    python3 tests/probe/probe.py --bin build-dir-with-the-8-binaries --workdir /tmp/probe
    python3 tests/probe/probe.py --list            # the cases, without running them

The eight programs are train_tasks, decode, attention_map (apps/seq2seq),
char_lm (train, sample), g2p (train, pronounce, attention), addition
(examples/addition.cpp), vision (train, evaluate, predict, picture; it
reads Debian's Fashion-MNIST) and xg_export; --bin names the folder holding
all eight (a build tree's binaries copied into one folder, or /tmp/before).

The script runs a fixed, deterministic list of cases built from tables: every
numeric option of every program with 0 and bad values (-1, huge, 1e30, nan,
inf, '', 'abc', 2^63, ...), every word option, the boolean flags given a
value, every path option given '', a directory, a missing directory,
/dev/null, a file used as a directory, a path under /proc, a read-only
directory, a file name that is too long; checkpoints that are empty, binary,
truncated, of another program, with a flipped bit, a NaN tensor or a header
claiming a huge shape; corpora and dictionaries that are empty, binary, CRLF
or leave no held-out word; and the cases of the issue (the same path for
--checkpoint and --metrics, --checkpoint /dev/null, an unwritable --metrics,
--resume=1e30, --eps 0, a model too large for memory).

Each training run is tiny (--steps 2, a model of a few thousand parameters,
the data sets the script writes), so most cases take well under a second.

Each case says what should happen ('fail', 'succeed' or 'either') and is
classified:

  ok           exit 0, where success (or either) is expected
  silent-ok    exit 0, where the table says the program should refuse
  clear-error  exit 1 or 2 with 1 to 3 lines on stderr, each printable and
               at most 300 characters, without C++ exception text
  messy-error  any other non-zero exit below 128: no message, many lines,
               unprintable bytes, 'std::...', 'terminate called', bad_alloc
  crash        killed by a signal (or an exit code >= 128)
  hang         still running at the case's time limit (killed)
  lost-file    a file that existed before the run was destroyed or replaced
               (an input, a checkpoint, a fixture), a checkpoint left invalid,
               or /dev/null no longer the null device

A non-zero exit where success was expected is marked '!' (and counted as
'unexpected' in the summary); 'late' marks an error found only after
training steps had run (the program trained, then refused an output path).

Safety:
  * every run has its own folder under --workdir as working directory, an
    address-space limit of 8 GiB (RLIMIT_AS), no core files, a time limit;
  * a case that names /dev/null as an output runs in a private mount
    namespace (unshare -m) whose /dev is a fresh tmpfs, so the machine's
    /dev/null can't be replaced; where unshare is not allowed, it runs
    directly and /dev/null is checked after every case and restored
    (rm -f /dev/null; mknod -m 666 /dev/null c 1 3) if a run replaced it;
  * '/' is listed before and after every case: a file a run left there (e.g.
    /layer0_head0.txt from --out '') is removed and recorded;
  * the fixtures are hashed after every case and restored if a run changed
    them.

The results go to stdout (one line per case, then the summary) and to
WORKDIR/results.json. The exit status is 0 whatever the outcomes (a survey,
not a test); 2 for a bad command line of the script itself.
"""

import argparse
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

PROGRAMS = ["train_tasks", "decode", "attention_map", "char_lm", "g2p", "addition", "vision", "xg_export"]
OUTCOMES = ["ok", "clear-error", "silent-ok", "messy-error", "crash", "hang", "lost-file", "skipped"]
TRAINERS = ["train_tasks", "addition", "char_lm", "g2p"]  # training programs (char_lm/g2p: `train`)
SUB = {"char_lm": ["train"], "g2p": ["train"]}  # the subcommand of the trainers
MEM_LIMIT = 8 << 30
MARKER = ".xgrad-probe-workdir"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

HUGE = "1" + "0" * 40
TWO63 = str(2**63)
BAD_INT = ["-1", HUGE, "1e30", "nan", "", "abc", TWO63, "1.5", "inf", "0x10"]
BAD_REAL = ["-1", HUGE, "1e30", "nan", "inf", "", "abc", TWO63, "1e309", "0x10"]

try:
    CORES = len(os.sched_getaffinity(0))
except AttributeError:  # pragma: no cover
    CORES = os.cpu_count() or 1
IS_ROOT = os.geteuid() == 0


# ---------------------------------------------------------------------------
# The tables


class Case:
    def __init__(self, prog, argv, expect, name, **kw):
        assert expect in ("fail", "succeed", "either"), expect
        self.prog = prog          # the binary
        self.argv = argv          # arguments: str (with @FX / @CASE placeholders) or bytes
        self.expect = expect
        self.name = name          # a short slug
        self.setup = kw.get("setup", [])      # actions run in the case folder before the run
        self.checks = kw.get("checks", [])    # post-checks
        self.stdin = kw.get("stdin")          # None, ("file", path) or ("bytes", b"...")
        self.timeout = kw.get("timeout", 30)
        self.devnull = kw.get("devnull", False)    # run in the /dev sandbox
        self.exclusive = kw.get("exclusive", False)  # may write into '/': never in parallel
        self.why = kw.get("why", "")
        self.shown = kw.get("shown")  # the arguments shown ("..." for the program's base options)
        self.tag = kw.get("tag", False)  # show the name in the line (the command does not tell the case)
        self.id = 0

    def key(self):
        return (self.prog, tuple(a if isinstance(a, str) else a.decode("latin-1") for a in self.argv),
                repr(self.stdin), repr(self.setup))


def opt_list(pairs):
    out = []
    for k, v in pairs:
        out.append(k)
        if v is not None:
            out.append(v)
    return out


def with_opts(base, changes, drop=()):
    """base: list of (option, value or None); changes replace or append."""
    res = [(k, v) for k, v in base if k not in drop]
    for k, v in changes:
        for i, (k0, _) in enumerate(res):
            if k0 == k:
                res[i] = (k, v)
                break
        else:
            res.append((k, v))
    return res


TINY = [("--layers", "1"), ("--d-model", "8"), ("--heads", "1"), ("--d-ff", "8"), ("--threads", "1")]

# The base command line of each program (sub, options, positionals): tiny and quick.
BASE = {
    "train_tasks": ([], [("--steps", "2"), ("--eval-every", "1"), ("--log-every", "1")] + TINY +
                    [("--eval-size", "10"), ("--no-samples", None)], []),
    "addition": ([], [("--steps", "2"), ("--warmup", "1"), ("--eval-every", "1"), ("--log-every", "1")] + TINY +
                 [("--batch", "8")], []),
    "char_lm": (["train"], [("--data", "@FX/fortunes"), ("--steps", "2"), ("--warmup", "1"), ("--eval-every", "1"),
                            ("--log-every", "1")] + TINY +
                [("--context", "16"), ("--batch", "4"), ("--no-samples", None)], []),
    "g2p": (["train"], [("--dict", "@FX/dict.out"), ("--steps", "2"), ("--warmup", "1"), ("--eval-every", "1"),
                        ("--log-every", "1")] + TINY +
            [("--batch", "16"), ("--time-limit", "0"), ("--precision", "f32"), ("--eval-words", "20"),
             ("--beam", "1")], []),
    "char_lm sample": (["sample"], [("--checkpoint", "@FX/lm.st"), ("--chars", "20")], []),
    "g2p pronounce": (["pronounce"], [("--checkpoint", "@FX/g2p.st"), ("--beam", "1")], ["hello", "world"]),
    "g2p attention": (["attention"], [("--checkpoint", "@FX/g2p.st"), ("--input", "hello"), ("--out", "@CASE/out")],
                      []),
    "decode": ([], [("--checkpoint", "@FX/copy.st")], ["3 4 5"]),
    "attention_map": ([], [("--checkpoint", "@FX/copy.st"), ("--input", "3 4 5"), ("--out", "@CASE/out")], []),
    # vision: Debian's Fashion-MNIST (its default --data), a tiny CNN on 256 images
    "vision": (["train"], [("--model", "cnn"), ("--hidden", "8"), ("--train-images", "256"), ("--eval-images", "20"),
                           ("--batch", "16"), ("--steps", "2"), ("--warmup", "1"), ("--eval-every", "1"),
                           ("--log-every", "1"), ("--threads", "1")], []),
    "vision evaluate": (["evaluate"], [("--checkpoint", "@FX/cnn.st"), ("--threads", "1")], []),
    "vision predict": (["predict"], [("--checkpoint", "@FX/cnn.st"), ("--count", "3"), ("--threads", "1")], []),
    "vision picture": (["picture"], [("--checkpoint", "@FX/cnn.st"), ("--out", "@CASE/out"), ("--threads", "1")], []),
    # xg_export CHECKPOINT OUTDIR
    "xg_export": ([], [], ["@FX/copy.st", "@CASE/onnx"]),
}
NEEDS_OUT = {"g2p attention", "attention_map", "vision picture"}  # the base needs @CASE/out to exist

# The fixture checkpoints: --schedule constant keeps --steps out of the identity, so
# a resume may run more steps.
FIX_TRAIN = {
    "train_tasks": (BASE["train_tasks"][0], with_opts(BASE["train_tasks"][1], [("--schedule", "constant"),
                                                                            ("--lr", "0.001")])),
    "addition": (BASE["addition"][0], with_opts(BASE["addition"][1], [("--schedule", "constant")], drop=["--warmup"])),
    "char_lm": (BASE["char_lm"][0], with_opts(BASE["char_lm"][1], [("--schedule", "constant")], drop=["--warmup"])),
    "g2p": (BASE["g2p"][0], with_opts(BASE["g2p"][1], [("--schedule", "constant"), ("--average", "0")],
                                      drop=["--warmup"])),
    "vision": (BASE["vision"][0], with_opts(BASE["vision"][1], [("--schedule", "constant")], drop=["--warmup"])),
}
FIX_CKPT = {"train_tasks": "copy.st", "addition": "add.st", "char_lm": "lm.st", "g2p": "g2p.st", "vision": "cnn.st"}
FIXTURE_RUNS = [  # (file, program, sub, options)
    ("copy.st",) + ("train_tasks",) + FIX_TRAIN["train_tasks"],
    ("copy_rnn.st", "train_tasks", [], with_opts(FIX_TRAIN["train_tasks"][1],
                                                 [("--model", "rnn"), ("--embed", "8"), ("--hidden", "8")])),
    ("add.st",) + ("addition",) + FIX_TRAIN["addition"],
    ("lm.st",) + ("char_lm",) + FIX_TRAIN["char_lm"],
    ("g2p.st",) + ("g2p",) + FIX_TRAIN["g2p"],
    ("g2p_rnn.st", "g2p", ["train"], with_opts(FIX_TRAIN["g2p"][1],
                                               [("--model", "rnn"), ("--embed", "8"), ("--hidden", "8")])),
    ("cnn.st",) + ("vision",) + FIX_TRAIN["vision"],
]


def label_prog(label):
    return label.split()[0]


def make(label, changes=(), positional=None, expect="succeed", name="", drop=(), **kw):
    sub, base, pos = BASE[label]
    pos = pos if positional is None else positional
    argv = list(sub) + opt_list(with_opts(base, list(changes), drop)) + list(pos)
    kw["shown"] = list(sub) + ["..."] + opt_list(changes) + (list(positional) if positional is not None else [])
    if label in NEEDS_OUT:
        kw.setdefault("setup", [])
        kw["setup"] = [("mkdir", "out")] + list(kw["setup"])
    return Case(label_prog(label), argv, expect, name or label, **kw)


def resume_argv(prog, ckpt, changes=()):
    sub, opts = FIX_TRAIN[prog]
    opts = with_opts(opts, [("--steps", "4"), ("--checkpoint", ckpt), ("--resume", None)] + list(changes))
    return list(sub) + opt_list(opts)


def resume_case(prog, ckpt, expect, name, changes=(), extra=(), **kw):
    """A resume of the fixture run (FIX_TRAIN: --schedule constant, --steps 4 unless changed)."""
    argv = resume_argv(prog, ckpt, changes) + list(extra)
    shown = list(FIX_TRAIN[prog][0]) + ["...fixture-run", "--steps", dict(changes).get("--steps", "4"),
                                        "--checkpoint", ckpt, "--resume"] + \
        opt_list([c for c in changes if c[0] != "--steps"]) + list(extra)
    return Case(prog, argv, expect, name, shown=shown, **kw)


# Numeric options: (option, kind, lo, hi, extra options the option needs).
I, R = "int", "real"
SHARED = [  # train/cli.h: every trainer has them; each is swept in one "owner" trainer, in turn
    ("--layers", I, 1, 64), ("--d-model", I, 1, 8192), ("--heads", I, 1, 256), ("--d-ff", I, 1, 65536),
    ("--dropout", R, 0, 0.99), ("--steps", I, 1, 10**9), ("--time-limit", R, 0, 1e9), ("--lr", R, 0, 1e30),
    ("--warmup", I, 0, 10**9), ("--beta1", R, 0, 0.999999), ("--beta2", R, 0, 0.999999), ("--eps", R, 0, 1),
    ("--weight-decay", R, 0, 10), ("--clip", R, 0, 1e6), ("--seed", I, 0, 2**62 - 1), ("--average", R, 0, 0.99),
    ("--threads", I, 1, CORES), ("--eval-every", I, 1, 10**9), ("--log-every", I, 1, 10**9),
    ("--checkpoint-every", I, 0, 10**9),
]
RNN = [("--model", "rnn"), ("--embed", "8"), ("--hidden", "8")]
SPECIFIC = {
    "train_tasks": [("--vocab", I, 4, 65536), ("--min-len", I, 1, 1024), ("--max-len", I, 1, 1024),
                    ("--embed", I, 1, 8192, RNN), ("--hidden", I, 1, 8192, RNN), ("--batch", I, 1, 65536),
                    ("--smoothing", R, 0, 0.999), ("--eval-size", I, 1, 10**6), ("--target", R, 0, 1)],
    "addition": [("--digits", I, 1, 9), ("--batch", I, 1, 65536), ("--target", R, 0, 1)],
    "char_lm": [("--context", I, 2, 1024), ("--batch", I, 1, 65536), ("--eval-chars", I, 0, 2**30),
                ("--train-chars", I, 0, 2**30)],
    "g2p": [("--embed", I, 1, 8192, RNN), ("--hidden", I, 1, 8192, RNN), ("--batch", I, 1, 65536),
            ("--smoothing", R, 0, 0.999), ("--eval-words", I, 0, 2**20), ("--beam", I, 1, 64),
            ("--max-words", I, 0, 2**20)],
    "char_lm sample": [("--chars", I, 1, 10**6), ("--temperature", R, 0, 100), ("--top-k", I, 0, 256),
                       ("--top-p", R, 1e-6, 1), ("--seed", I, 0, 2**62 - 1), ("--threads", I, 1, CORES)],
    "g2p pronounce": [("--beam", I, 1, 64), ("--threads", I, 1, CORES)],
    "decode": [("--beam", I, 1, 64), ("--alpha", R, 0, 10), ("--max-len", I, 0, 2**20), ("--threads", I, 1, CORES)],
}
WORDS = {  # word options: (option, valid alternative values, extra options they need)
    "train_tasks": [("--task", ["reverse"]), ("--model", ["rnn"]), ("--cell", ["gru"], RNN),
                    ("--attention", ["general"], RNN), ("--schedule", ["warmup_linear"], [("--warmup", "1")]),
                    ("--precision", ["bf16"])],
    "addition": [("--schedule", ["noam"]), ("--precision", [])],
    "char_lm": [("--schedule", ["constant"]), ("--precision", [])],
    "g2p": [("--model", ["rnn"]), ("--cell", ["gru"], RNN), ("--attention", ["concat"], RNN),
            ("--batches", ["random"]), ("--stress", ["keep"]), ("--schedule", ["noam"]),
            ("--precision", [])],
}
FLAGS = {
    "train_tasks": ["--pre-norm", "--detect-anomaly", "--no-samples", "--resume"],
    "addition": ["--detect-anomaly", "--resume"],
    "char_lm": ["--detect-anomaly", "--no-samples", "--resume"],
    "g2p": ["--detect-anomaly", "--resume"],
}
FLAG_VALUES = ["=1e30", "=2", "=yes", "=" + TWO63, "=2^63", "=0", "=abc"]


def in_range(kind, lo, hi, s):
    if kind == I:
        if not re.fullmatch(r"[0-9]+", s):
            return False
        return lo <= int(s) <= hi
    if s == "" or re.search(r"[xXnN]", s):
        return False
    try:
        x = float(s)
    except ValueError:
        return False
    return math.isfinite(x) and lo <= x <= hi


def numeric_cases():
    cases, k = [], 0
    owners = {}
    for i, spec in enumerate(SHARED):
        owners[spec[0]] = TRAINERS[i % len(TRAINERS)]
    rows = []  # (label, spec, shared?)
    for label in ["train_tasks", "addition", "char_lm", "g2p"]:
        for spec in SHARED:
            if owners[spec[0]] == label:
                rows.append((label, spec, True))
        for spec in SPECIFIC[label]:
            rows.append((label, spec, False))
    for label in ["char_lm sample", "g2p pronounce", "decode"]:
        for spec in SPECIFIC[label]:
            rows.append((label, spec, False))
    for label, spec, shared in rows:
        opt, kind, lo, hi = spec[:4]
        extra = list(spec[4]) if len(spec) > 4 else []
        bad = BAD_INT if kind == I else BAD_REAL
        picks = 1
        values = ["0"]
        for _ in range(picks):
            values.append(bad[k % len(bad)])
            k += 1
        for v in values:
            expect = "succeed" if in_range(kind, lo, hi, v) else "fail"
            why = f"range [{lo}..{hi}]"
            if opt == "--lr" and expect == "succeed" and float(v) > 10:
                expect, why = "either", "lr in range; the loss may go non-finite (a documented stop, exit 1)"
            cases.append(make(label, extra + [(opt, v)], expect=expect, name=f"{opt}={v!r}", why=why,
                              checks=[("nan",)]))
    # --lr 0 and --eps 0 (the issue) in every trainer
    for label in TRAINERS:
        for opt in ("--lr", "--eps"):
            cases.append(make(label, [(opt, "0"), ("--steps", "3")], expect="succeed", name=f"{opt}=0",
                              why="in range", checks=[("nan",)]))
    return cases


def word_cases():
    cases, k = [], 0
    for label, specs in WORDS.items():
        for spec in specs:
            opt, valid = spec[0], spec[1]
            extra = list(spec[2]) if len(spec) > 2 else []
            bad = ["", "abc", (valid or ["f32"])[0].upper()][k % 3]
            k += 1
            cases.append(make(label, extra + [(opt, bad)], expect="fail", name=f"{opt}={bad!r}"))
            for v in valid:
                expect = "either" if v == "bf16" else "succeed"
                cases.append(make(label, extra + [(opt, v)], expect=expect, name=f"{opt}={v}",
                                  why="bf16 needs AVX512_BF16" if v == "bf16" else "a valid value"))
    return cases


def flag_cases():
    cases, k = [], 0
    for label, flags in FLAGS.items():
        for flag in flags:
            extra = [("--checkpoint", "@CASE/r.st")] if flag == "--resume" else []
            if flag == "--resume":
                values = ["=1e30", "=" + TWO63] + ([FLAG_VALUES[2 + k % 5]] if label == "addition" else [])
                if label == "addition":
                    values.append("=2^63")
            else:
                values = [FLAG_VALUES[k % len(FLAG_VALUES)]]
            k += 1
            for v in values:
                expect = "either" if v in ("=yes", "=0") else "fail"
                checks = [("grep", r"no checkpoint at|resumed from", "read as --resume")] if flag == "--resume" else []
                cases.append(make(label, extra + [(flag + v, None)], expect=expect, name=f"{flag}{v}",
                                  why="a flag takes no number", checks=checks))
            if flag != "--resume" and (flag != "--detect-anomaly" or label == "train_tasks"):
                cases.append(make(label, [(flag, None)], expect="succeed", name=flag))
    return cases


# Output paths of the trainers: (kind, path, setup, expect)
def out_paths():
    ro_expect = "either" if IS_ROOT else "fail"
    return [
        ("empty", "", [], "fail"),
        ("dir", "@CASE/adir", [("mkdir", "adir")], "fail"),
        ("missing-dir", "@CASE/no/such/dir/x", [], "fail"),
        ("devnull", "/dev/null", [], "either"),
        ("file-as-dir", "@CASE/afile/x", [("write", "afile", b"a file\n")], "fail"),
        ("proc", "/proc/xgprobe/x", [], "fail"),
        ("readonly-dir", "@CASE/ro/x", [("mkdir", "ro"), ("chmod", "ro", 0o555)], ro_expect),
        ("name-too-long", "@CASE/" + "n" * 300, [], "fail"),
    ]


def out_path_cases():
    cases = []
    # every kind of bad path as --checkpoint in two trainers and as --metrics in one, in turn
    plan = []
    for i, kind in enumerate(out_paths()):
        plan += [(TRAINERS[i % 4], "--checkpoint", kind), (TRAINERS[(i + 1) % 4], "--checkpoint", kind),
                 (TRAINERS[(i + 2) % 4], "--metrics", kind)]
    for kind in ("empty", "devnull"):  # the issue's: in every trainer
        for label in TRAINERS:
            for opt in ("--checkpoint", "--metrics"):
                plan.append((label, opt, [k for k in out_paths() if k[0] == kind][0]))
    for label, opt, (kind, path, setup, expect) in sorted(plan, key=lambda p: (TRAINERS.index(p[0]), p[1])):
        if True:
            if True:
                protect = [("protect", "afile", "same")] if kind == "file-as-dir" else []
                cases.append(make(label, [(opt, path)], expect=expect, name=f"{opt} {kind}", setup=setup,
                                  checks=[("late",)] + protect, devnull=(kind == "devnull"),
                                  exclusive=(kind == "empty"), why="an output path that can't be written"))
    # the issue: the same path for --checkpoint and --metrics
    for label in TRAINERS:
        cases.append(make(label, [("--checkpoint", "@CASE/x.st"), ("--metrics", "@CASE/x.st")], expect="fail",
                          name="same path, fresh", checks=[("st_valid", "x.st")],
                          why="two outputs on one file: the checkpoint or the CSV is lost"))
    for label in ["g2p", "char_lm", "addition", "train_tasks"]:
        cases.append(resume_case(label, "@CASE/x.st", "fail", "same path, resume", extra=["--metrics", "@CASE/x.st"],
                                 setup=[("copy", "@FX/" + FIX_CKPT[label], "x.st")],
                                 checks=[("protect", "x.st", "safetensors")],
                                 why="resuming must not append a CSV to its own checkpoint"))
    # an existing non-checkpoint file as --checkpoint without --resume: overwritten (documented)
    cases.append(make("char_lm", [("--checkpoint", "@CASE/notes.txt")], expect="either", name="--checkpoint over a text file",
                      setup=[("write", "notes.txt", b"my notes\n")]))
    # the unwritable --metrics found only after the steps (the issue): more steps
    for label in TRAINERS:
        cases.append(make(label, [("--metrics", "/proc/xgprobe.csv"), ("--steps", "20"), ("--eval-every", "20")],
                          expect="fail", name="--metrics unwritable, 20 steps", checks=[("late",)],
                          why="should be refused before step 1, as --checkpoint is"))
    return cases


def data_cases():
    """char_lm --data and g2p --dict."""
    cases = []
    d = [  # (name, path, setup, expect, checks)
        ("''", "", [], "fail"),
        ("missing dir", "@CASE/nodir", [], "fail"),
        ("/dev/null", "/dev/null", [], "fail"),
        ("a file, not a dir", "@FX/binary.bin", [], "fail"),
        ("empty dir", "@CASE/c", [("mkdir", "c")], "fail"),
        ("empty corpus file", "@CASE/c", [("mkdir", "c"), ("write", "c/fortunes", b"")], "fail"),
        ("a dir as the corpus file", "@CASE/c", [("mkdir", "c"), ("mkdir", "c/fortunes")], "fail"),
        ("binary corpus", "@CASE/c", [("mkdir", "c"), ("copy", "@FX/binary.bin", "c/fortunes")], "either"),
        ("CRLF corpus", "@FX/fortunes_crlf", [], "succeed"),
        ("corpus named *.txt", "@CASE/c", [("mkdir", "c"), ("copy", "@FX/fortunes/fortunes", "c/fortunes.txt")],
         "either"),
        ("no % lines", "@CASE/c", [("mkdir", "c"), ("write", "c/fortunes", b"just one line of text\n" * 50)],
         "either"),
        ("one short fortune", "@CASE/c", [("mkdir", "c"), ("write", "c/fortunes", b"hi\n%\n")], "fail"),
    ]
    for name, path, setup, expect in d:
        cases.append(make("char_lm", [("--data", path)], expect=expect, name="--data " + name, setup=setup,
                          checks=[("header",), ("nan",)]))
    cases.append(make("char_lm", [("--train-chars", "10")], expect="fail", name="--train-chars below --context"))
    cases.append(make("char_lm", [("--eval-chars", "1")], expect="either", name="--eval-chars 1"))
    cases.append(make("char_lm", [("--context", "1024")], expect="either", name="--context 1024 (text is 14k chars)",
                      checks=[("nan",)]))
    g = [
        ("''", "", [], "fail"),
        ("a dir", "@CASE/c", [("mkdir", "c")], "fail"),
        ("missing", "@CASE/nofile", [], "fail"),
        ("/dev/null", "/dev/null", [], "fail"),
        ("binary", "@FX/binary.bin", [], "fail"),
        ("empty", "@FX/empty", [], "fail"),
        ("CRLF", "@FX/dict_crlf.out", [], "succeed"),
        ("no held-out word", "@FX/dict_noheld.out", [], "fail"),
        ("every word held out", "@FX/dict_allheld.out", [], "fail"),
        ("header line only", "@CASE/d", [("write", "d", b"MNCL\n")], "fail"),
        ("malformed line 3", "@CASE/d", [("copy_head", "@FX/dict.out", "d", 3, b'("bad" nil (((b ae d) 1))\n')],
         "fail"),
        ("non-ASCII word", "@CASE/d", [("copy_head", "@FX/dict.out", "d", 40,
                                         '("caf\u00e9" nil (((k ae) 1) ((f ey) 1)))\n'.encode())], "fail"),
    ]
    for name, path, setup, expect in g:
        cases.append(make("g2p", [("--dict", path)], expect=expect, name="--dict " + name, setup=setup,
                          checks=[("header",), ("nan",)]))
    cases.append(make("g2p", [("--max-words", "1")], expect="succeed", name="--max-words 1"))
    cases.append(make("g2p", [("--batch", "65536")], expect="either", name="--batch above the pairs"))
    for c in cases:
        c.tag = "@CASE" in " ".join(a for a in c.argv if isinstance(a, str))
    return cases


# Checkpoint corruptions: (kind, expect)
CORRUPT_ALL = ["binary", "truncated", "nan", "wrong-kind", "cfg-huge"]
CORRUPT_ROT = ["empty", "dir", "missing", "devnull", "crlf", "hdr-len-huge", "hdr-bitflip", "data-bitflip",
               "shape-huge", "''"]
CORRUPT_EXPECT = {"data-bitflip": "either"}
READERS = {  # label: (fixture checkpoint, the checkpoint of another program)
    "decode": ("copy.st", "lm.st"),
    "attention_map": ("copy.st", "g2p.st"),
    "char_lm sample": ("lm.st", "copy.st"),
    "g2p pronounce": ("g2p.st", "add.st"),
    "g2p attention": ("g2p.st", "copy.st"),
}


def ckpt_setup(kind, fixture, other):
    """The --checkpoint value and the setup of one corruption."""
    if kind == "missing":
        return "@CASE/missing.st", []
    if kind == "devnull":
        return "/dev/null", []
    if kind == "''":
        return "", []
    if kind == "dir":
        return "@CASE/ck.st", [("mkdir", "ck.st")]
    if kind == "empty":
        return "@CASE/ck.st", [("write", "ck.st", b"")]
    if kind == "binary":
        return "@CASE/ck.st", [("copy", "@FX/binary.bin", "ck.st")]
    if kind == "crlf":
        return "@CASE/ck.st", [("copy", "@FX/crlf.txt", "ck.st")]
    if kind == "wrong-kind":
        return "@CASE/ck.st", [("copy", "@FX/" + other, "ck.st")]
    return "@CASE/ck.st", [("corrupt", "@FX/" + fixture, "ck.st", kind)]


def reader_cases():
    cases, k = [], 0
    for label, (fixture, other) in READERS.items():
        kinds = list(CORRUPT_ALL)
        for _ in range(3):
            kinds.append(CORRUPT_ROT[k % len(CORRUPT_ROT)])
            k += 1
        for kind in kinds:
            path, setup = ckpt_setup(kind, fixture, other)
            checks = [("nan",)]
            if setup and kind != "dir":
                checks.append(("protect", "ck.st", "same"))
            cases.append(make(label, [("--checkpoint", path)], expect=CORRUPT_EXPECT.get(kind, "fail"),
                              name=f"--checkpoint {kind}", setup=setup, checks=checks, devnull=(kind == "devnull"),
                              timeout=60))
    for c in cases:
        c.tag = True
    # the recurrent models' checkpoints (should work)
    cases.append(make("attention_map", [("--checkpoint", "@FX/copy_rnn.st")], name="rnn checkpoint"))
    cases.append(make("decode", [("--checkpoint", "@FX/copy_rnn.st")], name="rnn checkpoint"))
    cases.append(make("g2p pronounce", [("--checkpoint", "@FX/g2p_rnn.st")], name="rnn checkpoint"))
    cases.append(make("g2p attention", [("--checkpoint", "@FX/g2p_rnn.st")], name="rnn checkpoint"))
    return cases


def resume_cases():
    cases = []
    for label in TRAINERS:
        fixture = FIX_CKPT[label]
        other = {"train_tasks": "add.st", "addition": "copy.st", "char_lm": "g2p.st", "g2p": "lm.st"}[label]
        cases.append(resume_case(label, "@CASE/ck.st", "succeed", "resume ok",
                                 setup=[("copy", "@FX/" + fixture, "ck.st")],
                                 checks=[("protect", "ck.st", "safetensors"), ("nan",)]))
        for kind in ["nan", "data-bitflip", "truncated", "wrong-kind"]:
            _, setup = ckpt_setup(kind, fixture, other)
            checks = [("nan",)]
            if kind in ("truncated", "wrong-kind", "binary"):
                checks.append(("protect", "ck.st", "same"))
            cases.append(resume_case(label, "@CASE/ck.st", CORRUPT_EXPECT.get(kind, "fail"), f"resume {kind}",
                                     setup=setup, checks=checks))
    # the issue: a NaN tensor or a flipped bit, then the resume of the finished run (only the final evaluation)
    for kind in ("nan", "data-bitflip"):
        cases.append(resume_case("char_lm", "@CASE/ck.st", CORRUPT_EXPECT.get(kind, "fail"),
                                 f"resume {kind}, finished run", changes=[("--steps", "2")],
                                 setup=[("corrupt", "@FX/lm.st", "ck.st", kind)], checks=[("nan",)]))
    cases.append(resume_case("char_lm", "@CASE/ck.st", "fail", "resume, another model",
                             changes=[("--d-model", "16"), ("--heads", "2")], setup=[("copy", "@FX/lm.st", "ck.st")],
                             checks=[("protect", "ck.st", "same")]))
    cases.append(resume_case("train_tasks", "@CASE/none.st", "succeed", "resume, nothing to resume"))
    cases.append(make("addition", [("--resume", None)], expect="fail", name="--resume without --checkpoint"))
    cases.append(resume_case("g2p", "@CASE/ck.st", "either", "resume a finished run", changes=[("--steps", "2")],
                             setup=[("copy", "@FX/g2p.st", "ck.st")], checks=[("nan",)]))
    for c in cases:
        c.tag = True
    return cases


def misc_cases():
    cases = []
    # --help, unknown options, extra words, missing subcommands
    for prog in PROGRAMS:
        cases.append(Case(prog, ["--help"], "succeed", "--help"))
    for label in BASE:
        cases.append(make(label, [("--bogus", None)], expect="fail", name="unknown option"))
    cases.append(Case("char_lm", [], "fail", "no subcommand"))
    cases.append(Case("g2p", [], "fail", "no subcommand"))
    cases.append(Case("g2p", ["evaluate"], "fail", "unknown subcommand"))
    cases.append(Case("decode", ["3 4 5"], "fail", "no --checkpoint"))
    cases.append(Case("attention_map", [], "fail", "no arguments"))
    cases.append(make("train_tasks", positional=["extra"], expect="fail", name="a stray word"))
    cases.append(make("addition", [("--d-model", "30"), ("--heads", "4")], expect="fail", name="heads don't divide"))
    cases.append(make("train_tasks", [("--min-len", "5"), ("--max-len", "3")], expect="fail", name="min-len > max-len"))
    cases.append(make("char_lm", [("--warmup", "5")], expect="fail", name="--warmup >= --steps"))
    cases.append(make("char_lm", [("--threads", str(CORES + 1))], expect="fail", name="--threads above the cores"))
    cases.append(make("addition", [("--checkpoint", "@CASE/a.st"), ("--checkpoint-every", "1")],
                      name="--checkpoint-every 1", checks=[("st_valid", "a.st")]))
    cases.append(make("train_tasks", [("--checkpoint", "@CASE/" + "d" * 200 + "/x.st")], expect="fail",
                      name="--checkpoint in a missing long dir"))
    cases.append(make("addition", [("--lr", "1e30")], expect="either", name="--lr 1e30 (documented stop)"))
    cases.append(make("char_lm", [("--checkpoint", "@CASE/dir with space/ck.st")], name="a path with a space",
                      setup=[("mkdir", "dir with space")], checks=[("st_valid", "dir with space/ck.st")]))
    # too large for memory (the issue): must be refused, not allocated (8 GiB address-space limit)
    big = [("--layers", "64"), ("--d-model", "8192"), ("--heads", "256"), ("--d-ff", "65536")]
    for label in TRAINERS:
        cases.append(make(label, big, expect="fail", name="huge model", timeout=90))
    cases.append(make("g2p", RNN[:1] + [("--layers", "64"), ("--embed", "8192"), ("--hidden", "8192")],
                      expect="fail", name="huge rnn", timeout=90))
    cases.append(make("train_tasks", [("--vocab", "65536"), ("--d-model", "8192"), ("--d-ff", "65536")],
                      expect="either", name="2.3e9 params (refused by the RAM check?)", timeout=90))
    cases.append(make("addition", [("--layers", "2"), ("--d-model", "4096"), ("--d-ff", "8192")], expect="either",
                      name="6.7e8 params: passes the RAM check, not the 8 GiB limit", timeout=90))
    # decode inputs
    cases += [
        make("decode", positional=["abc"], expect="fail", name="input abc"),
        make("decode", positional=["3 99 5"], expect="fail", name="token above vocab"),
        make("decode", positional=["0 1 2"], expect="fail", name="special tokens"),
        make("decode", positional=[TWO63], expect="fail", name="token 2^63"),
        make("decode", positional=[""], expect="either", name="empty input"),
        make("decode", positional=[" ".join(["3"] * 3000)], expect="either", name="3000 tokens", timeout=60),
        make("decode", [("--max-len", str(2**20))], expect="succeed", name="--max-len 2^20", timeout=60),
        make("decode", positional=[], stdin=("bytes", b"3 4 5\r\n6 7\r\n"), expect="succeed", name="stdin CRLF"),
        make("decode", positional=[], stdin=("file", "@FX/binary.bin"), expect="fail", name="stdin binary"),
        make("decode", positional=[], stdin=("bytes", b""), expect="succeed", name="stdin empty"),
        make("decode", [("--beam", "64")], expect="succeed", name="--beam 64"),
    ]
    # attention_map
    cases += [
        make("attention_map", [("--input", "")], expect="fail", name="--input ''"),
        make("attention_map", [("--input", "abc")], expect="fail", name="--input abc"),
        make("attention_map", [("--input", "3 99")], expect="fail", name="--input token above vocab"),
        make("attention_map", [("--out", "")], expect="fail", name="--out ''", exclusive=True),
        make("attention_map", [("--out", "@CASE/missing")], expect="fail", name="--out missing dir"),
        make("attention_map", [("--out", "@CASE/afile")], expect="fail", name="--out a file",
             setup=[("write", "afile", b"keep me\n")], checks=[("protect", "afile", "same")]),
        make("attention_map", [("--out", "/dev/null")], expect="fail", name="--out /dev/null", devnull=True),
        make("attention_map", [("--out", "/proc")], expect="fail", name="--out /proc"),
        make("attention_map", [("--g2p", "@FX/g2p.st")], expect="fail", name="--g2p (moved)"),
        make("attention_map", [], name="baseline", checks=[("exists", "out/layer0_head0.txt")]),
    ]
    # g2p attention
    cases += [
        make("g2p attention", [("--input", "")], expect="fail", name="--input ''"),
        make("g2p attention", [("--input", "d0g")], expect="fail", name="--input d0g"),
        make("g2p attention", [("--input", b"\x80\xff\xfe")], expect="fail", name="--input invalid UTF-8"),
        make("g2p attention", [("--input", "a" * 300)], expect="fail", name="--input 300 letters"),
        make("g2p attention", [("--input", "HELLO")], expect="either", name="--input upper case"),
        make("g2p attention", [("--out", "")], expect="fail", name="--out ''", exclusive=True),
        make("g2p attention", [("--out", "@CASE/missing")], expect="fail", name="--out missing dir"),
        make("g2p attention", [("--out", "/dev/null")], expect="fail", name="--out /dev/null", devnull=True),
        make("g2p attention", [], name="baseline", checks=[("exists", "out/layer0_head0.txt")]),
    ]
    # g2p pronounce
    cases += [
        make("g2p pronounce", positional=[], stdin=("file", "@FX/binary.bin"), expect="fail", name="stdin binary"),
        make("g2p pronounce", positional=[], stdin=("bytes", b"hello\r\nworld\r\n"), expect="succeed",
             name="stdin CRLF"),
        make("g2p pronounce", positional=[], stdin=("bytes", b""), expect="succeed", name="stdin empty"),
        make("g2p pronounce", positional=["d0g"], expect="fail", name="d0g"),
        make("g2p pronounce", positional=[""], expect="either", name="empty word"),
        make("g2p pronounce", positional=["a" * 300], expect="fail", name="300 letters"),
        make("g2p pronounce", positional=[b"caf\xc3\xa9"], expect="fail", name="non-ASCII word"),
    ]
    # char_lm sample
    cases += [
        make("char_lm sample", [("--prompt", "")], expect="succeed", name="--prompt ''"),
        make("char_lm sample", [("--prompt", "\x01\x02")], expect="either", name="--prompt control chars"),
        make("char_lm sample", [("--prompt", "caf\u00e9 \u2603")], expect="either", name="--prompt non-ASCII"),
        make("char_lm sample", [("--prompt", "the " * 1000)], expect="either", name="--prompt 4000 chars"),
        make("char_lm sample", [("--temperature", "100"), ("--top-k", "1")], expect="succeed", name="temp 100 top-k 1"),
    ]
    return cases


def vision_cases():
    """vision: its own options, its data folder, its checkpoint readers."""
    cases = []
    tiny_vit = [("--model", "vit"), ("--patch", "7"), ("--layers", "1"), ("--d-model", "8"), ("--heads", "2"),
                ("--d-ff", "8")]
    tiny_resnet = [("--model", "resnet"), ("--depth", "8"), ("--width", "2")]
    numeric = [  # (option, kind, lo, hi, the options it needs, a bad value)
        ("--depth", I, 8, 1202, tiny_resnet, "9"), ("--width", I, 1, 1024, tiny_resnet, HUGE),
        ("--patch", I, 1, 28, tiny_vit, "5"), ("--hidden", I, 1, 8192, [], "-1"),
        ("--batch", I, 1, 65536, [], "1e30"), ("--eval-images", I, 0, 10000, [], "nan"),
        ("--train-images", I, 0, 60000, [], TWO63), ("--erase", R, 0, 1, [], "1.5"),
        ("--smoothing", R, 0, 0.999, [], "inf"), ("--dropout", R, 0, 0.99, [], "1"),
    ]
    for opt, kind, lo, hi, extra, bad in numeric:
        for v in ("0", bad):
            expect = "succeed" if in_range(kind, lo, hi, v) else "fail"
            if opt in ("--depth", "--patch") and expect == "succeed":
                expect = "either"  # the range holds values the model refuses (6n+2 layers, a patch dividing 28)
            if opt == "--train-images" and v == "0":
                expect, why = "either", "0: all 60,000 images (slow, not wrong)"
            cases.append(make("vision", extra + [(opt, v)], expect=expect, name=f"{opt}={v!r}",
                              why=f"range [{lo}..{hi}]", checks=[("nan",)]))
    cases.append(make("vision", [("--batch", "300")], expect="fail", name="--batch above --train-images"))
    cases.append(make("vision", [("--erase", "0.5"), ("--no-augment", None)], expect="fail",
                      name="--erase without augmentation"))
    cases.append(make("vision", tiny_vit + [("--heads", "3")], expect="fail", name="vit heads don't divide"))
    for v in ("", "abc", "RESNET", "mlp"):
        cases.append(make("vision", [("--model", v)], expect="fail", name=f"--model={v!r}"))
    cases.append(make("vision", tiny_vit, name="--model vit"))
    cases.append(make("vision", tiny_resnet + [("--sync-bn", None)], name="--model resnet --sync-bn"))
    cases.append(make("vision", [("--precision", "bf16")], expect="either", name="--precision bf16",
                      why="bf16 needs AVX512_BF16"))
    for name, path, setup in (("''", "", []), ("missing dir", "@CASE/nodir", []), ("/dev/null", "/dev/null", []),
                              ("a file", "@FX/binary.bin", []), ("empty dir", "@CASE/d", [("mkdir", "d")]),
                              ("binary images", "@CASE/d", [("mkdir", "d"),
                                                            ("copy", "@FX/binary.bin", "d/train-images-idx3-ubyte"),
                                                            ("copy", "@FX/binary.bin", "d/train-labels-idx1-ubyte"),
                                                            ("copy", "@FX/binary.bin", "d/t10k-images-idx3-ubyte"),
                                                            ("copy", "@FX/binary.bin", "d/t10k-labels-idx1-ubyte")])):
        for label in ("vision", "vision evaluate"):
            cases.append(make(label, [("--data", path)], expect="fail", name="--data " + name, setup=setup,
                              tag=True))
    for opt in ("--checkpoint", "--metrics"):
        for kind, path, setup, expect in out_paths():
            if kind in ("empty", "dir", "devnull", "missing-dir", "proc"):
                cases.append(make("vision", [(opt, path)], expect=expect, name=f"{opt} {kind}", setup=setup,
                                  checks=[("late",)], devnull=(kind == "devnull"), exclusive=(kind == "empty"),
                                  why="an output path that can't be written"))
    cases.append(resume_case("vision", "@CASE/ck.st", "succeed", "resume ok", setup=[("copy", "@FX/cnn.st", "ck.st")],
                             checks=[("protect", "ck.st", "safetensors"), ("nan",)], tag=True))
    cases.append(resume_case("vision", "@CASE/ck.st", "fail", "resume, another model", changes=[("--hidden", "9")],
                             setup=[("copy", "@FX/cnn.st", "ck.st")], checks=[("protect", "ck.st", "same")], tag=True))
    for label in ("vision evaluate", "vision predict", "vision picture"):
        for kind in CORRUPT_ALL + ["empty", "missing", "''", "hdr-bitflip"]:
            path, setup = ckpt_setup(kind, "cnn.st", "copy.st")
            checks = [("nan",)] + ([("protect", "ck.st", "same")] if setup else [])
            cases.append(make(label, [("--checkpoint", path)], expect=CORRUPT_EXPECT.get(kind, "fail"),
                              name=f"--checkpoint {kind}", setup=setup, checks=checks, tag=True, timeout=60))
        cases.append(make(label, [], name="baseline"))
    cases += [
        make("vision predict", [("--first", "9999"), ("--count", "10")], expect="either",
             name="--first 9999 --count 10 (past the end)"),
        make("vision predict", [("--first", "-1")], expect="fail", name="--first -1"),
        make("vision predict", [("--count", "0")], expect="fail", name="--count 0"),
        make("vision predict", [("--count", HUGE)], expect="fail", name="--count huge"),
        make("vision picture", [("--out", "")], expect="fail", name="--out ''", exclusive=True),
        make("vision picture", [("--out", "@CASE/missing")], expect="fail", name="--out missing dir"),
        make("vision picture", [("--out", "/dev/null")], expect="fail", name="--out /dev/null", devnull=True),
        make("vision picture", [("--out", "@CASE/afile")], expect="fail", name="--out a file",
             setup=[("write", "afile", b"keep me\n")], checks=[("protect", "afile", "same")]),
        Case("vision", [], "fail", "no subcommand"),
        Case("vision", ["--help"], "succeed", "--help"),
        make("vision", [("--bogus", None)], expect="fail", name="unknown option"),
        Case("vision", ["evaluate"], "fail", "evaluate without --checkpoint"),
    ]
    return cases


def xg_export_cases():
    """xg_export CHECKPOINT OUTDIR: every family's fixture, bad checkpoints, bad folders."""
    cases = []
    for fixture in ("copy.st", "copy_rnn.st", "g2p.st", "g2p_rnn.st", "lm.st", "cnn.st"):
        cases.append(make("xg_export", positional=["@FX/" + fixture, "@CASE/onnx"], name=f"export {fixture}",
                          checks=[("exists", "onnx/manifest.json")], tag=True))
    cases.append(make("xg_export", positional=["@FX/add.st", "@CASE/onnx"], expect="either",
                      name="export addition's checkpoint", tag=True,
                      why="a Transformer of the copy task's kind, or refused by kind"))
    for kind in CORRUPT_ALL + ["empty", "missing", "dir", "devnull", "''", "hdr-len-huge", "shape-huge"]:
        path, setup = ckpt_setup(kind, "copy.st", "binary.bin")
        if kind == "wrong-kind":
            path, setup = "@CASE/ck.st", [("copy", "@FX/crlf.txt", "ck.st")]
        checks = [("protect", "ck.st", "same")] if setup and kind != "dir" else []
        cases.append(make("xg_export", positional=[path, "@CASE/onnx"], expect=CORRUPT_EXPECT.get(kind, "fail"),
                          name=f"checkpoint {kind}", setup=setup, checks=checks, devnull=(kind == "devnull"),
                          tag=True))
    for name, path, setup, expect in (
            ("''", "", [], "fail"), ("/", "/", [], "either"), ("an existing file", "@CASE/afile",
                                                                [("write", "afile", b"keep me\n")], "fail"),
            ("/dev/null", "/dev/null", [], "fail"), ("/proc/x", "/proc/xgprobe", [], "fail"),
            ("missing parent", "@CASE/no/such/dir", [], "fail"),
            ("read-only parent", "@CASE/ro/onnx", [("mkdir", "ro"), ("chmod", "ro", 0o555)],
             "either" if IS_ROOT else "fail"),
            ("an existing folder", "@CASE/d", [("mkdir", "d")], "succeed"),
            ("a name too long", "@CASE/" + "n" * 300, [], "fail"),
            ("the checkpoint's own path", "@CASE/ck.st", [("copy", "@FX/copy.st", "ck.st")], "fail")):
        checks = [("protect", "afile", "same")] if path.endswith("afile") else []
        if name == "the checkpoint's own path":
            checks = [("protect", "ck.st", "same")]
            ck = "@CASE/ck.st"
        else:
            ck = "@FX/copy.st"
        cases.append(make("xg_export", positional=[ck, path], expect=expect, name=f"OUTDIR {name}", setup=setup,
                          checks=checks, devnull=(path == "/dev/null"), exclusive=(path in ("", "/")), tag=True))
    cases += [
        Case("xg_export", [], "fail", "no arguments"),
        Case("xg_export", ["--help"], "succeed", "--help"),
        make("xg_export", positional=["@FX/copy.st"], expect="fail", name="no OUTDIR"),
        make("xg_export", positional=["@FX/copy.st", "@CASE/a", "@CASE/b"], expect="fail", name="a third argument"),
        make("xg_export", positional=["--bogus", "@FX/copy.st", "@CASE/onnx"], expect="fail", name="unknown option"),
    ]
    return cases


def build_cases():
    cases = (numeric_cases() + word_cases() + flag_cases() + out_path_cases() + data_cases() + reader_cases() +
             resume_cases() + misc_cases() + vision_cases() + xg_export_cases())
    seen, out = set(), []
    for c in cases:
        if c.key() in seen:
            continue
        seen.add(c.key())
        out.append(c)
    for i, c in enumerate(out, 1):
        c.id = i
    return out


# ---------------------------------------------------------------------------
# Fixtures


def fnv1a64(s):
    h = 14695981039346656037
    for c in s.encode():
        h ^= c
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


LETTER_PHONES = dict(zip("abcdefghijklmnopqrstuvwxyz",
                         "ae b k d eh f g hh ih jh k l m n aa p k r s t ah v w k y z".split()))


def dict_entry(word):
    phones = [LETTER_PHONES[c] for c in word]
    syl = [phones[i:i + 3] for i in range(0, len(phones), 3)]
    return '("%s" nil (%s))\n' % (word, " ".join("((%s) %d)" % (" ".join(s), 1 if i == 0 else 0)
                                                 for i, s in enumerate(syl)))


def make_fixtures(fx):
    os.makedirs(fx)
    r = random.Random(0)
    with open(os.path.join(fx, "binary.bin"), "wb") as f:
        f.write(bytes(r.getrandbits(8) for _ in range(4096)))
    open(os.path.join(fx, "empty"), "wb").close()
    with open(os.path.join(fx, "crlf.txt"), "wb") as f:
        f.write(b"".join(b"line %d of a text file\r\n" % i for i in range(20)))
    vocab = ("the a of and to in is it you that he was for on are with as his they be at one have this from or "
             "had by not word but what some we can out other were all there when up use your how said an each she "
             "which do their time if will way about many then them write would like so these her long make thing "
             "see him two has look more day could go come did number sound no most people my over know water than "
             "call first who may down side been now find").split()
    lines = []
    for _ in range(300):
        n = r.randint(1, 3)
        lines.append("\n".join(" ".join(r.choice(vocab) for _ in range(r.randint(3, 12))) for _ in range(n)))
    text = "\n%\n".join(lines) + "\n%\n"
    for d, t in (("fortunes", text), ("fortunes_crlf", text.replace("\n", "\r\n"))):
        os.makedirs(os.path.join(fx, d))
        with open(os.path.join(fx, d, "fortunes"), "w", newline="") as f:
            f.write(t)
    r = random.Random(1)
    words = ["hello", "world"]
    while len(words) < 400:
        w = "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 9)))
        if w not in words:
            words.append(w)
    words.sort()
    body = "".join(dict_entry(w) for w in words)
    with open(os.path.join(fx, "dict.out"), "w", newline="") as f:
        f.write("MNCL\n" + body)
    with open(os.path.join(fx, "dict_crlf.out"), "w", newline="") as f:
        f.write(("MNCL\n" + body).replace("\n", "\r\n"))
    noheld = [w for w in words if fnv1a64(w) % 10 != 0][:60]
    with open(os.path.join(fx, "dict_noheld.out"), "w") as f:
        f.write("MNCL\n" + "".join(dict_entry(w) for w in noheld))
    allheld = [w for w in words if fnv1a64(w) % 10 == 0][:15]
    with open(os.path.join(fx, "dict_allheld.out"), "w") as f:
        f.write("MNCL\n" + "".join(dict_entry(w) for w in allheld))


def read_safetensors(data):
    """(header dict, data start) or raises ValueError."""
    if len(data) < 8:
        raise ValueError("shorter than 8 bytes")
    n = struct.unpack("<Q", data[:8])[0]
    if n > len(data) - 8:
        raise ValueError(f"header length {n} beyond the file's {len(data)} bytes")
    try:
        h = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"header is not JSON: {e}") from None
    if not isinstance(h, dict):
        raise ValueError("header is not a JSON object")
    return h, 8 + n


def safetensors_problem(path):
    """None when path is a valid safetensors file, else what is wrong."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"cannot read: {e.strerror}"
    try:
        h, start = read_safetensors(data)
    except ValueError as e:
        return str(e)
    for k, v in h.items():
        if k == "__metadata__":
            continue
        try:
            b, e = v["data_offsets"]
        except (TypeError, KeyError, ValueError):
            return f"tensor {k} has no data_offsets"
        if not 0 <= b <= e <= len(data) - start:
            return f"tensor {k} beyond the file"
    return None


def corrupt(data, kind):
    h, start = read_safetensors(data)
    names = sorted(k for k, v in h.items() if k != "__metadata__" and k.startswith("model.") and
                   v.get("dtype") == "F32" and "weight" in k and v["data_offsets"][1] - v["data_offsets"][0] >= 8)
    name = names[0]
    b, e = h[name]["data_offsets"]
    out = bytearray(data)
    if kind == "truncated":
        return bytes(out[:len(out) // 2])
    if kind == "hdr-len-huge":
        out[:8] = struct.pack("<Q", 2**63)
        return bytes(out)
    if kind == "hdr-bitflip":
        i = data.index(b'"dtype"', 8 + (start - 8) // 2)
        out[i + 5] ^= 0x03  # "dtype" -> "dtypf": one bit pattern of the header
        return bytes(out)
    if kind == "data-bitflip":
        n = (e - b) // 4
        out[start + b + 4 * (n // 2) + 3] ^= 0x40  # the exponent's top bit of the middle element
        return bytes(out)
    if kind == "nan":
        for i in range(start + b, start + e, 4):
            out[i:i + 4] = struct.pack("<I", 0x7FC00000)
        return bytes(out)
    if kind in ("shape-huge", "cfg-huge"):
        if kind == "shape-huge":
            h[name]["shape"] = [2**40, 2**20]
        else:
            meta = h.setdefault("__metadata__", {})
            keys = [k for k in meta if k in ("cfg.d_model", "d_model", "cfg.hidden")]
            for k in keys or ["cfg.d_model"]:
                meta[k] = "200000000"
        hb = json.dumps(h, separators=(",", ":")).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        return struct.pack("<Q", len(hb)) + hb + bytes(data[start:])
    raise ValueError(kind)


# ---------------------------------------------------------------------------
# Running


SANDBOX_SH = r"""
report="$1"; shift
mount -t tmpfs -o mode=755,size=64m xgprobe-dev /dev || exit 97
mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && mknod -m 666 /dev/full c 1 7 &&
mknod -m 666 /dev/random c 1 8 && mknod -m 666 /dev/urandom c 1 9 || exit 97
ln -s /proc/self/fd /dev/fd; ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr; mkdir /dev/shm
"$@"
rc=$?
{ stat -c '%F %t:%T' /dev/null; ls -A /dev; } > "$report" 2>&1
exit $rc
"""
SANDBOX_DEV = {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm"}


def limits():
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def sandbox_works():
    if not shutil.which("unshare"):
        return False
    try:
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs -o size=1m xgprobe-test /dev && mknod -m 666 /dev/null c 1 3 && "
                            "echo ok > /dev/null && ls /dev"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and p.stdout.strip() == b"null"


def devnull_ok():
    try:
        st = os.lstat("/dev/null")
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


def restore_devnull():
    try:
        if os.path.isdir("/dev/null") and not os.path.islink("/dev/null"):
            shutil.rmtree("/dev/null")
        elif os.path.lexists("/dev/null"):
            os.remove("/dev/null")
    except OSError:
        pass
    os.mknod("/dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod("/dev/null", 0o666)


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_hashes(root):
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = sha(p)
    return out


def file_state(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return ("file", sha(path))
    if stat.S_ISDIR(st.st_mode):
        return ("dir", None)
    return ("other", st.st_mode)


def printable_line(s):
    return all(c.isprintable() or c == "\t" for c in s)


MESSY = re.compile(r"std::|terminate called|what\(\)|bad_alloc|Aborted|Segmentation fault|core dumped|"
                   r"libc\+\+abi|AddressSanitizer|runtime error:")
TRAINING_LINE = re.compile(r"^(step \d+|eval step|final eval)", re.M)


def stderr_verdict(err):
    """(clear?, why not)"""
    try:
        text = err.decode("utf-8")
    except UnicodeDecodeError:
        return False, "stderr is not UTF-8"
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    if not lines:
        return False, "no message on stderr"
    # A program reading lines (decode, g2p pronounce) refuses each bad one,
    # the first 20 by number, then one line counting the rest.
    per_line = all(re.match(r"^[a-z_0-9]+: line \d+: ", l) for l in lines[:-1]) and len(lines) <= 21 and (
        len(lines) < 21 or re.match(r"^[a-z_0-9]+: \d+ more lines refused", lines[-1]))
    if len(lines) > 3 and not per_line:
        return False, f"{len(lines)} stderr lines"
    for line in lines:
        if len(line) > 300:
            return False, f"a stderr line of {len(line)} chars"
        if not printable_line(line):
            return False, "unprintable characters on stderr"
    m = MESSY.search(text)
    if m:
        return False, f"'{m.group(0)}' on stderr"
    return True, ""


def show_arg(a, workdir):
    if isinstance(a, bytes):
        a = a.decode("utf-8", "backslashreplace")
    if workdir:
        a = a.replace(workdir, "$W")
    a = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in a)
    if len(a) > 40:
        a = a[:24] + f"...({len(a)} chars)"
    if a == "" or re.search(r"[\s'\"\\$]", a):
        a = "'" + a.replace("'", "'\\''") + "'"
    return a


def show_case(c, workdir=None, width=150, full=False):
    args = c.argv if full or c.shown is None else c.shown
    s = " ".join([c.prog] + [a if a == "..." and not full else show_arg(a, workdir) for a in args])
    if c.stdin:
        s += " < " + (show_arg(c.stdin[1], workdir) if c.stdin[0] == "file" else
                      "'" + c.stdin[1][:30].decode("latin-1").encode("unicode_escape").decode() + "'")
    return s if len(s) <= width else s[:width - 3] + "..."


class Runner:
    def __init__(self, bindir, workdir, timeout, sandbox):
        self.bin = bindir
        self.work = workdir
        self.fx = os.path.join(workdir, "fixtures")
        self.pristine = os.path.join(workdir, "fixtures.pristine")
        self.timeout = timeout
        self.sandbox = sandbox
        self.lock = threading.Lock()
        self.fx_hashes = {}
        self.fixture_log = []

    def expand(self, a, casedir):
        if isinstance(a, bytes):
            return a.replace(b"@FX", self.fx.encode()).replace(b"@CASE", casedir.encode())
        return a.replace("@FX", self.fx).replace("@CASE", casedir)

    def build_fixtures(self):
        make_fixtures(self.fx)
        env = self.env()
        for fname, prog, sub, opts in FIXTURE_RUNS:
            exe = os.path.join(self.bin, prog)
            argv = [exe] + list(sub) + [self.expand(a, self.fx) for a in opt_list(opts)] + \
                ["--checkpoint", os.path.join(self.fx, fname)]
            t0 = time.time()
            try:
                p = subprocess.run(argv, cwd=self.fx, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                                   env=env, preexec_fn=limits)
                rc, err = p.returncode, p.stderr.decode("utf-8", "replace").strip()
            except (OSError, subprocess.TimeoutExpired) as e:
                rc, err = None, str(e)
            problem = safetensors_problem(os.path.join(self.fx, fname))
            self.fixture_log.append({"file": fname, "argv": argv[1:], "rc": rc, "seconds": round(time.time() - t0, 2),
                                     "stderr": err[-500:], "valid": problem is None, "problem": problem})
        shutil.copytree(self.fx, self.pristine, symlinks=True)
        self.fx_hashes = tree_hashes(self.fx)

    def env(self):
        env = dict(os.environ)
        env["XG_NUM_THREADS"] = "1"
        env["OMP_NUM_THREADS"] = "1"
        env["LC_ALL"] = "C.UTF-8"
        return env

    def do_setup(self, c, casedir):
        for act in c.setup:
            op = act[0]
            if op == "mkdir":
                os.makedirs(os.path.join(casedir, act[1]), exist_ok=True)
            elif op == "write":
                with open(os.path.join(casedir, act[1]), "wb") as f:
                    f.write(act[2])
            elif op == "copy":
                shutil.copyfile(self.expand(act[1], casedir), os.path.join(casedir, act[2]))
            elif op == "copy_head":  # the first n lines of a file, then a line
                with open(self.expand(act[1], casedir), "rb") as f:
                    head = b"".join(f.readlines()[:act[3]])
                with open(os.path.join(casedir, act[2]), "wb") as f:
                    f.write(head + act[4])
            elif op == "chmod":
                os.chmod(os.path.join(casedir, act[1]), act[2])
            elif op == "corrupt":
                with open(self.expand(act[1], casedir), "rb") as f:
                    data = f.read()
                with open(os.path.join(casedir, act[2]), "wb") as f:
                    f.write(corrupt(data, act[3]))
            else:
                raise ValueError(op)

    def run(self, c):
        casedir = os.path.join(self.work, "cases", f"{c.id:03d}")
        os.makedirs(casedir)
        res = {"id": c.id, "prog": c.prog, "name": c.name, "expect": c.expect, "why": c.why,
               "argv": [show_arg(a, None) if isinstance(a, bytes) else a for a in c.argv],
               "command": show_case(c, None, width=100000, full=True), "shown": show_case(c, None, width=100000), "notes": [], "late": False, "unexpected": False}
        exe = os.path.join(self.bin, c.prog)
        if not os.access(exe, os.X_OK):
            res.update(outcome="skipped", rc=None, seconds=0.0, stdout="", stderr="")
            res["notes"].append(f"no executable {exe}")
            return res
        notes = res["notes"]
        try:
            self.do_setup(c, casedir)
        except Exception as e:  # a fixture is missing (its program failed)
            notes.append(f"setup failed: {e}")
        argv = [exe] + [self.expand(a, casedir) for a in c.argv]
        protect = {}
        for chk in c.checks:
            if chk[0] == "protect":
                p = os.path.join(casedir, chk[1])
                protect[chk[1]] = file_state(p)
        stdin_data = None
        if c.stdin:
            if c.stdin[0] == "file":
                with open(self.expand(c.stdin[1], casedir), "rb") as f:
                    stdin_data = f.read()
            else:
                stdin_data = c.stdin[1]
        report = os.path.join(casedir, ".devnull-report")
        if c.devnull and self.sandbox:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", SANDBOX_SH, "sh", report] + argv
        if not devnull_ok():
            restore_devnull()
            notes.append("/dev/null was broken before this case; restored")
        root_before = set(os.listdir("/"))
        dev_before = set(os.listdir("/dev"))
        limit = min(c.timeout, self.timeout)
        t0 = time.time()
        timed_out = False
        p = subprocess.Popen(argv, cwd=casedir, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(), preexec_fn=limits,
                             start_new_session=True)
        try:
            out, err = p.communicate(stdin_data, timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
        seconds = time.time() - t0
        rc = p.returncode
        with open(os.path.join(casedir, "stdout"), "wb") as f:
            f.write(out)
        with open(os.path.join(casedir, "stderr"), "wb") as f:
            f.write(err)
        lost = []
        # /dev/null: the sandbox's, then the machine's
        if c.devnull and self.sandbox:
            try:
                with open(report) as f:
                    rep = f.read().split("\n")
                if rep[0].strip() != "character special file 1:3":
                    lost.append(f"/dev/null replaced (in the sandbox): now '{rep[0].strip()}'")
                extra = sorted(set(x for x in rep[1:] if x) - SANDBOX_DEV)
                if extra:
                    notes.append("left in /dev (sandbox): " + " ".join(extra))
            except OSError:
                notes.append("no /dev report from the sandbox")
            if rc == 97:
                notes.append("the sandbox could not be set up")
        if not devnull_ok():
            lost.append("/dev/null was replaced; restored with mknod -m 666 /dev/null c 1 3")
            restore_devnull()
        for name in sorted(set(os.listdir("/dev")) - dev_before):
            path = os.path.join("/dev", name)
            if name.startswith("null") and os.path.isfile(path) and not os.path.islink(path):
                os.remove(path)
                notes.append(f"removed stray /dev/{name}")
        stray = sorted(set(os.listdir("/")) - root_before)
        removed = []
        for name in stray:
            path = os.path.join("/", name)
            if os.path.isfile(path) and not os.path.islink(path) and (
                    re.fullmatch(r"layer\d+_head\d+\.txt", name) or name.endswith(".tmp") or
                    re.fullmatch(r"[\w.-]*\.(st|csv|safetensors)", name)):
                os.remove(path)
                removed.append(name)
            else:
                notes.append(f"new entry in / left alone: {name}")
        if removed:
            notes.append(f"wrote {len(removed)} file(s) into / (removed): " + " ".join(removed[:5]))
        # the fixtures
        now = tree_hashes(self.fx)
        if now != self.fx_hashes:
            changed = sorted(k for k in set(now) | set(self.fx_hashes) if now.get(k) != self.fx_hashes.get(k))
            lost.append("fixture changed: " + " ".join(changed[:5]))
            shutil.rmtree(self.fx)
            shutil.copytree(self.pristine, self.fx, symlinks=True)
        # the case's checks
        for chk in c.checks:
            kind = chk[0]
            if kind == "protect":
                path = os.path.join(casedir, chk[1])
                before, mode = protect[chk[1]], chk[2]
                if before is None:
                    continue
                after = file_state(path)
                if mode == "same" and after != before:
                    lost.append(f"{chk[1]} " + ("removed" if after is None else "changed"))
                elif mode == "safetensors":
                    prob = safetensors_problem(path) if after and after[0] == "file" else "gone or not a file"
                    if prob:
                        lost.append(f"{chk[1]} is no longer a safetensors file ({prob})")
            elif kind == "st_valid":
                path = os.path.join(casedir, chk[1])
                if os.path.exists(path):
                    prob = safetensors_problem(path)
                    if prob:
                        if rc == 0:
                            lost.append(f"{chk[1]}: the checkpoint written is not a safetensors file ({prob})")
                        else:
                            notes.append(f"{chk[1]} left invalid ({prob})")
                    else:
                        notes.append(f"{chk[1]} is a valid safetensors file")
                elif rc == 0:
                    notes.append(f"{chk[1]} was not written")
            elif kind == "late" and rc not in (0, None) and not timed_out:
                n = len(TRAINING_LINE.findall(out.decode("utf-8", "replace")))
                if n:
                    res["late"] = True
                    notes.append(f"late: refused after {n} training/eval lines")
            elif kind == "nan":
                if re.search(r"\b-?nan\b", out.decode("utf-8", "replace"), re.I):
                    notes.append("nan in the output")
            elif kind == "header":
                first = out.decode("utf-8", "replace").split("\n")[0]
                if first:
                    notes.append("header: " + (first[:110] + "..." if len(first) > 110 else first))
            elif kind == "grep":
                if re.search(chk[1], out.decode("utf-8", "replace")):
                    notes.append(chk[2])
            elif kind == "exists":
                if rc == 0 and not os.path.exists(os.path.join(casedir, chk[1])):
                    notes.append(f"{chk[1]} not written")
        # the outcome
        clear, why = stderr_verdict(err)
        if lost:
            outcome = "lost-file"
            notes[:0] = lost
        elif timed_out:
            outcome = "hang"
            notes.append(f"killed after {limit} s")
        elif rc < 0 or rc >= 128:
            outcome = "crash"
            sig = -rc if rc < 0 else rc - 128
            try:
                notes.append(f"signal {signal.Signals(sig).name}")
            except ValueError:
                notes.append(f"exit {rc}")
        elif rc == 0:
            outcome = "silent-ok" if c.expect == "fail" else "ok"
            if removed and outcome == "ok":
                outcome = "silent-ok"
            if "nan in the output" in notes and outcome == "ok":
                outcome = "silent-ok"
                notes.append("exit 0 with a nan result")
        elif rc in (1, 2) and clear:
            outcome = "clear-error"
        else:
            outcome = "messy-error"
            notes.append(why if rc in (1, 2) else f"exit code {rc}; " + why if why else f"exit code {rc}")
        if outcome in ("clear-error", "messy-error") and c.expect == "succeed":
            res["unexpected"] = True
        res.update(outcome=outcome, rc=rc, seconds=round(seconds, 2), timed_out=timed_out,
                   stdout=out.decode("utf-8", "backslashreplace")[-1500:],
                   stderr=err.decode("utf-8", "backslashreplace")[:3000])
        return res


def line_for(res, c, workdir):
    mark = "!" if res["unexpected"] else ("L" if res["late"] else " ")
    tag = f"({c.name}) " if c.tag else ""
    first_err = res.get("stderr", "").strip().split("\n")[0] if res.get("stderr") else ""
    extra = []
    if res["outcome"] in ("clear-error", "messy-error") and first_err:
        extra.append("err: " + (first_err[:100] + "..." if len(first_err) > 100 else first_err))
    extra += res["notes"]
    tail = ("  [" + "; ".join(extra) + "]") if extra else ""
    return (f"{res['id']:3d} {res['outcome']:<11} {mark} {c.expect:<7} {res.get('seconds', 0):6.2f}s  "
            f"{tag}{show_case(c, workdir)}{tail}")


def summary(results, cases):
    lines = []
    counts = {o: 0 for o in OUTCOMES}
    for r in results:
        counts[r["outcome"]] += 1
    lines.append("summary")
    lines.append("  " + "  ".join(f"{o} {counts[o]}" for o in OUTCOMES if counts[o] or o != "skipped") +
                 f"  | total {len(results)}")
    unexpected = sum(r["unexpected"] for r in results)
    late = sum(r["late"] for r in results)
    lines.append(f"  errors where success was expected (!): {unexpected}; late refusals (L): {late}")
    lines.append("")
    cols = [o for o in OUTCOMES if counts[o] or o != "skipped"]
    lines.append(f"  {'program':<14}" + "".join(f"{o:>12}" for o in cols) + f"{'total':>8}")
    for prog in PROGRAMS:
        rs = [r for r in results if r["prog"] == prog]
        row = [sum(r["outcome"] == o for r in rs) for o in cols]
        lines.append(f"  {prog:<14}" + "".join(f"{n:>12}" for n in row) + f"{len(rs):>8}")
    lines.append(f"  {'all':<14}" + "".join(f"{counts[o]:>12}" for o in cols) + f"{len(results):>8}")
    return "\n".join(lines), counts


def follow_help(cases, bindir):
    """What a program's --help shows decides what a value near a bound should do:
    a range written (0..hi] excludes 0, and "noam: at least 1" excludes a noam
    warm-up of 0 (train_tasks' default schedule). The table above holds the
    ranges an older --help showed; a binary whose --help says otherwise is
    judged by what it says."""
    helps = {}
    def help_of(c):
        key = (c.prog, tuple(a for a in c.argv[:1] if a in ("train",)))
        if key not in helps:
            r = subprocess.run([os.path.join(bindir, c.prog)] + list(key[1]) + ["--help"], capture_output=True)
            helps[key] = r.stdout.decode("utf-8", "replace")
        return helps[key]
    for c in cases:
        if c.expect != "succeed" or any(isinstance(a, bytes) for a in c.argv):
            continue
        for i, a in enumerate(c.argv[:-1]):
            if c.argv[i + 1] != "0":
                continue
            text = help_of(c)
            if a in ("--lr", "--eps") and re.search(re.escape(a) + r" REAL[^\n]*\(0\.\.", text):
                c.expect, c.why = "fail", f"{a}: --help shows (0..hi]"
            if a == "--warmup" and c.prog == "train_tasks" and "noam: at least 1" in text:
                c.expect, c.why = "fail", "--warmup: --help says noam needs at least 1"


def main():
    ap = argparse.ArgumentParser(description="Bad-input probe of xgrad's eight programs (a survey: exits 0).")
    ap.add_argument("--bin", help="folder holding train_tasks, decode, attention_map, char_lm, g2p, addition")
    ap.add_argument("--workdir", help="scratch folder, created fresh (must be new, empty or an earlier probe's)")
    ap.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    ap.add_argument("--timeout", type=float, default=120, help="the most seconds of any case (default 120; "
                    "tiny cases have 30, the large-model ones 90)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--only", help="run only the cases whose ids are listed (e.g. 1,5,10-20)")
    args = ap.parse_args()
    cases = build_cases()
    if args.list:
        print("'...' stands for the program's base options (tiny runs):")
        for label, (sub, base, pos) in BASE.items():
            print(f"  {label}: " + " ".join(show_arg(a, None) for a in list(sub) + opt_list(base) + list(pos)))
        for prog, (sub, opts) in FIX_TRAIN.items():
            print(f"  {prog} ...fixture-run: " + " ".join(show_arg(a, None) for a in list(sub) + opt_list(opts)))
        for c in cases:
            tag = f"({c.name}) " if c.tag else ""
            print(f"{c.id:3d} {c.expect:<7} {tag}{show_case(c, None, width=200)}")
        print(f"{len(cases)} cases")
        return 0
    if not args.bin or not args.workdir:
        ap.error("--bin and --workdir are needed (or --list)")
    if args.jobs < 1 or args.timeout <= 0:
        ap.error("--jobs must be at least 1 and --timeout above 0")
    bindir = os.path.abspath(args.bin)
    work = os.path.abspath(args.workdir)
    if not os.path.isdir(bindir):
        ap.error(f"--bin {args.bin}: not a folder")
    if work == "/" or work == REPO or work.startswith(REPO + os.sep) or os.path.abspath(bindir) == work:
        ap.error(f"--workdir {work}: not inside the repository, '/' or the binaries' folder")
    if os.path.exists(work):
        if not os.path.isdir(work) or (os.listdir(work) and not os.path.exists(os.path.join(work, MARKER))):
            ap.error(f"--workdir {work}: exists and is not an earlier probe's folder (no {MARKER})")
        for d, dirs, _ in os.walk(work):
            for x in dirs:
                try:
                    os.chmod(os.path.join(d, x), 0o755)
                except OSError:
                    pass
        shutil.rmtree(work)
    os.makedirs(os.path.join(work, "cases"))
    open(os.path.join(work, MARKER), "w").close()
    if args.only:
        keep = set()
        for part in args.only.split(","):
            a, _, b = part.partition("-")
            keep.update(range(int(a), int(b or a) + 1))
        cases = [c for c in cases if c.id in keep]

    follow_help(cases, bindir)
    sandbox = sandbox_works()
    runner = Runner(bindir, work, args.timeout, sandbox)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.time()
    print(f"xgrad probe: {len(cases)} cases, bin {bindir}, workdir {work} ($W), jobs {args.jobs}, "
          f"euid {os.geteuid()}, /dev sandbox {'yes' if sandbox else 'no (the real /dev/null, restored if replaced)'}")
    missing = [p for p in PROGRAMS if not os.access(os.path.join(bindir, p), os.X_OK)]
    if missing:
        print("missing programs (their cases are skipped): " + " ".join(missing))
    runner.build_fixtures()
    for fl in runner.fixture_log:
        if not fl["valid"]:
            print(f"warning: fixture {fl['file']} not built (exit {fl['rc']}): {fl['stderr'][:200]} {fl['problem']}")
    print(f"fixtures built in {time.time() - t0:.1f} s")
    print("columns: id, outcome, ! = error where success was expected / L = refused late, expected, seconds, command")
    print("'...' stands for the program's base options (tiny runs; @FX = $W/fixtures, @CASE = the case's folder):")
    for label, (sub, base, pos) in BASE.items():
        print(f"  {label}: " + " ".join(show_arg(a, None) for a in list(sub) + opt_list(base) + list(pos)))
    print("'...fixture-run' stands for the options of the run that wrote the fixture checkpoint:")
    for prog, (sub, opts) in FIX_TRAIN.items():
        print(f"  {prog}: " + " ".join(show_arg(a, None) for a in list(sub) + opt_list(opts)))
    sys.stdout.flush()

    by_id = {c.id: c for c in cases}
    results = []

    def run_one(c):
        try:
            r = runner.run(c)
        except Exception as e:  # a bug of the probe: keep going
            r = {"id": c.id, "prog": c.prog, "name": c.name, "expect": c.expect, "argv": [], "command":
                 show_case(c), "notes": [f"probe error: {type(e).__name__}: {e}"], "late": False,
                 "unexpected": False, "outcome": "skipped", "rc": None, "seconds": 0.0}
        with runner.lock:
            results.append(r)
            print(line_for(r, c, work))
            sys.stdout.flush()
        return r

    parallel = [c for c in cases if not (c.exclusive or c.devnull)] if args.jobs > 1 else []
    serial = [c for c in cases if c not in parallel]
    if parallel:
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(run_one, parallel))
    for c in serial:
        run_one(c)
    results.sort(key=lambda r: r["id"])
    text, counts = summary(results, cases)
    elapsed = time.time() - t0
    print()
    print(text)
    print(f"  {elapsed:.0f} s; results in {os.path.join(work, 'results.json')}")
    notable = [r for r in results if r["outcome"] not in ("ok", "clear-error") or r["unexpected"] or r["late"]]
    if notable:
        print()
        print("not ok / clear-error (or unexpected, or late):")
        for r in notable:
            print(line_for(r, by_id[r["id"]], work))
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump({"started": started, "seconds": round(elapsed, 1), "bin": bindir, "workdir": work,
                   "euid": os.geteuid(), "sandbox": sandbox, "jobs": args.jobs, "timeout": args.timeout,
                   "fixtures": runner.fixture_log, "counts": counts, "total": len(results),
                   "cases": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
