"""The cross-paragraph family: fact chains placed apart or together, its grid and its builder."""
