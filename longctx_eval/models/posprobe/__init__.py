"""The position probe (posprobe) on the model side: exact attention rows, the reference models' encodings, support."""
