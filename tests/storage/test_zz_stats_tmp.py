import tests.storage.test_cleaner_model as m


def test_zz_stats():
    print("STATS", m.STATS)
