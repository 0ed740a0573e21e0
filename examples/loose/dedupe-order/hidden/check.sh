test "$(printf 'b\na\nb\nc\na\n' | python3 dedupe.py)" = "$(printf 'b\na\nc')"
