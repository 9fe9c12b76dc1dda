"""Example bots built on the SDK; each runs as ``python -m domino_sdk.examples.<name>``."""
