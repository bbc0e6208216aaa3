"""Built datasets: the builder registry, the `build` command, parquet export, the card, hub upload, interop."""
