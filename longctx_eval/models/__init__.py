"""Model adapters: spec grammar (spec.py), kinds and their options (kinds.py, options.py), loading (loader.py)."""
