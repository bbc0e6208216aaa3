"""Coreference data: the CoNLL reader, the shipped corpora and their splits, long documents and builders."""
