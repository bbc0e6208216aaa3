"""The run folder on disk: its name, lock, safe paths, manifest, predictions.jsonl and scores/ lines."""
