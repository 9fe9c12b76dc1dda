import pytest

# The contract suites live outside test_*.py modules; rewrite their asserts too.
pytest.register_assert_rewrite("tests.store.contract")
