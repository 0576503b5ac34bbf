"""Score `g2p pronounce` output on the held-out words, independently of xgrad.

An outside check of train/g2p's scores (its own parser, split, edit distance),
and a way to score a checkpoint two ways: with Festival's `ax` apart from `ah`
(the phones of checkpoints made before Festival's `ax` was read as CMUdict's
AH0) and with the two merged (CMUdict's 39 stress-free phones).

    python3 bench/g2p_rescore.py words > held.txt         # the 10,557 held-out words, sorted
    ./build/apps/g2p/g2p pronounce --checkpoint g2p.safetensors --beam 4 < held.txt > out.txt
    python3 bench/g2p_rescore.py score out.txt           # WER and PER, without stress

A word is right when the output equals one of its pronunciations; PER is the
smallest edit distance to one of them, summed, over the summed length of that
pronunciation (as train/g2p's score_g2p). `g2p pronounce` decodes in float32,
word by word; the training run's final evaluation in bf16 (the default
precision), in batches: the two may differ by a few words.
"""
import re
import sys

DICT = "/usr/share/festival/dicts/cmu/cmudict-0.4.out"


def fnv1a64(word):
    h = 14695981039346656037
    for c in word.encode():
        h = ((h ^ c) * 1099511628211) % (1 << 64)
    return h


def read_dictionary(path=DICT):
    """word -> its distinct pronunciations, phones without stress, Festival's names."""
    refs = {}
    entry = re.compile(r'\("([^"]*)" \S+ \((.*)\)\)\s*$')
    syllable = re.compile(r"\(\(([a-z ]+)\) (\d)\)")
    for number, line in enumerate(open(path), 1):
        m = entry.match(line.strip())
        if not m:
            if line.startswith("MNCL") or not line.strip():
                continue
            sys.exit(f"{path}: line {number}: not an entry: {line.strip()[:60]}")
        pron = tuple(p for s in syllable.finditer(m.group(2)) for p in s.group(1).split())
        prons = refs.setdefault(m.group(1).lower(), [])
        if pron not in prons:
            prons.append(pron)
    return refs


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[-1]


def score(held, refs, outputs, phone=lambda p: p):
    """WER, PER, and how many wrong words are 1, 2, 3, 4 or more phones away."""
    wrong = errors = length = 0
    away = [0] * 4
    for word, out in zip(held, outputs):
        out = tuple(map(phone, out))
        # the first listed pronunciation at the smallest distance, as score_g2p
        best = min(((edit_distance(out, tuple(map(phone, r))), len(r)) for r in refs[word]), key=lambda t: t[0])
        wrong += best[0] != 0
        if best[0]:
            away[min(best[0], 4) - 1] += 1
        errors += best[0]
        length += best[1]
    return wrong / len(held), errors / length, away


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("words", "score") or (sys.argv[1] == "score") != (len(sys.argv) == 3):
        sys.exit(__doc__)
    try:
        refs = read_dictionary()
    except OSError as e:
        sys.exit(f"{DICT}: cannot read it ({e.strerror}; Debian's festlex-cmu installs it)")
    held = sorted(w for w in refs if fnv1a64(w) % 10 == 0)
    if sys.argv[1] == "words":
        print("\n".join(held))
        return
    try:
        with open(sys.argv[2]) as f:
            outputs = [tuple(line.split()) for line in f]
    except OSError as e:
        sys.exit(f"{sys.argv[2]}: cannot read it ({e.strerror})")
    if len(outputs) != len(held):
        sys.exit(f"{sys.argv[2]}: {len(outputs)} lines for {len(held)} held-out words")
    if any(p[-1].isdigit() for out in outputs for p in out):
        sys.exit(f"{sys.argv[2]}: phones with stress digits; this scores models trained with --stress drop")
    ways = [("ax merged into ah", lambda p: "ah" if p == "ax" else p)]
    if any("ax" in out for out in outputs):  # a model with Festival's phones: score it both ways
        ways.insert(0, ("ax apart from ah ", lambda p: p))
    for name, phone in ways:
        wer, per, away = score(held, refs, outputs, phone)
        print(f"{name}: {len(held)} words, WER {wer:.4f}, PER {per:.4f}; wrong words 1/2/3/4+ phones away: "
              + " / ".join(map(str, away)))


if __name__ == "__main__":
    main()
