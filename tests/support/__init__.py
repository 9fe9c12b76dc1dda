"""Test infrastructure: where the tests get their Redis."""
