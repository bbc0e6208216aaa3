"""Which of a sample's needles a prediction found: by its text (generators) or by its hits (retrievers)."""

from longctx_eval import Prediction, Sample, contains_answer, first_covering_rank


def found_needles(sample: Sample, prediction: Prediction, k: int) -> list[bool]:
    """One flag per needle: its code in the answer text, or its whole span inside one of the top-k chunks."""
    if prediction.text is None:  # a retrieval prediction: ranked chunks with global character spans
        ranks = [first_covering_rank(prediction.hits, start, end) for start, end in sample.gold["spans"]]
        return [rank is not None and rank <= k for rank in ranks]
    return [contains_answer(prediction.text, code) for code in sample.gold["codes"]]
