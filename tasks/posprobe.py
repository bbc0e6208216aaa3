"""Position-extrapolation probe: passkey EM, NPB and LAE from exact attention rows, by length and depth.

One teacher-forced forward per needle (context of exactly L tokens, stratified depths, a fixed seed per
length so every model and RoPE variant sees identical inputs). Definitions: docs/posprobe.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from data_builders.posprobe.language import ToyLanguage
from data_builders.posprobe.samples import ProbeBuilder, TokenizerCodec, check_lengths, probe_inputs
from longctx_eval import Prediction, Request, Sample, Score, Task, Tokenizer, any_of, mean, task
from longctx_eval.metrics import posprobe as pm
from longctx_eval.metrics.aggregate import custom

TEXT_EVERY = 5
"""Every 5th needle index also sends a needle-free text of the same length: 12 texts per 60 needles (the
`text_every` argument; 0 = no texts, e.g. at 16K-32K where each text costs a second full forward)."""


def probe_score(sample: Sample, pred: Prediction) -> Score:
    """Per-needle values from the probe's statistics (plus plain-text NLL when the sample carries a text)."""
    probe, text = (pred.parts[0], pred.parts[1]) if pred.parts else (pred, None)
    d = probe.data
    if pred.status != "ok" or not d:
        return Score({})
    length, train = int(d["length"]), int(d["train_length"])
    correct = d["answer_correct"]
    em = float(all(correct))
    distance = d["answer_positions"][0] - 1 - d["needle_positions"][0]
    values = {
        "em": em,
        "em_in_window" if distance < train else "em_beyond_window": em,
        "step_acc": sum(correct) / len(correct),
        **pm.npb_terms(d["ret_argmax"], d["needle_positions"], length),
        "needle_mass": sum(d["needle_mass"]) / len(d["needle_mass"]),
        "lae": float(d["lae"]),
        "lae_ret": sum(d["ret_entropy"]) / len(d["ret_entropy"]),
        "lae_norm": float(d["lae_norm"]),
        "sink_mass": float(d["sink_mass"]),
        **pm.answer_terms(d["answer_nll"]),
        "seconds": float(d["seconds"]),
        "peak_rss_mb": float(d["peak_rss_mb"]),
        "length_ratio": length / train,
    }
    if "pe_clamped_share" in d:  # a learned position table: the share of positions clamped to its last row
        values["pe_clamped_share"] = float(d["pe_clamped_share"])
    cal = d["calibration"]
    ref = int(cal["length"])
    if length != ref:  # rho_train when the reference is the training length itself, else rho_ref (from L_ref)
        value = pm.rho(values["lae"], float(cal["lae_ref"]), length, ref)
        values.update({"rho_train": value} if ref == train else {"rho_ref": value, "rho_ref_length": float(ref)})
    sums = [(d, "haystack")] + ([(text.data, "text"), (text.data, "tail")] if text is not None and text.data else [])
    for source, name in sums:
        if source.get(f"{name}_tokens"):
            values[f"{name}_nll_sum"] = float(source[f"{name}_nll_sum"])
            values[f"{name}_tokens"] = float(source[f"{name}_tokens"])
    return Score(values)


def perfect_probe(sample: Sample) -> Prediction:
    """The oracle: retrieval heads with all mass on the copied token, every step right, text predicted exactly."""
    needle, answer = sample.gold["needle_positions"], sample.gold["answer_positions"]
    k, length = len(needle), int(sample.metadata["target_tokens"])
    data = {
        "length": length,
        "train_length": length,
        "needle_positions": needle,
        "answer_positions": answer,
        "answer_correct": [True] * k,
        "answer_nll": [0.0] * k,
        "ret_argmax": needle,
        "needle_mass": [1.0] * k,
        "ret_entropy": [0.0] * k,
        "lae": 0.0,
        "lae_norm": 0.0,
        "sink_mass": 0.0,
        "seconds": 0.0,
        "peak_rss_mb": 0.0,
        "calibration": {"length": length, "lae_ref": 0.0, "heads": []},
    }
    probe = Prediction(text=sample.gold["answers"][0], data=data)
    if not sample.metadata.get("has_text"):
        return probe
    text = {"length": length, "train_length": length, "text_nll_sum": 0.0, "text_tokens": length - 1}
    return Prediction(parts=(probe, Prediction(data={**text, "tail_nll_sum": 0.0, "tail_tokens": length - 1})))


METRICS = [
    mean("em", "passkey_em"),
    mean("em_in_window", "passkey_em_in_window"),
    mean("em_beyond_window", "passkey_em_beyond_window"),
    mean("step_acc", "answer_step_acc"),
    mean("npb"),
    mean("hit", "npb_hit"),
    mean("npb_signed"),
    mean("needle_mass"),
    mean("lae"),
    mean("rho_train"),
    mean("rho_ref"),
    mean("rho_ref_length"),
    mean("lae_ret"),
    mean("lae_norm"),
    mean("sink_mass"),
    custom("needle_ppl", ("answer_nll_sum", "answer_tokens"), pm.ppl_reduce),
    custom("needle_ppl_median", ("answer_ppl",), pm.median_reduce),
    custom("needle_ppl_clipped", ("answer_nll_clipped_sum", "answer_tokens"), pm.ppl_reduce),
    custom("needle_ppl_rest", ("answer_nll_rest_sum", "answer_rest_tokens"), pm.ppl_reduce),
    *(mean(f"answer_nll_k{k}", f"needle_nll_k{k}") for k in range(1, pm.MAX_STEPS + 1)),
    custom("ppl", ("text_nll_sum", "text_tokens"), pm.ppl_reduce),
    custom("tail_ppl", ("tail_nll_sum", "tail_tokens"), pm.ppl_reduce),
    custom("haystack_ppl", ("haystack_nll_sum", "haystack_tokens"), pm.ppl_reduce),
    mean("seconds"),
    mean("peak_rss_mb"),
    mean("length_ratio", "l_over_ltrain"),
    mean("pe_clamped_share"),
]


@task(
    name="posprobe",
    version="2",
    requires=any_of("attention"),
    default_lengths=[128, 256, 512, 1024, 2048],
    description="Passkey position probe: EM, NPB, LAE (exact attention rows) by length and depth quintile",
)
def posprobe(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    needles: int = 60,
    calibration_length: int = 128,
    calibration_needles: int = 40,
    text_every: int = TEXT_EVERY,
) -> Task:
    check_lengths(lengths, calibration_length)
    if text_every < 0:
        raise ValueError(f"posprobe text_every={text_every}: expected 0 (no needle-free texts) or a positive integer")
    state: dict = {}

    def builder() -> ProbeBuilder:
        if tokenizer is None:
            raise ValueError("posprobe sequences are built in the evaluated model's tokenizer; none was given")
        if "builder" not in state:
            state["builder"] = ProbeBuilder(TokenizerCodec(tokenizer), seed, needles, ToyLanguage(), text_every)
        return state["builder"]

    def samples() -> Iterator[Sample]:
        for sample, doc in builder().samples(lengths):
            state.setdefault("docs", {})[sample.id] = doc
            yield sample

    def prompt(sample: Sample) -> Request | list[Request]:
        if "calibration" not in state:
            state["calibration"] = builder().calibration(calibration_length, calibration_needles)
        length, index = int(sample.metadata["target_tokens"]), int(sample.metadata["needle_index"])
        doc = state.get("docs", {}).get(sample.id)
        if doc is None:  # a prompt asked for without the dataset pass: rebuild that length
            doc = builder().docs(length)[index]
        extra = {**probe_inputs(doc), "calibration": state["calibration"]}
        probe = Request(sample.id, doc.text, sample.context, sample.question, max_new_tokens=0, extra=extra)
        if not sample.metadata["has_text"]:
            return probe
        ids = builder().text_ids(length, index)
        text = builder().codec.decode(ids)
        return [probe, Request(sample.id, text, text, "", max_new_tokens=0, extra={"input_ids": ids, "text": True})]

    return Task(dataset=samples, prompt=prompt, scorer=probe_score, metrics=METRICS, oracle=perfect_probe)
