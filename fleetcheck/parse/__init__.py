"""Pure parsers: text in, values out, no I/O. Each raises ValueError with a readable message."""
