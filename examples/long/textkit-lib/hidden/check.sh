# Hidden checks of examples/long/textkit-lib: kept by the bench, never uploaded, never shown to any role.
# Convention (examples/long/README.md): run by its path (`sh examples/long/textkit-lib/hidden/check.sh`)
# in a scratch copy of a snapshot; prints one `PASS <id>` or `FAIL <id>` line per goal clause, in
# the goal's order (the ids of the task's [[acceptance]] entries), each criterion in its own fresh
# copy; exits 0 only if all pass. LONG_HIDDEN_VERBOSE=1 adds each failure's reason on stderr.
# The helpers (`check`, `run`, `py`, `write`, `read`, `eq`) and the runner are the shared
# harness, examples/long/lib/hidden_harness.py.
. "$(dirname "$0")/../../lib/hidden-harness.sh"
run_hidden_criteria <<'PY'
# ---- the hidden criteria, one per goal clause, in the goal's order ----
def tk():
    import textkit
    return textkit


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return
    raise AssertionError(f"{fn.__name__}{args!r} did not raise {exc.__name__}")


@check("strip-accents")
def _():
    f = tk().strip_accents
    eq(f("Crème brûlée"), "Creme brulee", "strip_accents('Crème brûlée')")
    eq(f("Ångström"), "Angstrom", "strip_accents('Ångström')")
    eq(f("ÉCOLE"), "ECOLE", "strip_accents('ÉCOLE')")
    eq(f(""), "", "strip_accents('')")
    eq(f("a-b_c 1!"), "a-b_c 1!", "ASCII unchanged")


@check("slugify")
def _():
    f = tk().slugify
    eq(f("  --Hello__World--  "), "hello-world", "slugify with separators around")
    eq(f("Crème Brûlée 2"), "creme-brulee-2", "slugify('Crème Brûlée 2')")
    eq(f("a...b   c"), "a-b-c", "slugify('a...b   c')")
    eq(f("!!!"), "", "slugify('!!!')")
    eq(f(""), "", "slugify('')")


@check("words")
def _():
    f = tk().words
    eq(f("It's 9 o'clock"), ["it's", "9", "o'clock"], "words with apostrophes and digits")
    eq(f("café au LAIT"), ["café", "au", "lait"], "words keep accented letters")
    eq(f("a-b c_d\te\nf"), ["a", "b", "c", "d", "e", "f"], "separators")
    eq(f(""), [], "words('')")
    eq(f("  ,, "), [], "words of punctuation")


@check("word-counts")
def _():
    f = tk().word_counts
    eq(f("A a, b! A"), {"a": 3, "b": 1}, "word_counts('A a, b! A')")
    eq(f(""), {}, "word_counts('')")
    eq(f("don't DON'T dont"), {"don't": 2, "dont": 1}, "apostrophes")


@check("top-words")
def _():
    f = tk().top_words
    eq(f("c b a c b c", 5), [("c", 3), ("b", 2), ("a", 1)], "n larger than the distinct words")
    eq(f("z y x y z", 2), [("y", 2), ("z", 2)], "ties alphabetical")
    eq(f("Go go STOP", 1), [("go", 2)], "case ignored")
    eq(f("a b", 0), [], "n = 0")
    eq(f("", 3), [], "empty text")


@check("truncate")
def _():
    f = tk().truncate
    eq(f("abcdef", 6), "abcdef", "exactly n characters")
    eq(f("abcdefg", 6), "abc...", "one over")
    eq(f("abcdef", 3), "...", "n = 3")
    eq(f("", 3), "", "empty")
    eq(len(f("x" * 50, 10)), 10, "length of the result")
    raises(ValueError, f, "hello", 0)
    raises(ValueError, f, "hello world", 2)


@check("wrap")
def _():
    f = tk().wrap
    eq(f("", 10), [], "wrap('')")
    eq(f("   \n ", 10), [], "wrap of whitespace")
    eq(f("ab cd", 5), ["ab cd"], "exact fit")
    eq(f("a verylongword b", 5), ["a", "verylongword", "b"], "long word on its own line")
    eq(f("one  two\tthree\nfour five", 9), ["one two", "three", "four five"], "any whitespace")
    eq(f("aa bb cc dd", 5), ["aa bb", "cc dd"], "pairs")


@check("number-lines")
def _():
    f = tk().number_lines
    eq(f([]), [], "no lines")
    eq(f(["only"]), ["1: only"], "one line")
    got = f([str(i) for i in range(100)])
    eq(got[0], "  1: 0", "first of 100")
    eq(got[9], " 10: 9", "tenth of 100")
    eq(got[99], "100: 99", "last of 100")
    eq(f(["", "x"]), ["1: ", "2: x"], "an empty line")


@check("camel-to-snake")
def _():
    f = tk().camel_to_snake
    eq(f("getX"), "get_x", "camel_to_snake('getX')")
    eq(f("Already"), "already", "a first uppercase letter")
    eq(f("ABC"), "a_b_c", "camel_to_snake('ABC')")
    eq(f("already_snake"), "already_snake", "already snake")
    eq(f("v2Api"), "v2_api", "camel_to_snake('v2Api')")
    eq(f(""), "", "camel_to_snake('')")


@check("snake-to-camel")
def _():
    f = tk().snake_to_camel
    eq(f("__a__b_"), "aB", "empty parts dropped")
    eq(f("Parse_HTTP_response"), "parseHttpResponse", "parts lowercased first")
    eq(f("x"), "x", "one letter")
    eq(f(""), "", "snake_to_camel('')")
    eq(f(tk().camel_to_snake("parseHttpResponse")), "parseHttpResponse", "round trip")
PY
