"""A test that uses no kafkad fixture: the plugin must start nothing for it."""


def test_plain():
    assert 1 + 1 == 2
