"""The run: config and suites, task discovery, sampling, the runner, dry runs, cost and validate-task."""
