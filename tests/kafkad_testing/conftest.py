# sample_project/ is a user's project, run in a subprocess by test_pytest_plugin.py.
collect_ignore = ["sample_project"]
