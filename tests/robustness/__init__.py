"""The robustness corpus: malformed inputs run through the CLI, and a fuzz of the readers."""
