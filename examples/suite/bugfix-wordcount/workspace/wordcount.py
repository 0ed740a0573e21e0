def count_words(text):
    """Return the number of words in text. Words are separated by any whitespace."""
    return len(text.split(" "))
