"""`--push-to-hub`: upload a built dataset folder with `huggingface_hub` (online users only)."""

from __future__ import annotations

import re
from pathlib import Path

from longctx_eval.errors import ConfigError, PrerequisiteError

_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")


def _later(folder: Path, repo_id: str) -> str:
    return f"the dataset is built in {folder}; push it later with `hf upload {repo_id} {folder} --repo-type dataset`"


def check_hub(repo_id: str) -> None:
    """Fail before a long build when the repo id is malformed, the Hub is switched off or there is no token."""
    if not _REPO_ID.match(repo_id):
        raise ConfigError(f"--push-to-hub {repo_id!r}: expected a repo id such as user/my-dataset")
    from huggingface_hub import constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise PrerequisiteError(
            f"--push-to-hub {repo_id}: the Hugging Face Hub is switched off here (HF_HUB_OFFLINE=1); "
            "build without --push-to-hub, or unset HF_HUB_OFFLINE and log in (`hf auth login`)"
        )
    if not get_token():
        raise PrerequisiteError(
            f"--push-to-hub {repo_id}: not logged in to the Hugging Face Hub; run `hf auth login` or set HF_TOKEN"
        )


def push_to_hub(folder: Path, repo_id: str, *, private: bool = False) -> str:
    """Create the dataset repo if needed and upload README.md and data/; returns the dataset's URL."""
    check_hub(repo_id)
    from huggingface_hub import HfApi

    try:
        api = HfApi()
        api.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=private)
        api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            repo_type="dataset",
            allow_patterns=["README.md", "data/**"],
            commit_message="longctx-eval build",
        )
    except Exception as exc:  # network, auth or Hub errors alike: one line, and the built files stay
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        why = f"{type(exc).__name__}: {first}"
        raise PrerequisiteError(f"--push-to-hub {repo_id} failed ({why}); {_later(folder, repo_id)}") from exc
    return f"{api.endpoint}/datasets/{repo_id}"
