"""Module paths that moved in 0.2 keep importing for one release, each with a DeprecationWarning.

One table maps an old dotted name to its new one; a meta-path finder answers an import of an old name with
the new module itself (so `isinstance` checks, monkeypatching and module state stay shared). An old module
whose name is now a package (`longctx_eval.scoring`, once scoring.py) forwards that module's names through
`forward`, the package's lazy `__getattr__`. `data_builders` installs its own table the same way.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import CodeType, ModuleType
from typing import Any

MOVED: dict[str, str] = {
    "longctx_eval.io": "longctx_eval.atomic_io",
    "longctx_eval.run_dir": "longctx_eval.run_folder.naming",
    "longctx_eval.run_lock": "longctx_eval.run_folder.lock",
    "longctx_eval.run_paths": "longctx_eval.run_folder.paths",
    "longctx_eval.manifest": "longctx_eval.run_folder.manifest",
    "longctx_eval.predictions": "longctx_eval.run_folder.predictions",
    "longctx_eval.prediction_records": "longctx_eval.run_folder.prediction_lines",
    "longctx_eval.score_records": "longctx_eval.run_folder.score_lines",
    "longctx_eval.runner": "longctx_eval.run.runner",
    "longctx_eval.run_config": "longctx_eval.run.config",
    "longctx_eval.sampling": "longctx_eval.run.sampling",
    "longctx_eval.suite": "longctx_eval.run.suite",
    "longctx_eval.dry_run": "longctx_eval.run.dry_run",
    "longctx_eval.cost": "longctx_eval.run.cost",
    "longctx_eval.cost_estimate": "longctx_eval.run.cost_estimate",
    "longctx_eval.validate_task": "longctx_eval.run.validate_task",
    "longctx_eval.result_text": "longctx_eval.scoring.labels",
    "longctx_eval.metrics.metric_rows": "longctx_eval.scoring.rows",
    "longctx_eval.metrics.slicing": "longctx_eval.scoring.slicing",
    "longctx_eval.metrics.curve_points": "longctx_eval.scoring.curves",
    "longctx_eval.metrics.contrast_values": "longctx_eval.scoring.contrasts",
    "longctx_eval.metrics.effective_length": "longctx_eval.scoring.effective_length",
    "longctx_eval.metrics.composite": "longctx_eval.scoring.composite",
    "longctx_eval.metrics.latency": "longctx_eval.scoring.latency",
    "longctx_eval.metrics.timing": "longctx_eval.scoring.timing",
    "longctx_eval.metrics.resample": "longctx_eval.scoring.resample",
    "longctx_eval.metrics.paired_tests": "longctx_eval.scoring.paired_tests",
    "longctx_eval.paired_scores": "longctx_eval.scoring.paired_scores",
    "longctx_eval.run_comparison": "longctx_eval.scoring.comparison",
    "longctx_eval.leaderboard_merge": "longctx_eval.leaderboard.merge",
    "longctx_eval.leaderboard_render": "longctx_eval.leaderboard.markdown",
    "longctx_eval.leaderboard_breakdowns": "longctx_eval.leaderboard.breakdowns",
    "longctx_eval.leaderboard_details": "longctx_eval.leaderboard.details",
    "longctx_eval.leaderboard_noise": "longctx_eval.leaderboard.noise",
    "longctx_eval.leaderboard_serving": "longctx_eval.leaderboard.serving",
    "longctx_eval.leaderboard_significance": "longctx_eval.leaderboard.significance",
    "longctx_eval.leaderboard_site": "longctx_eval.leaderboard.site",
    "longctx_eval.plots": "longctx_eval.leaderboard.heatmaps",
    "longctx_eval.line_plots": "longctx_eval.leaderboard.line_plots",
    "longctx_eval.models.openai_adapter": "longctx_eval.models.openai.adapter",
    "longctx_eval.models.openai_client": "longctx_eval.models.openai.client",
    "longctx_eval.models.openai_limits": "longctx_eval.models.openai.limits",
    "longctx_eval.models.openai_pool": "longctx_eval.models.openai.pool",
    "longctx_eval.models.openai_prompt": "longctx_eval.models.openai.prompt",
    "longctx_eval.models.openai_reasoning": "longctx_eval.models.openai.reasoning",
    "longctx_eval.models.openai_sampling": "longctx_eval.models.openai.sampling",
    "longctx_eval.models.openai_server_tokenizer": "longctx_eval.models.openai.server_tokenizer",
    "longctx_eval.models.openai_target": "longctx_eval.models.openai.target",
    "longctx_eval.models.alibi_attention": "longctx_eval.models.posprobe.alibi_attention",
    "longctx_eval.models.attention_rows": "longctx_eval.models.posprobe.attention_rows",
    "longctx_eval.models.learned_position": "longctx_eval.models.posprobe.learned_position",
    "longctx_eval.models.posprobe_forward": "longctx_eval.models.posprobe.forward",
    "longctx_eval.models.probe_support": "longctx_eval.models.posprobe.support",
    "longctx_eval.models.rope_variants": "longctx_eval.models.posprobe.rope_variants",
    "longctx_eval.models.rag_prompt": "longctx_eval.models.rag.prompt",
    "longctx_eval.models.rag_spec": "longctx_eval.models.rag.spec",
    "longctx_eval.models.dense": "longctx_eval.models.retrieval.dense",
    "longctx_eval.models.bm25": "longctx_eval.models.retrieval.bm25",
    "longctx_eval.models.hybrid": "longctx_eval.models.retrieval.hybrid",
    "longctx_eval.models.chunk_retriever": "longctx_eval.models.retrieval.chunk_retriever",
    "longctx_eval.models.index_cache": "longctx_eval.models.retrieval.index_cache",
    "longctx_eval.models.rerank": "longctx_eval.models.rerankers",
    "longctx_eval.models.rerank_maxsim": "longctx_eval.models.retrieval.rerank_maxsim",
    "longctx_eval.models.embedding_cache": "longctx_eval.models.retrieval.embedding_cache",
    "longctx_eval.models.cache_bound": "longctx_eval.models.retrieval.cache_bound",
    "longctx_eval.models.vllm_engine": "longctx_eval.models.vllm.engine",
    "longctx_eval.models.vllm_settings": "longctx_eval.models.vllm.settings",
    "longctx_eval.cli.load": "longctx_eval.cli.load_test",
    "longctx_eval.assets": "longctx_eval.models.assets",
    "longctx_eval.text.semantic_embed": "longctx_eval.models.semantic_embed",
    "longctx_eval.models.hf_batching": "longctx_eval.models.hf.batching",
    "longctx_eval.models.hf_config": "longctx_eval.models.hf.config",
    "longctx_eval.models.hf_generate": "longctx_eval.models.hf.generate",
    "longctx_eval.models.hf_prefix_cache": "longctx_eval.models.hf.prefix_cache",
}  # end of MOVED


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the already-imported new module."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The new module, imported under its own name."""
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module already ran."""

    def get_code(self, fullname: str) -> CodeType | None:
        """The new module's code, so `python -m <old name>` still runs it."""
        spec = importlib.util.find_spec(self.new)
        loader = spec.loader if spec is not None else None
        return loader.get_code(self.new) if isinstance(loader, importlib.abc.InspectLoader) else None


class OldPathFinder(importlib.abc.MetaPathFinder):
    """Finds the old dotted names of one table."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self.table = dict(table)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old name (its module is the new one), or None for every other name."""
        new = self.table.get(fullname)
        if new is None:
            return None
        _warn(fullname, new)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install(table: Mapping[str, str]) -> None:
    """Register a finder for the old names of `table` (once per table), ahead of the path finders, so an old
    name never reaches a stale copy of its file elsewhere on the path (an editable install's finder would)."""
    if not any(isinstance(f, OldPathFinder) and f.table == dict(table) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder(table))


def forward(package: str, target: str) -> Callable[[str], Any]:
    """A package's `__getattr__` serving the names of the old module that had the package's name (now `target`)."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(target)
        if not hasattr(module, name):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        _warn(f"{package}.{name}", f"{target}.{name}")
        value = getattr(module, name)
        # Kept on the package: `from package import name` looks a name up twice (hasattr, then the import), and
        # one old name should warn once, not twice.
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
