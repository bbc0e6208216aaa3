"""BERTScore equals the bert_score package (0.3.13, the dev extra) on the packaged MiniLM, per layer, with and
without idf, on empty, multi-sentence, unicode, over-window and multi-reference inputs; and its settings are checked."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import BertTokenizer

from longctx_eval.errors import ConfigError, TaskDefinitionError
from longctx_eval.metrics.aggregate import mean
from longctx_eval.metrics.bertscore import BertScoreConfig, bertscore, idf_weights
from longctx_eval.metrics.semantic import SemanticMetric, declared_semantic, semantic_metrics
from longctx_eval.models.assets import minilm_path
from longctx_eval.models.layer_encoder import layer_encoder
from longctx_eval.scoring.semantic import check_setup

bert_score = pytest.importorskip("bert_score", reason="the reference implementation: pip install bert-score==0.3.13")

LONG = " ".join(f"Sentence {i} of a long answer names the harbour town of Caldhaven again." for i in range(60))
CANDIDATES = [
    "Caldhaven",
    "Aurel Ulmholm studies in Caldhaven. The polytechnic is located there, near the old harbour.",
    "The special magic number is 6084690.",
    "",  # an empty answer: bert_score's raw scores are 0
    "  Ünïcödé café — naïve 東京 😀, Zoë's façade  ",
    "forty-two",
    "Paris is the capital of France. It is large. Many tourists visit it every year!",
]
REFERENCES = [
    "Caldhaven",
    "Caldhaven",
    "6084690",
    "Marrowick",
    "unicode cafe naive Tokyo, Zoe's facade",
    "42",
    "The capital of France is Paris.",
]


@pytest.fixture(autouse=True)
def _empty_text_shim(monkeypatch):
    """bert_score encodes an empty text with `build_inputs_with_special_tokens([])`, which transformers 5's BERT
    tokenizer no longer has; give it back what transformers 4 did ([CLS] [SEP]), for the reference only."""
    monkeypatch.setattr(
        BertTokenizer,
        "build_inputs_with_special_tokens",
        lambda self, ids, pair=None: [self.cls_token_id, *ids, self.sep_token_id],
        raising=False,
    )


def reference(cands, refs, layer, batch_size=1, **kwargs) -> np.ndarray:
    """bert_score's P, R, F1; one pair per batch by default, where its matching has no padding (see below)."""
    p, r, f = bert_score.score(
        cands, refs, model_type=str(minilm_path()), num_layers=layer, device="cpu", nthreads=0,
        batch_size=batch_size, **kwargs,
    )  # fmt: skip
    return np.stack([p.numpy(), r.numpy(), f.numpy()], axis=1).astype(np.float64)


@pytest.mark.parametrize(("layer", "idf"), [(5, False), (5, True), (0, False), (0, True), (6, False)])
def test_equal_to_bert_score(layer, idf):
    ours = bertscore(CANDIDATES, REFERENCES, layer_encoder("minilm", layer), idf=idf)
    theirs = reference(CANDIDATES, REFERENCES, layer, idf=idf)
    assert np.abs(ours - theirs).max() < 1e-6
    assert ours[3].tolist() == [0.0, 0.0, 0.0]  # the empty answer
    assert ours[0, 2] == pytest.approx(1.0, abs=1e-6) and ours[5, 2] < ours[0, 2]


def test_an_answer_over_the_window_is_truncated_and_scored_apart_from_its_batch():
    """bert_score (batch_size 64, its default) pads a batch's texts to the longest and lets a padding column's
    masked 0 win a token's maximum when every real cosine of that token is negative, so its value for a pair
    depends on the pairs scored beside it; ours never does, and equals bert_score's for the pair alone."""
    enc = layer_encoder("minilm", 5)
    assert len(enc.encode_ids(LONG)) == 512 < len(enc.tokenizer.encode(LONG))
    ours = bertscore([LONG], ["Caldhaven"], enc)[0]
    alone = reference([LONG], ["Caldhaven"], 5)[0]
    assert np.abs(ours - alone).max() < 1e-6
    beside = reference([LONG, *CANDIDATES], ["Caldhaven", *REFERENCES], 5, batch_size=64)[0]
    assert abs(beside[0] - alone[0]) > 1e-5  # the package's quirk: another value for the same pair
    assert np.abs(bertscore([LONG, *CANDIDATES], ["Caldhaven", *REFERENCES], enc)[0] - ours).max() < 1e-6


def test_several_references_take_the_best_of_each_score():
    refs = [["Marrowick", "Caldhaven"], ["Caldhaven", "The polytechnic is in Caldhaven."], ["6084690"]]
    cands = CANDIDATES[:3]
    ours = bertscore(cands, refs, layer_encoder("minilm", 5))
    assert np.abs(ours - reference(cands, refs, 5)).max() < 1e-6
    assert ours[0, 2] == pytest.approx(1.0, abs=1e-6)  # the matching reference wins


def test_baseline_rescaling_equals_bert_score_with_the_same_baseline_file(tmp_path):
    rows = [(layer, 0.70 + layer / 100, 0.71 + layer / 100, 0.705 + layer / 100) for layer in range(7)]
    path = tmp_path / "minilm.tsv"
    path.write_text("LAYER,P,R,F\n" + "".join(f"{layer},{p},{r},{f}\n" for layer, p, r, f in rows))
    layer = 5
    ours = bertscore(CANDIDATES, REFERENCES, layer_encoder("minilm", layer), baseline=rows[layer][1:])
    theirs = reference(CANDIDATES, REFERENCES, layer, rescale_with_baseline=True, lang="en", baseline_path=str(path))
    assert np.abs(ours - theirs).max() < 1e-6
    assert ours[3, 0] == pytest.approx(-0.75 / 0.25)  # an empty answer's 0, rescaled: (0 - b) / (1 - b)


def test_idf_weights_are_bert_scores_rule():
    weights = idf_weights([[101, 7, 8, 102], [101, 7, 102]])
    assert weights(7) == pytest.approx(np.log(3 / 3)) and weights(8) == pytest.approx(np.log(3 / 2))
    assert weights(101) == 0.0 and weights(999) == pytest.approx(np.log(3))  # special tokens 0, unseen log(N+1)


def test_matching_ignores_the_batch_an_answer_shares():
    enc = layer_encoder("minilm", 5)
    alone = bertscore(CANDIDATES[:1], REFERENCES[:1], enc)
    together = bertscore(CANDIDATES, REFERENCES, enc)
    assert np.abs(alone[0] - together[0]).max() < 1e-6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layer": -1}, "semantic_metrics layer: expected an integer >= 0, got -1"),
        ({"layer": True}, "semantic_metrics layer"),
        ({"idf": "yes"}, "semantic_metrics idf: expected True or False"),
        ({"baseline": (0.8, 0.8)}, r"semantic_metrics baseline: expected a tuple of three finite numbers"),
        ({"baseline": [0.8, 1.0, 0.8]}, "below 1"),
        ({"model": " "}, "semantic_metrics model: expected 'minilm' or a local model folder"),
        ({"embedder": ""}, "semantic_metrics embedder"),
    ],
)
def test_bad_settings_are_named_before_a_model_loads(kwargs, message):
    with pytest.raises(TaskDefinitionError, match=message):
        check_setup(declared_semantic(semantic_metrics(**kwargs)))


def test_a_layer_past_the_model_and_a_model_that_is_not_a_folder_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="expected 0 to 6"):
        layer_encoder("minilm", 7)
    with pytest.raises(ConfigError, match="local transformers folder holding config.json"):
        layer_encoder(str(tmp_path / "roberta-large"), 17)


def test_a_task_declares_the_four_fields_with_one_configuration():
    metrics = semantic_metrics(layer=4, idf=True)
    assert [m.name for m in metrics] == ["bertscore_p", "bertscore_r", "bertscore_f1", "embedding_similarity"]
    declared = check_setup(declared_semantic(metrics))
    assert isinstance(declared, SemanticMetric) and declared.bertscore == BertScoreConfig(layer=4, idf=True)
    assert declared_semantic([mean("score")]) == []
    with pytest.raises(TaskDefinitionError, match="one call"):
        check_setup(declared_semantic(metrics[:1] + semantic_metrics(layer=3)[1:]))
