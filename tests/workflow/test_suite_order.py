"""The suite's order (conftest.pytest_collection_modifyitems): the tests that declare their
minutes come first, longest first, so that under pytest-xdist the longest start at once instead
of last; every other test keeps its place."""

from __future__ import annotations

from conftest import minutes


def test_declared_minutes_come_first_longest_first(request):
    items = request.session.items
    declared = [minutes(item) for item in items]
    n = sum(m > 0 for m in declared)
    assert declared[:n] == sorted(declared[:n], reverse=True)
    assert all(m == 0 for m in declared[n:])
    # The rest in collection order: each file's tests together, as pytest found them (an
    # unstable sort would scatter them, and set module fixtures up more than once).
    rest = [item.nodeid.split("::")[0] for item in items[n:]]
    assert rest == sorted(rest, key=list(dict.fromkeys(rest)).index)
