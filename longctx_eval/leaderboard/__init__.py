"""The leaderboard: merged run files as leaderboard.json, LEADERBOARD.md, plots and a site (docs/architecture.md)."""
