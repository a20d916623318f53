"""``python -m magics.runner <bundle>``: run a ``%%gpujob`` cell in one pod as the notebook would have run it.

Every pod runs this with the notebook's interpreter. It restores the notebook's working directory and import
path, binds the pushed values, executes the cell as ``__main__`` (so ``if __name__ == "__main__"`` and pickling of
classes defined in the cell behave as in a script), and on rank 0 sends the pulled values back.

Exit codes: the cell's own ``SystemExit`` code if it calls ``sys.exit``; 1 if the cell raised (the traceback is
in the pod's log); 3 if it ran but a ``--pull`` value could not be written (the reason is in the log and in
``pull/_result.json``); 0 otherwise. Only the bundle and the standard library are used, so a broken notebook
environment still gets a readable error.
"""

from __future__ import annotations

import os
import sys
import traceback
import types
from pathlib import Path

from .bundle import CELL, Manifest, load_pushed, write_pulled

EXIT_CELL_RAISED = 1
EXIT_PULL_FAILED = 3


def run(bundle: Path) -> int:
    manifest = Manifest.load(bundle)
    os.chdir(manifest.cwd)
    # The notebook's path first, then whatever this interpreter added that the notebook did not have. A kernel
    # imports from its working directory; so does the job, even if the recorded path did not say so.
    path = list(manifest.sys_path)
    if "" not in path and manifest.cwd not in path:
        path.insert(0, manifest.cwd)
    sys.path[:] = path + [p for p in sys.path if p not in path]
    source_path = bundle / manifest.source_name
    source = source_path.read_text()
    module = types.ModuleType("__main__")
    module.__file__ = str(source_path)
    namespace = module.__dict__
    namespace["__builtins__"] = __builtins__
    namespace.update(load_pushed(bundle, manifest))
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    sys.argv = [str(source_path)]
    try:
        code = compile(source, str(source_path), "exec")
        exec(code, namespace)
    except SystemExit as exc:
        code_ = exc.code
        if code_ is None:
            return 0
        if isinstance(code_, int):
            return code_
        print(code_, file=sys.stderr)
        return 1
    except BaseException:
        # Drop the runner's own frames: the user should see their cell's lines, as in the notebook.
        etype, value, tb = sys.exc_info()
        while tb is not None and tb.tb_frame.f_code.co_filename != str(source_path):
            tb = tb.tb_next
        traceback.print_exception(etype, value, tb)
        return EXIT_CELL_RAISED
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    if manifest.pull and _rank() == 0:
        sys.modules["__main__"] = module  # pickling classes defined in the cell needs them findable
        result = write_pulled(bundle, manifest.pull, namespace)
        for name, why in result.errors.items():
            print(f"shoal: --pull {name}: {why}", file=sys.stderr)
        if result.errors:
            return EXIT_PULL_FAILED
    return 0


def _rank() -> int:
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m magics.runner <bundle directory>", file=sys.stderr)
        return 2
    bundle = Path(args[0])
    if not (bundle / CELL).exists():
        print(f"magics.runner: {bundle} is not a job bundle (no {CELL})", file=sys.stderr)
        return 2
    return run(bundle)


if __name__ == "__main__":
    sys.exit(main())
