"""The run: config and suites, sampling, the runner, dry runs, cost and validate-task."""
