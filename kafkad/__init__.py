"""kafkad's tools: the CLI (kafkad.cli), the protocol client (kafkad.client), the test harness (kafkad.testing, kafkad.pytest_plugin)."""
