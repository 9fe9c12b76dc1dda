"""The chaos suite: faults under many matches, fuzzed requests, and entries planted in Redis."""
