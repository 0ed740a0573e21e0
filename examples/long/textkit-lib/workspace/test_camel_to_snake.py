import unittest

from textkit import camel_to_snake


class TestCamelToSnake(unittest.TestCase):
    def test_camel_case(self):
        self.assertEqual(camel_to_snake("parseHttpResponse"), "parse_http_response")

    def test_one_word(self):
        self.assertEqual(camel_to_snake("name"), "name")


if __name__ == "__main__":
    unittest.main()
