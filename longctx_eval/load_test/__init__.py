"""`longctx-eval load`: throughput and latency of a served model against concurrency.

`prompts` builds the suite's prompts at chosen lengths exactly as a run sends them, `sweep` sends them at each
concurrency level through the served-model client (its rate limits shared by every level), `summary` reduces
one level's results, `report` writes the JSON and the plot.
"""
