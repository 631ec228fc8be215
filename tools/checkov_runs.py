"""Several checkov command lines for the price of one start-up (tests/fidelity/test_checkov.py).

Starting checkov costs about 2.5 s of CPU (it imports every framework it knows) and a scan of this
stack's manifests a fraction of that. So this imports checkov once, then runs each command line in a
fork of that process: each run is `checkov ARGS...` as the CLI runs it (same argument and config-file
handling, same exit code), and none sees another's state (checkov keeps parsed files between runs in
one process, so a second run in the same process would report the first one's files).

Run it with the Python that has checkov (`.venv-scan/bin/python`), from the directory checkov should
run in. Reads {name: [arg, ...]} as JSON on stdin; prints {name: {"returncode", "stdout", "stderr"}}.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import traceback

# checkov's import makes millions of objects that all live to the end: the cyclic collector would walk
# them again and again while they are made (about a quarter of a second). It runs again after the
# import, with what the import made frozen out of its way (and out of the forks' copy-on-write pages).
gc.disable()
from checkov.main import Checkov  # noqa: E402

gc.freeze()
gc.enable()


def run_forked(args: list[str], scratch: str) -> dict[str, object]:
    out_path, err_path = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: one checkov run, its output in two files, then exit without cleanup
        code = 70
        try:
            with open(out_path, "w") as out, open(err_path, "w") as err:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.argv = ["checkov", *args]
                try:
                    code = Checkov(args).run() or 0
                except SystemExit as stop:
                    code = stop.code if isinstance(stop.code, int) else 1
                except BaseException:  # noqa: BLE001 - said on stderr, exit 70: the test shows it
                    traceback.print_exc()
                sys.stdout.flush()
                sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    with open(out_path) as out, open(err_path) as err:
        return {"returncode": os.waitstatus_to_exitcode(status), "stdout": out.read(), "stderr": err.read()}


def main() -> None:
    runs: dict[str, list[str]] = json.load(sys.stdin)
    results = {}
    for name, args in runs.items():
        with tempfile.TemporaryDirectory() as scratch:
            results[name] = run_forked(args, scratch)
    json.dump(results, sys.stdout)
    sys.stdout.flush()
    # Without the interpreter's shutdown: tearing down checkov's ~4000 modules (and its atexit hooks,
    # for a Checkov this process never ran) costs about half a second of CPU and changes nothing here.
    os._exit(0)


if __name__ == "__main__":
    main()
