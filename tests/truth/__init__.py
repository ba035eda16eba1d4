"""The labeled corpus of real traces (issue 12) and tracekit tested against it."""
