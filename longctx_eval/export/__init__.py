"""Our tasks as other harnesses' tasks: `longctx-eval export lm-eval|inspect TASK --dataset BUILT --out ...`.

One module per target (`lm_eval_task.py`, `inspect_task.py`) writes files that read a dataset built by
`longctx-eval build` and call, at evaluation time, the task's own prompt and scorer through
`data_builders.interop` (the written files import it; nothing here imports data_builders or tasks).
"""
