import re
import sys


def slugify(title):
    s = title.strip().lower()
    s = re.sub(r"[^a-z0-9]+", "-", s)
    return s.strip("-")


def make_url(title):
    return "/posts/" + slugify(title)


if __name__ == "__main__":
    print(make_url(" ".join(sys.argv[1:])))
