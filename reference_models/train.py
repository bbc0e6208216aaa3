"""Train the position-encoding reference models tiny-rope, tiny-alibi, tiny-learned (pinned, seeded, 1 CPU thread).

    nice -n 10 .venv/bin/python reference_models/train.py --model all --out reference_models

All three are the same 2-layer Llama (d=128, 4 heads, SwiGLU 256, tied embeddings, vocab 128) trained in a
128-token window on the toy language of `data_builders/posprobe/language.py`: 80% passkey sequences at lengths
uniform over 32..128 (right-padded, so the question, needle and answer positions carry no absolute-position
cue; `data_builders/posprobe/training.py`; answer tokens weighted x10 in the loss), 20% plain toy text of 128
tokens. tiny-rope uses RoPE (theta 1e4); tiny-alibi and tiny-learned disable RoPE (`proportional`,
partial_rotary_factor 0); tiny-alibi adds ALiBi slopes 2^-2..2^-8 in the attention function, tiny-learned a
learned table of 128 position vectors added to the token embeddings. Passkey accuracy at 128 tokens must
reach 0.95 before anything is saved.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from data_builders.posprobe.language import (  # noqa: E402
    LANGUAGE_SEED,
    QUESTION,
    ToyCodec,
    ToyLanguage,
    build_passkey,
    toy_vocabulary,
)
from data_builders.posprobe.training import MIN_LENGTH, training_batch  # noqa: E402
from longctx_eval.models.posprobe.alibi_attention import alibi_slopes  # noqa: E402
from longctx_eval.models.posprobe.attention_rows import ATTENTION_NAME  # noqa: E402
from longctx_eval.models.posprobe.learned_position import (  # noqa: E402
    BEYOND_TABLE,
    add_learned_positions,
    save_learned_positions,
)
from longctx_eval.models.posprobe.learned_position import CONFIG_KEY as LEARNED_KEY  # noqa: E402

TRAIN_LENGTH = 128
BATCH = 32
PASSKEY_SHARE = 0.8
ANSWER_WEIGHT = 10.0
EVAL_NEEDLES = 200
REQUIRED_ACCURACY = 0.95
DATA = f"varied-length-{MIN_LENGTH}..{TRAIN_LENGTH}-right-padded"
"""The training-data scheme (enters the checkpoint key and reference.json)."""


@dataclass(frozen=True)
class Recipe:
    """One reference model: its position encoding and its pinned schedule of (steps, peak lr) stages."""

    name: str
    posenc: str
    stages: tuple[tuple[int, float], ...]
    seed: int


EXTRA_STAGE = (500, 1e-3)
MAX_EXTRA_STAGES = 8
"""Run after the pinned stages only while 1x passkey accuracy is below the bar (deterministic, like the rest)."""
CHECKPOINT_EVERY = 100

RECIPES = {
    "rope": Recipe("tiny-rope", "rope", ((2500, 3e-3),), seed=1),
    "alibi": Recipe("tiny-alibi", "alibi", ((2500, 3e-3),), seed=1),
    "learned": Recipe("tiny-learned", "learned", ((2500, 3e-3),), seed=1),
}


def model_config(posenc: str):  # noqa: ANN201
    """The LlamaConfig of a reference model; only the position encoding differs between them.

    alibi and learned disable RoPE (`proportional`, partial_rotary_factor 0: cos = 1, sin = 0); alibi adds
    `alibi_slopes` (applied by the `longctx_rows` attention function), learned a table of TRAIN_LENGTH
    position vectors added to the token embeddings (`longctx_eval/models/posprobe/learned_position.py`).
    """
    from transformers import LlamaConfig

    codec = ToyCodec()
    extra = {}
    if posenc == "rope":
        rope = {"rope_type": "default", "rope_theta": 10_000.0}
    else:
        rope = {"rope_type": "proportional", "rope_theta": 10_000.0, "partial_rotary_factor": 0.0}
        if posenc == "alibi":
            extra["alibi_slopes"] = alibi_slopes(4)
        else:
            extra[LEARNED_KEY] = TRAIN_LENGTH
    return LlamaConfig(
        vocab_size=len(codec.words),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=TRAIN_LENGTH,
        rope_parameters=rope,
        tie_word_embeddings=True,
        bos_token_id=codec.vocab["<bos>"],
        eos_token_id=codec.vocab["<pad>"],
        pad_token_id=codec.vocab["<pad>"],
        **extra,
    )


def make_batch(rng: np.random.Generator, codec: ToyCodec, lang: ToyLanguage) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, loss weights) of BATCH sequences of varied length, right-padded to TRAIN_LENGTH (see posprobe_training)."""
    b = training_batch(rng, codec, lang, BATCH, TRAIN_LENGTH, PASSKEY_SHARE, ANSWER_WEIGHT, MIN_LENGTH)
    return torch.from_numpy(b.ids), torch.from_numpy(b.weights)


def passkey_accuracy(model, codec: ToyCodec, lang: ToyLanguage, n: int, seed: int) -> tuple[float, float]:  # noqa: ANN001
    """(exact match, answer-digit accuracy) on n needles at stratified depths, teacher-forced."""
    rng = np.random.default_rng(seed)
    docs = [build_passkey(codec, [codec.vocab["<bos>"]], TRAIN_LENGTH, (i + 0.5) / n, rng, lang) for i in range(n)]
    exact, digits = 0, 0
    with torch.no_grad():
        for start in range(0, n, 50):
            chunk = docs[start : start + 50]
            logits = model(torch.tensor([d.ids for d in chunk])).logits
            for row, d in zip(logits, chunk, strict=True):
                pred = row[d.query_positions].argmax(-1).tolist()
                ok = [p == d.ids[a] for p, a in zip(pred, d.answer_positions, strict=True)]
                exact += all(ok)
                digits += sum(ok)
    k = len(docs[0].answer_positions)
    return exact / n, digits / (n * k)


def train_step(model, opt, batch: tuple[torch.Tensor, torch.Tensor], lr: float) -> float:  # noqa: ANN001
    """One AdamW step on the weighted next-token loss; returns the loss."""
    ids, w = batch
    model.train()
    for group in opt.param_groups:
        group["lr"] = lr
    logits = model(ids).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    loss = (nll * w[:, :-1]).sum() / w[:, :-1].sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def lr_at(step: int, steps: int, peak: float, warmup: int = 50) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * t)))


def train(recipe: Recipe, log, cache: Path | None = None) -> tuple[torch.nn.Module, dict]:  # noqa: ANN001
    """Train one reference model from its seed (resuming from `cache` checkpoints); returns model and record."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(recipe.seed)
    rng = np.random.default_rng(recipe.seed)
    codec, lang = ToyCodec(), ToyLanguage()
    model = LlamaForCausalLM._from_config(model_config(recipe.posenc), attn_implementation=ATTENTION_NAME)
    if recipe.posenc == "learned":  # drawn from the torch generator after the Llama's own initialisation
        add_learned_positions(model, TRAIN_LENGTH)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.stages[0][1], betas=(0.9, 0.95), weight_decay=0.05)
    ckpt = _checkpoint_path(cache, recipe)
    at = _resume(ckpt, model, opt, rng, log)
    t0 = time.process_time() - at["cpu"]
    step = at["step"]

    def accuracy(n: int, seed: int) -> tuple[float, float]:
        model.eval()
        return passkey_accuracy(model, codec, lang, n, seed=seed + recipe.seed)

    def passes() -> bool:
        em, _ = accuracy(EVAL_NEEDLES, 20_000)
        log(f"{recipe.name}: passkey {em:.3f} at step {step}")
        return em >= REQUIRED_ACCURACY

    for stage, (steps, peak) in enumerate(_stages(recipe, passes, at["stage"], at["i"])):
        if stage < at["stage"]:
            continue
        for i in range(at["i"] if stage == at["stage"] else 0, steps):
            loss = train_step(model, opt, make_batch(rng, codec, lang), lr_at(i, steps, peak))
            step += 1
            if step % 100 == 0:
                em, dig = accuracy(64, 10_000)
                log(f"{recipe.name} stage {stage} step {step} loss {loss:.4f} passkey {em:.3f} digits {dig:.3f}")
            if ckpt is not None and (step % CHECKPOINT_EVERY == 0 or i == steps - 1):
                cpu = time.process_time() - t0
                _save_checkpoint(ckpt, model, opt, rng, {"stage": stage, "i": i + 1, "step": step, "cpu": cpu})
    model.eval()
    em, dig = passkey_accuracy(model, codec, lang, EVAL_NEEDLES, seed=20_000 + recipe.seed)
    record = {
        "passkey_accuracy_1x": em,
        "answer_digit_accuracy_1x": dig,
        "eval_needles": EVAL_NEEDLES,
        "steps": step,
        "cpu_seconds": round(time.process_time() - t0, 1),
    }
    log(f"{recipe.name} final passkey {em:.3f} digits {dig:.3f} after {step} steps")
    return model, record


def _stages(recipe: Recipe, passes, resume_stage: int, resume_i: int):  # noqa: ANN001, ANN202
    """The pinned stages, then extra stages while the model is still below the passkey bar.

    An extra stage a checkpoint shows was already started is not re-decided on resumption.
    """
    yield from recipe.stages
    for extra in range(MAX_EXTRA_STAGES):
        stage = len(recipe.stages) + extra
        started = stage < resume_stage or (stage == resume_stage and resume_i > 0)
        if not started and passes():
            return
        yield EXTRA_STAGE


def _checkpoint_path(cache: Path | None, recipe: Recipe) -> Path | None:
    if cache is None:
        return None
    pinned = (recipe, EXTRA_STAGE, BATCH, PASSKEY_SHARE, ANSWER_WEIGHT, LANGUAGE_SEED, QUESTION, DATA)
    key = hashlib.sha256(repr(pinned).encode()).hexdigest()[:12]
    return cache / f"{recipe.name}-{key}.pt"


def _save_checkpoint(path: Path, model, opt, rng: np.random.Generator, at: dict) -> None:  # noqa: ANN001
    """Everything the next step depends on, so a resumed run is bit-identical to an uninterrupted one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state, **at}, tmp)
    tmp.replace(path)


def _resume(path: Path | None, model, opt, rng: np.random.Generator, log) -> dict:  # noqa: ANN001
    if path is None or not path.is_file():
        return {"stage": 0, "i": 0, "step": 0, "cpu": 0.0}
    state = torch.load(path, weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    rng.bit_generator.state = state["rng"]
    log(f"resumed from {path} at step {state['step']}")
    return {k: state[k] for k in ("stage", "i", "step", "cpu")}


def save(model: torch.nn.Module, recipe: Recipe, record: dict, out: Path) -> Path:
    """Write weights, config, tokenizer and reference.json into out/<name>."""
    import transformers

    folder = out / recipe.name
    folder.mkdir(parents=True, exist_ok=True)
    learned = recipe.posenc == "learned"
    if learned:  # the table goes to its own file; model.safetensors stays a plain Llama
        state = {k: v for k, v in model.state_dict().items() if ".learned_positions." not in k}
        model.save_pretrained(folder, state_dict=state)
        save_learned_positions(model, folder)
    else:
        model.save_pretrained(folder)
    hf_tokenizer().save_pretrained(folder)
    meta = {
        "name": recipe.name,
        "posenc": recipe.posenc,
        "train_length": TRAIN_LENGTH,
        "capabilities": ["attention"],
        "retrieval_heads": {"threshold": 0.5, "max_heads": 4},
        **(
            {
                "learned_positions": {
                    "table": TRAIN_LENGTH,
                    "beyond_table": BEYOND_TABLE,
                    "note": f"positions >= {TRAIN_LENGTH} have no trained vector; the suite clamps them to "
                    f"{TRAIN_LENGTH - 1} and records the clamped share per prediction (pe_clamped_share)",
                }
            }
            if learned
            else {}
        ),
        "recipe": {
            "seed": recipe.seed,
            "stages": [list(s) for s in recipe.stages],
            "extra_stage": list(EXTRA_STAGE),
            "batch": BATCH,
            "data": DATA,
            "passkey_share": PASSKEY_SHARE,
            "answer_weight": ANSWER_WEIGHT,
        },
        "environment": {"torch": torch.__version__, "transformers": transformers.__version__, "threads": 1},
        **record,
    }
    (folder / "reference.json").write_text(json.dumps(meta, indent=2) + "\n")
    return folder


def hf_tokenizer():  # noqa: ANN201
    """The toy word-level tokenizer as a transformers fast tokenizer (adds <bos> like ToyCodec's callers do)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(toy_vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)]
    )
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<pad>", pad_token="<pad>", unk_token="<unk>"
    )


def main(argv: list[str] | None = None) -> int:
    """Train the chosen references; exit 1 (saving nothing) when one misses the passkey bar."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=[*RECIPES, "all"], default="all")
    p.add_argument("--out", type=Path, default=REPO / "reference_models")
    p.add_argument("--cache", type=Path, default=REPO / "reference_models" / ".cache", help="resumable checkpoints")
    p.add_argument("--no-cache", action="store_true", help="train from scratch without checkpoints")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    for key in RECIPES if args.model == "all" else [args.model]:
        recipe = RECIPES[key]
        model, record = train(recipe, log, None if args.no_cache else args.cache)
        if record["passkey_accuracy_1x"] < REQUIRED_ACCURACY:
            log(f"FAILED: {recipe.name} passkey {record['passkey_accuracy_1x']:.3f} < {REQUIRED_ACCURACY}; not saved")
            return 1
        log(f"saved {save(model, recipe, record, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
