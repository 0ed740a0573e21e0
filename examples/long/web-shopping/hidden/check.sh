# Hidden checks of examples/long/web-shopping: kept by the bench, never uploaded, never shown to any role.
# Convention (examples/long/README.md): run by its path (`sh examples/long/web-shopping/hidden/check.sh`)
# in a scratch copy of a snapshot; prints one `PASS <id>` or `FAIL <id>` line per goal clause, in
# the goal's order (the ids of the task's [[acceptance]] entries), each criterion in its own fresh
# copy; exits 0 only if all pass. LONG_HIDDEN_VERBOSE=1 adds each failure's reason on stderr.
# The helpers (`check`, `run`, `py`, `write`, `read`, `eq`) and the runner are the shared
# harness, examples/long/lib/hidden_harness.py.
. "$(dirname "$0")/../../lib/hidden-harness.sh"
run_hidden_criteria <<'PY'
# ---- the hidden criteria, one per goal clause, in the goal's order ----
# Each runs `loopgate browse` on index.html opened as a file (headless Chromium): `loopgate`
# from $LOOPGATE_BIN, else PATH.
from html.parser import HTMLParser

TIMEOUT = 120


def browse(*args):
    """One browse script on index.html; raises with the failing step when it does not pass."""
    exe = os.environ.get("LOOPGATE_BIN") or shutil.which("loopgate")
    if not exe:
        raise AssertionError("loopgate is not on PATH (set LOOPGATE_BIN)")
    r = subprocess.run([exe, "browse", "--url", "index.html", "--timeout-secs", "3", *args],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        failed = [l for l in r.stdout.splitlines() if l.startswith("FAIL")] or r.stderr.splitlines()[-1:]
        raise AssertionError(f"browse {' '.join(args)}: {' | '.join(failed)}")


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.stack = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self.stack.append([tag, ""])

    def handle_endtag(self, tag):
        while self.stack:
            t, text = self.stack.pop()
            self.tags.append(("/" + t, text.strip()))
            if self.stack:
                self.stack[-1][1] += text
            if t == tag:
                break

    def handle_data(self, data):
        if self.stack:
            self.stack[-1][1] += data


def page():
    p = Tags()
    p.feed(read("index.html"))
    p.close()
    return p.tags


@check("heading")
def _():
    tags = page()
    heads = [text for tag, text in tags if tag in ("/h1", "/h2", "/h3")]
    eq("Shopping list" in heads, True, f"a heading reads exactly 'Shopping list' (headings: {heads})")
    srcs = [a.get("src", "") for tag, a in tags if tag == "script" and a.get("src")]
    eq(srcs, [], "scripts loaded from files or the network")
    browse("--expect-text", "Shopping list")


@check("add-item")
def _():
    uls = [a for tag, a in page() if tag == "ul" and a.get("id") == "items"]
    eq(len(uls), 1, "<ul id=\"items\"> elements")
    browse("--fill", "Item=  oat milk  ", "--click", "Add", "--expect-text", "oat milk")


@check("item-count")
def _():
    browse("--expect-text", "Items: 0")
    browse("--fill", "Item=tea", "--click", "Add", "--expect-text", "Items: 1")


@check("ignore-blank")
def _():
    browse("--fill", "Item=   ", "--click", "Add", "--click", "Add", "--expect-text", "Items: 0")
    browse("--click", "Add", "--expect-text", "Items: 0")


@check("quantity")
def _():
    browse("--fill", "Item=rice", "--fill", "Quantity=12", "--click", "Add", "--expect-text", "rice x 12")
    browse("--fill", "Item=salt", "--click", "Add", "--expect-text", "salt x 1")


@check("merge")
def _():
    browse("--fill", "Item=milk", "--fill", "Quantity=2", "--click", "Add", "--click", "Add",
           "--click", "Add", "--expect-text", "milk x 6", "--expect-text", "Items: 1")


@check("total")
def _():
    browse("--expect-text", "Total: 0")
    browse("--fill", "Item=jam", "--fill", "Quantity=4", "--click", "Add", "--click", "Add",
           "--expect-text", "Total: 8")


@check("remove")
def _():
    browse("--fill", "Item=milk", "--fill", "Quantity=3", "--click", "Add", "--click", "Remove milk",
           "--expect-text", "Items: 0", "--expect-text", "Total: 0")
    browse("--fill", "Item=milk", "--click", "Add", "--click", "Remove milk", "--click", "Add",
           "--expect-text", "milk x 1", "--expect-text", "Items: 1")


@check("clear")
def _():
    browse("--fill", "Item=milk", "--fill", "Quantity=5", "--click", "Add", "--click", "Clear list",
           "--click", "Add", "--expect-text", "milk x 5", "--expect-text", "Items: 1",
           "--expect-text", "Total: 5")
    browse("--fill", "Item=milk", "--click", "Add", "--click", "Clear list",
           "--expect-text", "Items: 0", "--expect-text", "Total: 0")


@check("several")
def _():
    browse("--fill", "Item=bread, eggs,, bread ", "--fill", "Quantity=2", "--click", "Add",
           "--expect-text", "Items: 2", "--expect-text", "bread x 4", "--expect-text", "eggs x 2")


@check("summary")
def _():
    browse("--fill", "Item=pear, apple, fig", "--click", "Add", "--click", "Remove fig",
           "--expect-text", "List: apple, pear")
    browse("--fill", "Item=b, c, a", "--click", "Add", "--expect-text", "List: a, b, c")
PY
