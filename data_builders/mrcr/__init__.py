"""The MRCR-style family: long user/assistant conversations with look-alike requests, its grid and its builder."""
