"""Example bots built on the SDK; each runs as ``python -m services.sdk.examples.<name>``."""
