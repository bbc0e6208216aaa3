"""A model folder's config, generation config, tokenizer files and chat template are part of its identity."""

from __future__ import annotations

import json
import shutil

from longctx_eval.models.model_files import (
    ABSENT,
    MARKER,
    PACKAGED_MINILM_FILES,
    SETTING,
    changed_files,
    embedder_files,
    folder_files,
    identity_files,
)


def _folder(root, name="m"):
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text('{"rope_theta": 10000.0}')
    (folder / "tokenizer_config.json").write_text('{"eos_token": "</s>"}')
    (folder / "generation_config.json").write_text('{"eos_token_id": 2}')
    (folder / "model.safetensors").write_bytes(b"weights are hashed elsewhere")
    (folder / "README.md").write_text("not read by transformers")
    return folder


def test_files_are_hashed_by_content_not_path(tmp_path):
    a, b = _folder(tmp_path, "a"), _folder(tmp_path, "b")
    assert identity_files(a) == identity_files(b)
    assert sorted(identity_files(a)) == ["config.json", "generation_config.json", "tokenizer_config.json"]
    (b / "config.json").write_text('{"rope_theta": 10000.0, "rope_scaling": {"type": "linear", "factor": 4}}')
    assert changed_files({SETTING: identity_files(a)}, {SETTING: identity_files(b)}) == ["config.json"]
    (b / "chat_template.jinja").write_text("{{ messages }}")
    assert "chat_template.jinja" in changed_files({SETTING: identity_files(a)}, {SETTING: identity_files(b)})


def test_a_chat_template_inside_tokenizer_config_is_covered(tmp_path):
    folder = _folder(tmp_path)
    before = identity_files(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": "{{ messages }}"}))
    assert changed_files({SETTING: before}, {SETTING: identity_files(folder)}) == ["tokenizer_config.json"]


def test_a_hub_id_has_no_files_here(tmp_path):
    assert identity_files("HuggingFaceTB/SmolLM2-135M-Instruct") == {}
    assert identity_files(tmp_path / "missing") == {}


def test_files_our_conversion_wrote_are_vouched_for_until_edited(tmp_path):
    folder = _folder(tmp_path)
    (folder / MARKER).write_text(json.dumps({"gguf_sha256": "0" * 64, "files": folder_files(folder)}))
    assert identity_files(folder) == {}  # the GGUF's hash names them
    (folder / "config.json").write_text('{"rope_theta": 40000.0}')
    (folder / "generation_config.json").unlink()
    assert identity_files(folder) == {
        "config.json": folder_files(folder)["config.json"],
        "generation_config.json": ABSENT,
    }
    (folder / MARKER).write_text(json.dumps({"gguf_sha256": "0" * 64}))  # a marker that records nothing
    assert sorted(identity_files(folder)) == ["config.json", "tokenizer_config.json"]


def test_the_packaged_models_keep_their_identity_while_their_files_are_the_shipped_ones(tmp_path):
    from longctx_eval.models.assets import minilm_path, smollm2_dir

    assert embedder_files("minilm", minilm_path()).identity == {}
    assert identity_files(smollm2_dir()) == {}  # its marker records the files the conversion wrote
    copy = tmp_path / "minilm"
    shutil.copytree(minilm_path(), copy)
    assert embedder_files("retriever-folder", copy).identity == PACKAGED_MINILM_FILES  # any other folder: all
    (copy / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert list(identity_files(copy, embedder=True, vouched=PACKAGED_MINILM_FILES)) == ["1_Pooling/config.json"]


def test_hf_identity_follows_the_config_not_the_install_path(tmp_path, tiny_llama_dir):
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    copy = tmp_path / "elsewhere" / tiny_llama_dir.name
    shutil.copytree(tiny_llama_dir, copy)
    a, b = (load_model(parse_spec(f"hf:{d}")) for d in (tiny_llama_dir, copy))
    assert "config.json" in a.meta.settings[SETTING] and "tokenizer.json" in a.meta.settings[SETTING]
    assert a.meta.identity_sha256 == b.meta.identity_sha256
    original = (copy / "config.json").read_text()
    (copy / "config.json").write_text(json.dumps({**json.loads(original), "rope_theta": 40000.0}))
    c = load_model(parse_spec(f"hf:{copy}"))
    assert c.meta.sha256 == b.meta.sha256  # the same weights...
    assert c.meta.identity_sha256 != b.meta.identity_sha256 and c.identity != b.identity  # ...another model
    (copy / "config.json").write_text(original)
    tok = json.loads((copy / "tokenizer_config.json").read_text())
    (copy / "tokenizer_config.json").write_text(json.dumps({**tok, "chat_template": "{{ messages }}"}))
    d = load_model(parse_spec(f"hf:{copy}"))
    assert changed_files(b.meta.settings, d.meta.settings) == ["tokenizer_config.json"]
    assert d.meta.identity_sha256 != b.meta.identity_sha256


def test_a_dense_retriever_folder_is_keyed_by_its_pooling_and_tokenizer_files(tmp_path):
    from longctx_eval.models.assets import minilm_path
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    copy = tmp_path / "embedder"
    shutil.copytree(minilm_path(), copy)
    before = load_model(parse_spec(f"retriever:{copy}"))
    assert "1_Pooling/config.json" in before.meta.settings[SETTING]
    assert before.indexers[0].identity()["files"] == before.meta.settings[SETTING]  # index and vector cache keys
    pooling = json.loads((copy / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (copy / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    after = load_model(parse_spec(f"retriever:{copy}"))
    assert changed_files(before.meta.settings, after.meta.settings) == ["1_Pooling/config.json"]
    assert after.meta.identity_sha256 != before.meta.identity_sha256
    assert after.indexers[0].namespace() != before.indexers[0].namespace()
