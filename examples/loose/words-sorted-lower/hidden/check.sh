test "$(echo 'Pear apple pear Fig' | python3 words.py)" = "$(printf 'apple\nfig\npear')"
