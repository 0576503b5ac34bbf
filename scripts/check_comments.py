#!/usr/bin/env python3
"""Source comments give reasons; figures, dates and history live in docs/.

Usage: check_comments.py [REPO_ROOT]

Scans the comments (// and /* */, not string or character literals) of the
library's sources (engine/ autograd/ nn/ optim/ models/ distributed/ train/ onnx/)
and of apps/, *.h and *.cpp, and reports each comment that holds a date, a
time measurement, a speed figure or a piece of history ("an earlier
version", "on these VMs"). Such a figure belongs in docs/performance.md or
bench/results/, and the comment points there (for example "see
docs/performance.md, section Threads").

A line may opt out with `// check_comments: allow (reason)`; rewording is
better.

Exits 1 listing FILE:LINE: comment -- reason for each, else 0.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sources import FOLDERS, source_files  # noqa: E402

ALLOW = "check_comments: allow"

MONTHS = ("January|February|March|April|May|June|July|August|September|October|"
          "November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
NUM = r"(?<![\w.])\d+(?:[.,]\d+)?"  # a number that is not the tail of a name
# A participle after "previously" names an earlier point of the same run
# ("the previously saved tensor"), not the code's history.
PARTICIPLE = r"(?:\w+(?:ed|en|wn)|set|built|made|kept|held|put|read|run|hit|cut|found|sent|bound|got)\b"

CHECKS = [
    ("a date", re.compile(r"(?<!\d)(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)")),
    ("a date", re.compile(r"\b(?:" + MONTHS + r")\.?\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?(?:19|20)\d\d\b")),
    ("a date", re.compile(r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:" + MONTHS + r")\.?,?\s+(?:19|20)\d\d\b")),
    ("a time measurement", re.compile(NUM + r"\s*(?:ms|us|µs|μs|ns)(?![\w/])")),
    ("a time measurement", re.compile(NUM + r" s(?=[\s.,;:)]|$)")),
    ("a time measurement", re.compile(
        NUM + r"\s*(?:milli|micro|nano)?(?:seconds?|secs?)\b(?!\s+(?:of|per)\s+(?:a|an|the)\b)",
        re.IGNORECASE)),
    ("a speed figure", re.compile(r"\b[GMT]FLOP/?s\b|\bGFLOPS\b|\bFLOP/s\b", re.IGNORECASE)),
    ("a speed figure", re.compile(
        r"(?<![\w.])\d+(?:\.\d+)?(?:\s*[-–]\s*\d+(?:\.\d+)?)?\s*(?:x|×|times)\s+(?:faster|slower|quicker)\b",
        re.IGNORECASE)),
    ("a speed figure", re.compile(r"\d+(?:\.\d+)?\s*%\s+(?:faster|slower)\b", re.IGNORECASE)),
    ("history", re.compile(r"\b(?:an?|the)?\s*(?:earlier|previous)\s+versions?\b", re.IGNORECASE)),
    # "used to" as history, not as "the buffer used to hold the scores".
    ("history", re.compile(r"\b(?:it|this|that|which|we|xgrad|they|there)\s+used\s+to\b|\bused\s+to\s+be\b",
                           re.IGNORECASE)),
    ("history", re.compile(r"\bpreviously\b(?!\s+" + PARTICIPLE + r")", re.IGNORECASE)),
    ("history", re.compile(r"\bbefore\s+(?:this|the|that)\s+change\b", re.IGNORECASE)),
    ("history", re.compile(r"\bon\s+(?:these|our)\s+(?:VMs?|machines?)\b|\bon\s+this\s+VM\b"
                           r"|\bthe\s+development\s+(?:machine|VM)\b", re.IGNORECASE)),
    # A training session (a run between resumes) is train/'s own word; the
    # history is a working session: "measured in this session".
    ("history", re.compile(r"\b(?:measured|seen|found|noted|timed|tried|ran|run|fixed|changed|added)\s+"
                           r"(?:\w+\s+){0,3}?(?:in|during)\s+this\s+session\b"
                           r"|\bearlier\s+in\s+this\s+session\b"
                           r"|\bthis\s+(?:work|working|development|dev|coding|chat)\s+session\b", re.IGNORECASE)),
]
# A duration after these words is a setting (a bound or a period), not a measurement.
SETTING = re.compile(r"(?:limit\s+of|timeout\s+of|at\s+most|up\s+to|every|budget\s+of)\s*~?$", re.IGNORECASE)


def comments(text):
    """Returns the comment blocks of C++ source text, each a list of (line, text).

    Consecutive // comments on consecutive lines form one block, so a phrase
    broken across lines is still found; a /* */ comment is one block.
    """
    i, n, line = 0, len(text), 1
    block, last_line = [], None  # the // block being gathered

    def flush():
        nonlocal block
        if block:
            blocks.append(block)
        block = []

    blocks = []
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            body = text[i + 2:end]
            if last_line is None or last_line != line - 1:
                flush()
            block.append((line, body))
            last_line = line
            i = end
        elif text.startswith("/*", i):
            flush()
            last_line = None
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            lines = []
            for k, part in enumerate(text[i + 2:end].split("\n")):
                lines.append((line + k, part))
            blocks.append(lines)
            line += text.count("\n", i, end)
            i = end + 2
        elif c == '"':
            # A raw string: R"delim( ... )delim", possibly with an encoding prefix.
            j = i - 1
            while j >= 0 and (text[j].isalnum() or text[j] == "_"):
                j -= 1
            prefix = text[j + 1:i]
            if prefix in ("R", "LR", "uR", "UR", "u8R"):
                open_paren = text.find("(", i)
                delim = text[i + 1:open_paren]
                close = text.find(")" + delim + '"', open_paren)
                close = n if close < 0 else close + len(delim) + 2
                line += text.count("\n", i, close)
                i = close
            else:
                i += 1
                while i < n and text[i] != '"' and text[i] != "\n":
                    i += 2 if text[i] == "\\" else 1
                i += 1 if i < n and text[i] == '"' else 0
        elif c == "'":
            # A digit separator (1'000'000, 0xFF'FF) or a character literal.
            j = i - 1
            while j >= 0 and (text[j].isalnum() or text[j] in "_."):
                j -= 1
            if text[j + 1:i][:1].isdigit():
                i += 1
            else:
                i += 1
                while i < n and text[i] != "'" and text[i] != "\n":
                    i += 2 if text[i] == "\\" else 1
                i += 1 if i < n and text[i] == "'" else 0
        else:
            i += 1
    flush()
    return blocks


def check_block(block):
    """Returns (line, comment text of that line, reason, match) for each finding."""
    # Join the lines with single spaces, remembering where each starts.
    starts, parts, pos = [], [], 0
    for ln, body in block:
        body = body.lstrip("/!*<").strip() if body.lstrip().startswith(("/", "!", "<")) else body.strip()
        body = body.lstrip("*").strip()
        starts.append((pos, ln, body))
        parts.append(body)
        pos += len(body) + 1
    joined = " ".join(parts)
    allowed = {ln for ln, body in block if ALLOW in body}
    found, seen = [], set()
    for reason, rx in CHECKS:
        for m in rx.finditer(joined):
            start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
            ln, body = next((l, b) for p, l, b in reversed(starts) if p <= start)
            if ln in allowed or (ln, m.group(0).strip()) in seen:
                continue
            if reason == "a time measurement" and SETTING.search(joined[max(0, start - 20):start].rstrip()):
                continue
            seen.add((ln, m.group(0).strip()))
            found.append((ln, body, reason, m.group(0).strip()))
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    files, findings = 0, []
    for path, rel in source_files(root, FOLDERS, "check_comments"):
        files += 1
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for block in comments(text):
            for ln, body, reason, what in check_block(block):
                findings.append((rel, ln, body, reason, what))
    for rel, ln, body, reason, what in sorted(findings):
        print(f"{rel}:{ln}: {body}  -- {reason} ('{what}')")
    if findings:
        print(f"check_comments: {len(findings)} comment(s) hold a date, a figure or history; "
              "give the reason and point to docs/performance.md or bench/results/ for the figure "
              f"(or mark the line '// {ALLOW} (why)')")
        return 1
    print(f"check_comments: {files} files, no dates, timings or history in comments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
