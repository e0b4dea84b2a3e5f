"""Tests of the MP server; only the unbuilt `test` stage copies them."""
def test_roundtrip():
    assert True
