#!/usr/bin/env python3
# test/style/shell_checks.py — two checks on the shell test scripts (test/style/run.sh runs
# them, first on planted bad files):
#   waits FILE...  every wait (wait_*, passes_after, and a function of the file that ends in
#                  one, so returns its status) has its outcome consumed: it is an if/while/
#                  until condition, joined by && or ||, or the next statement reads $?
#                  (tap_ok $? "...", rc=$?).  A wait whose outcome is dropped lets the check
#                  after it pass on a stalled system.
#   same FILE...   a comparison of a command's output against a variable or another command's
#                  output is tap_same, not tap_is: two helpers that failed and printed
#                  nothing compare equal, and tap_same fails on an empty side.
# Prints "# ... FILE:LINE" for each finding and exits 1 when there is one.
import re, sys

WAIT = re.compile(r"^(wait_\w+|passes_after)$")
COND = {"if", "elif", "while", "until", "!"}
LEAD = {"then", "do", "else", "{", "(", "time"}

def statements(s):
    """Split shell text into simple statements at top level: yields
    (text, line, sep_before, sep_after).  Quotes, $( ), ${ } and heredocs are skipped over."""
    out = []
    i, n, line = 0, len(s), 1
    cur, cur_line, sep_before = [], 1, "\n"
    stack = []          # 'd' double quote, 'c' $( , 'p' ( in c, 'b' ${
    heredocs = []
    def flush(sep):
        nonlocal cur, sep_before, cur_line
        t = "".join(cur).strip()
        if t:
            out.append([t, cur_line, sep_before, sep])
            sep_before = sep
        elif sep in ("&&", "||", "|"):
            sep_before = sep
        elif sep_before not in ("&&", "||", "|"):
            sep_before = sep
        cur = []
        cur_line = line
    while i < n:
        c = s[i]
        top = stack[-1] if stack else None
        if c == "\n":
            line += 1
            if heredocs and top is None:
                # skip heredoc bodies
                cur.append(c); i += 1
                for tag, strip in heredocs:
                    while i < n:
                        j = s.find("\n", i)
                        j = n if j < 0 else j
                        body = s[i:j]
                        i = j + 1; line += 1
                        if (body.lstrip("\t") if strip else body) == tag:
                            break
                heredocs = []
                if not cur or cur[-1] != "\\\n":
                    flush("\n")
                continue
        if top == "s":
            if c == "'": stack.pop()
            cur.append(c)
            i += 1; continue
        if c == "\\" and i + 1 < n:
            if s[i + 1] == "\n":
                line += 1; cur.append(" "); i += 2; continue
            cur.append(s[i:i + 2]); i += 2; continue
        if top == "d":
            if c == '"': stack.pop()
            elif s.startswith("$(", i): stack.append("c"); cur.append("$("); i += 2; continue
            elif s.startswith("${", i): stack.append("b"); cur.append("${"); i += 2; continue
            cur.append(c); i += 1; continue
        # top level, $( ) or ${ }
        if c == "#" and (i == 0 or s[i - 1] in " \t\n;(|&") and top != "b":
            j = s.find("\n", i); j = n if j < 0 else j
            i = j; continue
        if c == "'": stack.append("s"); cur.append(c); i += 1; continue
        if c == '"': stack.append("d"); cur.append(c); i += 1; continue
        if s.startswith("$((", i): stack.append("a"); cur.append("$(("); i += 3; continue
        if s.startswith("$(", i): stack.append("c"); cur.append("$("); i += 2; continue
        if s.startswith("${", i): stack.append("b"); cur.append("${"); i += 2; continue
        if top == "a":
            if s.startswith("))", i): stack.pop(); cur.append("))"); i += 2; continue
            cur.append(c); i += 1; continue
        if top == "b":
            if c == "}": stack.pop()
            cur.append(c); i += 1; continue
        if top in ("c", "p"):
            if c == "(": stack.append("p")
            elif c == ")": stack.pop()
            cur.append(c); i += 1; continue
        m = re.match(r"<<(-?)\s*(['\"]?)(\w+)\2", s[i:])
        if m:
            heredocs.append((m.group(3), m.group(1) == "-"))
            cur.append(m.group(0)); i += len(m.group(0)); continue
        if s.startswith("&&", i) or s.startswith("||", i):
            flush(s[i:i + 2]); i += 2; continue
        if c == "|" : flush("|"); i += 1; continue
        if c == ";" and not s.startswith(";;", i): flush(";"); i += 1; continue
        if c == "&" and not s.startswith("&>", i) and (i == 0 or s[i-1] not in "<>"): flush("&"); i += 1; continue
        if c == "\n": flush("\n"); i += 1; continue
        cur.append(c); i += 1
    flush("\n")
    return out

def words(t):
    return t.split()

def check(f, waits=None):
    """Every wait (wait_*, passes_after, and a function of the file that ends in one, whose
    status is the wait's) must have its outcome consumed: in an if/while/until condition,
    joined by && or ||, or by the next statement reading $? (tap_ok $? ..., rc=$?)."""
    s = open(f, encoding="utf-8").read()
    st = statements(s)
    names = set()
    for _ in range(3):      # a function ending in a call of another such function
        func, bad = None, []
        for k, (t, ln, before, after) in enumerate(st):
            w = words(t)
            m = re.match(r"^(\w+)\s*\(\)\s*\{?", t)
            if m:
                func = m.group(1)
                w = words(t[m.end():])
            cond = False
            while w and (w[0] in COND or w[0] in LEAD):
                cond |= w[0] in COND
                w = w[1:]
            if not w or not (WAIT.match(w[0]) or w[0] in names):
                continue
            if cond or before in ("&&", "||", "|") or after in ("&&", "||", "|"):
                continue
            nxt = st[k + 1][0] if k + 1 < len(st) else ""
            if "$?" in nxt:
                continue
            if nxt.startswith("}"):     # the function's status is the wait's: its callers assert it
                if func:
                    names.add(func)
                continue
            bad.append("# unasserted wait (%s): %s:%d" % (w[0], f, ln))
    return bad

def shell_words(t, k):
    """The first k words of a simple statement, quotes and $( ) kept whole."""
    ws, cur, stack, i = [], [], [], 0
    while i < len(t) and len(ws) < k:
        c = t[i]
        top = stack[-1] if stack else None
        if top == "s":
            if c == "'": stack.pop()
        elif c == "\\":
            cur.append(t[i:i + 2]); i += 2; continue
        elif top == "d" and c == '"':
            stack.pop()
        elif t.startswith("$(", i):
            stack.append("c"); cur.append("$("); i += 2; continue
        elif top == "d":
            pass
        elif c == "'":
            stack.append("s")
        elif c == '"':
            stack.append("d")
        elif c == "(" and top in ("c", "p"):
            stack.append("p")
        elif c == ")" and top in ("c", "p"):
            stack.pop()
        elif c in " \t\n" and not stack:
            if cur: ws.append("".join(cur)); cur = []
            i += 1; continue
        cur.append(c); i += 1
    if cur and len(ws) < k:
        ws.append("".join(cur))
    return ws

def only_command(a):
    """a is one command substitution and nothing else: "$(...)" """
    if not a.startswith('"$(') or a.startswith('"$((') or not a.endswith(')"'):
        return False
    depth, q, i = 0, None, 1
    while i < len(a) - 1:
        c = a[i]
        if q == "'":
            q = None if c == "'" else q
        elif c == "\\":
            i += 1
        elif c == "'" and depth:
            q = "'"
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i == len(a) - 2
        i += 1
    return False

def check_same(f):
    """A "nothing changed" comparison of two command outputs, or of one against a variable
    that holds another, must be tap_same (which fails when a side is empty): tap_is passes
    when both helpers failed and printed nothing."""
    s = open(f, encoding="utf-8").read()
    bad = []
    var = re.compile(r'^"\$(\w+|\{\w+\})"$')
    for t, ln, _, _ in statements(s):
        w = shell_words(t, 3)
        if len(w) < 3 or w[0] != "tap_is":
            continue
        a1, a2 = w[1], w[2]
        cmd1 = re.search(r"\$\((?!\()", a1) is not None
        if (cmd1 and (var.match(a2) or only_command(a2))) or (var.match(a1) and only_command(a2)):
            bad.append("# tap_is of a command output against %s (use tap_same): %s:%d" % (a2 if cmd1 else a1, f, ln))
    return bad

if __name__ == "__main__":
    mode = sys.argv[1]
    bad = []
    for f in sys.argv[2:]:
        bad += check(f) if mode == "waits" else check_same(f)
    if bad:
        print("\n".join(bad))
    sys.exit(1 if bad else 0)
