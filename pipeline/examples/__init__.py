"""Example jobs on the kafkad data source (see pipeline/README.md)."""
