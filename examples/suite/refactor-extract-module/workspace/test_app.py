import unittest

from app import make_url, slugify


class AppTest(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("  Hello, World! "), "hello-world")

    def test_make_url(self):
        self.assertEqual(make_url("My First Post"), "/posts/my-first-post")


if __name__ == "__main__":
    unittest.main()
