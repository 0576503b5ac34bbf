# The PyTorch twin (bench/vision.py) keeps its own table of each model's
# recipe, so that it runs without the C++ build; this check keeps the two
# from drifting. For each model it reads the header of `vision train` (stopped
# once printed) and of the twin's --dry-run, with the same options, and
# compares what both print: parameters, batch, dropout, random erasing, label
# smoothing, the weight decay and how many parameters it reaches, and the
# learning rate's start and end.
#   /usr/bin/python3 apps/vision/twin_recipe.py VISION_BINARY bench/vision.py
import re
import subprocess
import sys

MODELS = ("resnet", "vit", "cnn")
# Options given to both programs, to see that each reaches the same field.
CASES = [[]] + [["--smoothing", "0.1", "--lr", "0.003", "--min-lr-ratio", "0.2", "--dropout", "0.3", "--erase", "0.25"]]


def number(pattern, text, absent=None):
    m = re.search(pattern, text)
    if not m:
        if absent is None:
            sys.exit(f"twin_recipe: no match for {pattern!r} in:\n{text}")
        return absent
    return float(m.group(1))


def fields(header, twin):
    """The compared fields of a header line (vision's omits dropout, erasing,
    smoothing and weight decay when they are 0; the twin's always prints them)."""
    lr = re.search(r"\blr ([^ |,]+) to ([^ |,]+)", header)
    if not lr:
        sys.exit(f"twin_recipe: no 'lr X to Y' in:\n{header}")
    return {
        "parameters": number(r"\| (\d+) parameters", header),
        "batch": number(r"\| batch (\d+)", header),
        "dropout": number(r"\| dropout ([^ |]+)", header, None if twin else 0.0),
        "erase": number(r"\| erase ([^ |]+)" if twin else r"erasing p=([^ |)]+)", header, None if twin else 0.0),
        "smoothing": number(r"\| smoothing ([^ |]+)" if twin else r"label smoothing ([^ |]+)", header,
                            None if twin else 0.0),
        "weight_decay": number(r"weight decay ([^ ]+) on", header, None if twin else 0.0),
        "decayed": number(r"weight decay [^ ]+ on (\d+) parameters", header, None if twin else 0.0),
        "lr": float(lr.group(1)),
        "min_lr": float(lr.group(2)),
    }


def for_model(model, options):
    """The options without --dropout for the ResNet: both programs give
    dropout to the ViT and the CNN only."""
    if model == "resnet" and "--dropout" in options:
        i = options.index("--dropout")
        return options[:i] + options[i + 2:]
    return options


def vision_header(binary, model, options):
    # The tiny data and step count only keep the run short; it is stopped as
    # soon as the header (the line naming the parameters) is out.
    command = [binary, "train", "--model", model, "--steps", "2", "--warmup", "1", "--train-images", "256",
               "--eval-images", "10", "--threads", "1"] + options
    p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if " parameters " in line:
            p.kill()
            p.wait()
            return line
    p.wait()
    sys.exit(f"twin_recipe: {' '.join(command)} exited {p.returncode} without a header:\n{''.join(lines)}")


def twin_header(script, model, options):
    command = [sys.executable, script, "--model", model, "--threads", "1", "--dry-run"] + options
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"twin_recipe: {' '.join(command)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
    return out.stdout.splitlines()[0]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: twin_recipe.py VISION_BINARY BENCH_VISION_PY")
    binary, script = sys.argv[1:]
    bad = 0
    for case in CASES:
        for model in MODELS:
            options = for_model(model, case)
            ours = fields(vision_header(binary, model, options), twin=False)
            theirs = fields(twin_header(script, model, options), twin=True)
            differ = {k: (ours[k], theirs[k]) for k in ours if ours[k] != theirs[k]}
            name = f"{model} {' '.join(options) or '(defaults)'}"
            if differ:
                bad += 1
                print(f"{name}: DIFFER " + ", ".join(f"{k} vision {a:g}, twin {b:g}" for k, (a, b) in differ.items()))
            else:
                print(f"{name}: same " + ", ".join(f"{k} {v:g}" for k, v in ours.items()))
    print(f"twin_recipe: {bad} of {len(CASES) * len(MODELS)} headers differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
