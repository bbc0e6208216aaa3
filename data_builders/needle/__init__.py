"""The needle family: one or several key-value needles at exact spans, their grids, variants and builders."""
