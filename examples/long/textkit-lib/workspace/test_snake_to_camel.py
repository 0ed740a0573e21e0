import unittest

from textkit import snake_to_camel


class TestSnakeToCamel(unittest.TestCase):
    def test_snake_case(self):
        self.assertEqual(snake_to_camel("parse_http_response"), "parseHttpResponse")

    def test_one_word(self):
        self.assertEqual(snake_to_camel("name"), "name")


if __name__ == "__main__":
    unittest.main()
