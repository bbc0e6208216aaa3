"""`make bench`: chunking, semantic chunking and 1M-token builds, timed side by side with peer libraries."""
