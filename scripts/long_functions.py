#!/usr/bin/env python3
"""The longest function bodies of the C++ sources.

Usage: long_functions.py ROOT [--top N] [--max LINES] [FOLDER...]

Scans the C++ files (*.h, *.cpp, ...) under ROOT/FOLDER (default: engine autograd
data nn optim models distributed train onnx apps) for function definitions: free
functions, member functions defined in their class or out of line,
constructors (with member-initializer lists, braced or not, and
function-try-blocks), operators, and function-like macros followed by a body
(doctest's TEST_CASE). A lambda, a local class or a SUBCASE is part of the
function around it. Namespaces, class, struct, union and enum bodies, and
initializer braces (`= {...}`, `int v_{3};`, a lambda assigned to a variable
outside any function) are not functions.

The scan matches braces on tokens, with comments, string and character
literals (prefixed and raw, R"x(...)x") and preprocessor lines set aside.
Every branch of an #if/#elif/#else is read when each branch closes the
braces it opens (dist.cpp defines its functions once with MPI and once
without); of a group with a branch that does not, the first branch only.
#if 0 branches are set aside.

A function's length counts the lines from the one holding its name (not the
template line or a return type on the line above) to its closing brace,
inclusive (to the last handler of a function-try-block).

Prints LINES  FILE:LINE  NAME, longest first, the top N (default 10; 0 for
all). NAME is qualified with the enclosing namespaces and classes, without
the project namespace xg.

With --max LINES it lists instead every function of the library folders
(engine autograd data nn optim models distributed train onnx, not apps; or the
FOLDERs given) longer than LINES whose comment directly above the signature
(the comment lines right above its first line, the template line if any)
does not give a reason, "(long: REASON)" or "long (REASON)", for example

    // Runs the whole step in one function (long: one pass over the batch
    // keeps the activations in the cache).

and exits 1; else prints "long_functions: no function over LINES lines
without a reason" and exits 0.
"""
import argparse
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sources import FOLDERS, source_files  # noqa: E402

LIBRARY = ("engine", "autograd", "data", "nn", "optim", "models", "distributed", "train", "onnx")
PROJECT_NAMESPACE = "xg"  # left out of the names: every library name is in it

# A reason for a long function in the comment above it: "(long: REASON)" or
# "long (REASON)"; not "(long contexts)".
REASON = re.compile(r"\(\s*long\s*[:\-\u2013\u2014]\s*[^)\s][^)]*\)|\blong\s*\(\s*[^)\s][^)]*\)",
                    re.IGNORECASE)

# Names before a parenthesis that do not name a function being defined.
NOT_A_NAME = {
    "decltype", "alignas", "alignof", "sizeof", "__attribute__", "__declspec", "noexcept", "throw",
    "static_assert", "requires", "typeid", "typeof", "__typeof__", "asm", "__asm__", "explicit",
    "if", "for", "while", "switch", "return", "catch", "do", "else", "case", "new", "delete",
    "void", "bool", "char", "char8_t", "char16_t", "char32_t", "wchar_t", "short", "int", "long",
    "float", "double", "signed", "unsigned", "auto", "const", "volatile", "constexpr", "consteval",
    "constinit", "static", "inline", "virtual", "extern", "mutable", "typename", "template",
    "using", "typedef", "friend", "co_await", "co_return", "co_yield",
}
CLASS_KEYS = {"class", "struct", "union"}
ACCESS = {"public", "private", "protected"}
STRING_PREFIXES = {"L", "u", "U", "u8"}
RAW_PREFIXES = {"R", "LR", "uR", "UR", "u8R"}

LEX = re.compile(r"""
   (?P<nl>\n)
  |(?P<ws>[ \t\r\f\v]+|\\\r?\n)
  |(?P<lc>//(?:[^\n\\]|\\.)*)
  |(?P<bc>/\*.*?(?:\*/|\Z))
  |(?P<num>\.?\d(?:[eEpP][+-]|'(?=\w)|[\w.])*)
  |(?P<id>[A-Za-z_$][\w$]*)
  |(?P<quote>["'])
  |(?P<punct>::|->|\.\.\.|.)
""", re.VERBOSE | re.DOTALL)
DIRECTIVE = re.compile(r"""(?:/\*.*?(?:\*/|\Z)|//[^\n]*|"(?:[^"\\\n]|\\.)*"?|\\.|[^\n])*""", re.DOTALL)
DIRECTIVE_NAME = re.compile(r"#\s*(\w*)\s*(.*)", re.DOTALL)


class Unbalanced(Exception):
    pass


class Tok:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind, self.text, self.line = kind, text, line

    def __repr__(self):
        return f"{self.text}@{self.line}"


class Cond:
    """An open #if group."""
    __slots__ = ("line", "parent_skipping", "first_only", "taken", "depth")

    def __init__(self, line, parent_skipping, first_only, taken):
        self.line, self.parent_skipping, self.first_only, self.taken = line, parent_skipping, first_only, taken
        self.depth = 0  # { minus } in the current branch


class Source:
    """Tokens of one file and, per line, its comments and whether it holds code."""

    def __init__(self, text, first_branch_only):
        # Every branch of an #if group is read when each branch is balanced,
        # else the first branch only (and always when first_branch_only).
        self._reset()
        self._lex(text, lambda group: first_branch_only)
        if self.unbalanced_groups and not first_branch_only:
            unbalanced = self.unbalanced_groups
            self._reset()
            self._lex(text, lambda group: group in unbalanced)
        self._merge_operators()

    def _reset(self):
        self.tokens = []
        self.comments = {}   # line -> [comment text]
        self.code = set()    # lines holding a token or a preprocessor directive
        self.unbalanced_groups = set()  # lines of the #if of groups with a branch opening more than it closes

    def _comment(self, text, line):
        for k, part in enumerate(text.split("\n")):
            self.comments.setdefault(line + k, []).append(part)

    def _lex(self, text, first_only):
        """first_only(line of an #if) says whether to read only the first branch of that group."""
        i, line, n = 0, 1, len(text)
        at_line_start = True
        # The open #if groups: Cond objects, innermost last.
        conds = self._conds = []
        skipping = False
        while i < n:
            m = LEX.match(text, i)
            kind = m.lastgroup
            s = m.group()
            if kind == "nl":
                line += 1
                at_line_start = True
                i = m.end()
                continue
            if kind == "ws":
                line += s.count("\n")
                i = m.end()
                continue
            if kind == "punct" and s == "#" and at_line_start:
                d = DIRECTIVE.match(text, i)
                body = d.group()
                self.code.add(line)
                name, rest = DIRECTIVE_NAME.match(body).groups()
                skipping = self._directive(conds, name, rest, skipping, line, first_only)
                line += body.count("\n")
                i = d.end()
                continue
            at_line_start = False
            if skipping:  # inside a branch set aside: skip to the next line
                j = text.find("\n", i)
                i = n if j < 0 else j
                continue
            if kind in ("lc", "bc"):
                self._comment(s, line)
                line += s.count("\n")
                i = m.end()
                continue
            start_line = line
            if kind == "id" and m.end() < n and text[m.end()] in "\"'":
                if s in RAW_PREFIXES and text[m.end()] == '"':
                    i, line = self._raw_string(text, m.end(), line)
                    self._add("str", text[m.start():i], start_line)
                    continue
                if s in STRING_PREFIXES:
                    i, line = self._quoted(text, m.end(), line)
                    self._add("str", text[m.start():i], start_line)
                    continue
            if kind == "quote":
                i, line = self._quoted(text, i, line)
                self._add("str" if s == '"' else "chr", text[m.start():i], start_line)
                continue
            self._add(kind, s, line)
            i = m.end()

    def _directive(self, conds, name, rest, skipping, line, first_only):
        """Follows #if/#elif/#else/#endif; returns whether the lines that follow are set aside."""
        if name in ("if", "ifdef", "ifndef"):
            zero = name == "if" and re.match(r"0\b", rest.strip()) is not None
            conds.append(Cond(line, skipping, first_only(line), not zero))
            return skipping or zero
        if not conds:
            return skipping
        top = conds[-1]
        if name in ("elif", "else", "elifdef", "elifndef"):
            self._close_branch(top)
            skip = top.parent_skipping or (top.first_only and top.taken)
            top.taken = top.taken or not skip
            return skip
        if name == "endif":
            self._close_branch(top)
            conds.pop()
            return top.parent_skipping
        return skipping

    def _close_branch(self, cond):
        if cond.depth != 0:
            self.unbalanced_groups.add(cond.line)
        cond.depth = 0

    @staticmethod
    def _quoted(text, i, line):
        """From an opening quote at i to past the closing one (or the line's end)."""
        q = text[i]
        j = i + 1
        n = len(text)
        while j < n:
            c = text[j]
            if c == "\\":
                if text.startswith("\n", j + 1):
                    line += 1
                j += 2
                continue
            if c == q:
                return j + 1, line
            if c == "\n":  # unterminated: stop at the line's end
                return j, line
            j += 1
        return n, line

    @staticmethod
    def _raw_string(text, i, line):
        """From the quote of R"delim( at i to past )delim"."""
        open_paren = text.find("(", i + 1)
        if open_paren < 0 or open_paren - i - 1 > 16:
            return Source._quoted(text, i, line)
        delim = text[i + 1:open_paren]
        end = text.find(")" + delim + '"', open_paren + 1)
        end = len(text) if end < 0 else end + len(delim) + 2
        return end, line + text.count("\n", i, end)

    def _add(self, kind, text, line):
        self.tokens.append(Tok(kind, text, line))
        self.code.add(line)
        if text in "{}" and kind == "punct":
            for cond in self._conds:
                cond.depth += 1 if text == "{" else -1

    def _merge_operators(self):
        """operator+, operator(), operator std::string ... become one name token."""
        out, toks, k = [], self.tokens, 0
        while k < len(toks):
            t = toks[k]
            if t.kind == "id" and t.text == "operator":
                j = k + 1
                if j + 1 < len(toks) and toks[j].text == "(" and toks[j + 1].text == ")":
                    j += 2
                else:
                    while j < len(toks) and j - k <= 8 and toks[j].text not in ("(", ";", "{", "}"):
                        j += 1
                    if j >= len(toks) or toks[j].text != "(":
                        out.append(t)
                        k += 1
                        continue
                parts = [x.text for x in toks[k + 1:j]]
                name = "operator" + ("" if parts and not parts[0][0].isalpha() else " ")
                name += "".join(p if not p[0].isalnum() or not q or not q[-1].isalnum() else " " + p
                                for q, p in zip([""] + parts, parts))
                out.append(Tok("op", name, t.line))
                k = j
                continue
            out.append(t)
            k += 1
        self.tokens = out


class Function:
    __slots__ = ("path", "line", "end", "name", "head_line")

    def __init__(self, path, line, end, name, head_line):
        self.path, self.line, self.end, self.name, self.head_line = path, line, end, name, head_line

    @property
    def length(self):
        return self.end - self.line + 1


def match(toks, i, opening="{", closing="}"):
    """Index of the `closing` token that closes the `opening` one at i."""
    depth = 0
    for j in range(i, len(toks)):
        c = toks[j].text
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return j
    raise Unbalanced(f"line {toks[i].line}: no {closing} for this {opening}")


def top_level(head):
    """Indices of the head's tokens outside (), [], {} and template <> (openers of (, [, { included)."""
    stack, out = [], []
    for k, t in enumerate(head):
        c = t.text
        opens_template = c == "<" and k > 0 and (head[k - 1].kind == "id" or head[k - 1].text == "template")
        if not stack and not opens_template:
            out.append(k)
        if c in "([{":
            stack.append(c)
        elif c in ")]}":
            opener = {")": "(", "]": "[", "}": "{"}[c]
            while stack and stack.pop() != opener:
                pass
        elif opens_template:
            stack.append("<")
        elif c == ">" and stack and stack[-1] == "<":
            stack.pop()
    return out


def qualified_name(head, k, paren):
    """The name at head[k], before the ( at head[paren]: a::b<T>::~c -> a::b::~c, f<float>."""
    parts = [head[k].text + "".join(t.text for t in head[k + 1:paren])]
    j = k - 1
    if j >= 0 and head[j].text == "~":
        parts[0] = "~" + parts[0]
        j -= 1
    while j >= 1 and head[j].text == "::":
        j -= 1
        if head[j].text == ">":  # skip template arguments
            depth = 0
            while j >= 0:
                if head[j].text == ">":
                    depth += 1
                elif head[j].text == "<":
                    depth -= 1
                    if depth == 0:
                        j -= 1
                        break
                j -= 1
        if j >= 0 and head[j].kind == "id":
            parts.insert(0, head[j].text)
            j -= 1
        else:
            break
    name = "::".join(parts)
    if head[k].kind == "id" and head[k].text.isupper():  # a macro: TEST_CASE("what")
        args = [t.text for t in head[paren + 1:paren + 3] if t.kind == "str"]
        if args:
            text = args[0] if len(args[0]) <= 60 else args[0][:57] + '..."'
            name += "(" + text + ")"
    return name


def classify(head):
    """What the { after these tokens opens.

    Returns ("namespace", name), ("class", name), ("function", index of the
    name, index of its (, function-try-block?), or ("skip",) for initializer
    braces, enum bodies and the like."""
    if not head:
        return ("skip",)
    texts = [t.text for t in head]
    k = 0
    while k < len(texts) and texts[k] in ("inline", "export"):
        k += 1
    if k < len(texts) and texts[k] == "namespace":
        return ("namespace", "".join(texts[k + 1:]))
    if texts[0] == "extern" and len(head) == 2 and head[1].kind == "str":
        return ("namespace", "")
    top = top_level(head)
    name_at = paren_at = None
    for n, k in enumerate(top):
        t = head[k]
        if t.text == "=":
            return ("skip",)  # an initializer: = {...}, = [] {...}, = Foo{...}
        if t.text == "(" and n > 0:
            q = top[n - 1]  # the name, maybe with template arguments between: data<float>(
            if head[q].kind == "op" or (head[q].kind == "id" and head[q].text not in NOT_A_NAME):
                name_at, paren_at = q, k
                break
    if name_at is not None:
        close = match(head, paren_at, "(", ")")
        after = [k for k in top if k > close]
        ctor_init = any(head[k].text == ":" for k in after)
        if ctor_init and (head[-1].kind == "id" or head[-1].text == ">"):
            return ("skip",)  # a braced member initializer: : v_{3}
        if any(head[k].text == "=" for k in after):
            return ("skip",)
        return ("function", name_at, paren_at, any(head[k].text == "try" for k in after))
    # Not a function: a class, an enum or an initializer.
    k = 0
    while k < len(texts):
        if texts[k] == "template" and k + 1 < len(texts) and texts[k + 1] == "<":
            depth = 0
            k += 1
            while k < len(texts):
                if texts[k] in "<(":
                    depth += 1
                elif texts[k] in ">)":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            k += 1
        elif texts[k] == "[" and k + 1 < len(texts) and texts[k + 1] == "[":
            while k < len(texts) and not (texts[k] == "]" and k > 0 and texts[k - 1] == "]"):
                k += 1
            k += 1
        elif texts[k] in ("typedef", "friend", "static", "inline", "constexpr", "const"):
            k += 1
        else:
            break
    if k < len(texts) and texts[k] == "enum":
        return ("skip",)
    if k < len(texts) and texts[k] in CLASS_KEYS:
        j = k + 1
        while j < len(texts):
            if texts[j] in ("alignas", "__attribute__", "__declspec") and j + 1 < len(texts) and texts[j + 1] == "(":
                j = match(head, j + 1, "(", ")") + 1
            elif texts[j] == "[":
                while j < len(texts) and texts[j] == "[":
                    depth = 0
                    while j < len(texts):
                        depth += texts[j] == "["
                        depth -= texts[j] == "]"
                        j += 1
                        if depth == 0:
                            break
            else:
                break
        parts = []
        while j < len(texts) and head[j].kind == "id" and texts[j] != "final":
            parts.append(texts[j])
            if j + 1 < len(texts) and texts[j + 1] == "::":
                j += 2
            else:
                break
        return ("class", "::".join(parts) or "(anonymous)")
    return ("skip",)


def scan_file(path, rel, first_branch_only):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    src = Source(text, first_branch_only)
    toks = src.tokens
    found = []

    def scan(i, chain, kind):
        """Reads a namespace or class body from i; returns the index of its }."""
        head_start = i
        stack = []
        while i < len(toks):
            t = toks[i]
            c = t.text
            if t.kind in ("str", "chr", "num"):
                pass
            elif c in "([":
                stack.append(c)
            elif c in ")]":
                opener = "(" if c == ")" else "["
                while stack and stack.pop() != opener:
                    pass
            elif c == "<" and i > head_start and (toks[i - 1].kind == "id" or toks[i - 1].text == "template"):
                stack.append("<")
            elif c == ">" and stack and stack[-1] == "<":
                stack.pop()
            elif c == ";":
                head_start, stack = i + 1, []
            elif c == ":" and not stack and kind == "class" and i > 0 and toks[i - 1].text in ACCESS:
                head_start = i + 1
            elif c == "}":
                if kind == "file":
                    raise Unbalanced(f"line {t.line}: a }} closes nothing")
                return i
            elif c == "{":
                if stack:  # inside ( ) or [ ]: a lambda, a braced argument or a default value
                    i = match(toks, i) + 1
                    continue
                head = toks[head_start:i]
                what = classify(head)
                if what[0] == "namespace":
                    name = what[1]
                    end = scan(i + 1, chain + ([name] if name else []), "namespace")
                    i = end + 1
                    head_start = i
                    continue
                if what[0] == "class":
                    end = scan(i + 1, chain + [what[1]], "class")
                    i = end + 1
                    head_start = i
                    continue
                if what[0] == "function":
                    end = match(toks, i)
                    if what[3]:  # function-try-block: its handlers are part of it
                        while end + 1 < len(toks) and toks[end + 1].text == "catch":
                            j = end + 2
                            if j < len(toks) and toks[j].text == "(":
                                j = match(toks, j, "(", ")") + 1
                            if j >= len(toks) or toks[j].text != "{":
                                break
                            end = match(toks, j)
                    name_tok = head[what[1]]
                    parts = [p for p in chain if p]
                    name = "::".join(parts + [qualified_name(head, what[1], what[2])])
                    if name == PROJECT_NAMESPACE or name.startswith(PROJECT_NAMESPACE + "::"):
                        name = name[len(PROJECT_NAMESPACE) + 2:]
                    found.append(Function(rel, name_tok.line, toks[end].line, name, head[0].line))
                    i = end + 1
                    head_start = i
                    continue
                i = match(toks, i) + 1  # an initializer or enum body: part of the head
                continue
            i += 1
        if kind != "file":
            raise Unbalanced("the file ends inside a namespace or class")
        return i

    scan(0, [], "file")
    return found, src


def preceding_comment(src, line):
    """The comment lines directly above line, joined."""
    lines = []
    k = line - 1
    while k >= 1 and k in src.comments and k not in src.code:
        lines.append(" ".join(src.comments[k]))
        k -= 1
    text = " ".join(reversed(lines))
    text = re.sub(r"//+|/\*+|\*+/|^\s*\*|\s\*\s", " ", text)
    return re.sub(r"\s+", " ", text)


def collect(root, folders):
    functions = []
    for path, rel in source_files(root, folders, "long_functions"):
        try:
            found, src = scan_file(path, rel, first_branch_only=False)
        except Unbalanced:
            try:
                found, src = scan_file(path, rel, first_branch_only=True)
            except Unbalanced as e:
                print(f"long_functions: {rel}: braces do not match ({e}); skipped", file=sys.stderr)
                continue
        for fun in found:
            functions.append((fun, src))
    functions.sort(key=lambda fs: (-fs[0].length, fs[0].path, fs[0].line))
    return functions


def line_of(fun):
    return f"{fun.length:5d}  {fun.path}:{fun.line}  {fun.name}"


def main(argv):
    p = argparse.ArgumentParser(description="List the longest function bodies of the C++ sources.")
    p.add_argument("root")
    p.add_argument("--top", type=int, default=10, help="how many to list (0: all; default 10)")
    p.add_argument("--max", type=int, default=None, metavar="LINES",
                   help="list the library's functions over LINES lines without a (long: reason); exit 1 if any")
    p.add_argument("folders", nargs="*")
    a = p.parse_intermixed_args(argv)
    if a.max is None:
        functions = collect(a.root, a.folders or FOLDERS)
        shown = functions if a.top <= 0 else functions[:a.top]
        for fun, _ in shown:
            print(line_of(fun))
        return 0
    over = []
    for fun, src in collect(a.root, a.folders or LIBRARY):
        if fun.length <= a.max:
            continue
        comment = preceding_comment(src, fun.head_line)
        if fun.line != fun.head_line:
            comment += " " + preceding_comment(src, fun.line)
        if not REASON.search(comment):
            over.append(fun)
    if not over:
        print(f"long_functions: no function over {a.max} lines without a reason")
        return 0
    for fun in over:
        print(line_of(fun))
    print(f"long_functions: {len(over)} function{'s' if len(over) != 1 else ''} over {a.max} lines "
          f"without a reason (a comment above saying \"(long: REASON)\")")
    return 1


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    sys.exit(main(sys.argv[1:]))
