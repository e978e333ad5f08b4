"""tessera-run: starts N ranks of a Python script that uses tessera.comm (docs/launching.md).

    tessera-run -n 4 train.py --lr 0.1                # MPI: through the mpich wheel's mpiexec
    tessera-run -n 2 --backend nccl train.py          # NCCL: one process per rank, RANK/WORLD_SIZE/LOCAL_RANK
                                                      # and TESSERA_RENDEZVOUS in their environment

The exit status is the first failing rank's (a rank killed by signal S counts as 128 + S), else 0. When a rank
fails, the others get --grace seconds to finish, then are terminated (SIGTERM, then SIGKILL 5 s later), so a
job whose peer died never hangs the launcher. A script that is not there is refused (exit status 2) before any
rank starts. Under mpiexec, which does not stop the others itself, each rank
runs inside a small supervisor (this module with --rank-wrapper) that reports its exit status to the launcher
over a local socket and terminates the rank when told to, or when the launcher goes away.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .errors import ToolError, tool_main


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel installs it into the environment's bin/), else PATH's."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        raise ToolError("no mpiexec: install the mpich wheel (pip install mpich), or use --backend nccl")
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def supervise(procs: list[subprocess.Popen], grace: float) -> int:
    """Waits for every rank; once one fails, the others have `grace` seconds, then are terminated."""
    first_failure, deadline, terminated_at = 0, None, None
    while any(p.poll() is None for p in procs):
        for p in procs:
            code = p.poll()
            if code not in (None, 0) and not first_failure:
                first_failure, deadline = _status(code), time.monotonic() + grace
        now = time.monotonic()
        if deadline is not None and now >= deadline and terminated_at is None:
            terminated_at = now
            for p in procs:
                if p.poll() is None:
                    _terminate(p.pid, signal.SIGTERM)
        if terminated_at is not None and now >= terminated_at + 5:
            for p in procs:
                if p.poll() is None:
                    _terminate(p.pid, signal.SIGKILL)
        time.sleep(0.05)
    if not first_failure:
        first_failure = next((_status(p.returncode) for p in procs if p.returncode), 0)
    return first_failure


def _terminate(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:  # it ended meanwhile
        pass


def run_mpi(n: int, command: list[str], env: dict, grace: float) -> int:
    """mpiexec -n N, each rank under --rank-wrapper; a failure reported by one stops the others after `grace`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(n)
        env = dict(env, TESSERA_RUN_CONTROL=f"127.0.0.1:{server.getsockname()[1]}")
        job = subprocess.Popen([mpiexec(), "-n", str(n), sys.executable, "-m", "tessera.tools.run", "--rank-wrapper",
                                *command], env=env, start_new_session=True)
        ranks, first_failure, deadline, told_at = [], 0, None, None
        try:
            while job.poll() is None:
                readable, _, _ = select.select([server, *ranks], [], [], 0.05)
                for r in readable:
                    if r is server:
                        ranks.append(server.accept()[0])
                        continue
                    try:
                        data = r.recv(64)
                    except OSError:  # the wrapper died (killed with its rank)
                        data = b""
                    if not data:
                        ranks.remove(r)
                        r.close()
                    elif int(data.split()[0]) and not first_failure:
                        first_failure, deadline = int(data.split()[0]), time.monotonic() + grace
                now = time.monotonic()
                if deadline is not None and now >= deadline and told_at is None:
                    told_at = now
                    for r in ranks:
                        try:
                            r.sendall(b"stop\n")
                        except OSError:  # it ended meanwhile
                            pass
                if told_at is not None and now >= told_at + 10:  # the wrappers did not end their ranks
                    _terminate(job.pid, signal.SIGKILL)
        finally:
            for r in ranks:  # the wrappers end their ranks once the launcher is gone
                r.close()
            if job.poll() is None:
                _terminate(job.pid, signal.SIGKILL)
                job.wait()
        return first_failure or _status(job.returncode)


def rank_wrapper(command: list[str]) -> int:
    """One rank under mpiexec: runs `command`, reports its exit status to the launcher, stops it when told."""
    host, port = os.environ["TESSERA_RUN_CONTROL"].rsplit(":", 1)
    control = socket.create_connection((host, int(port)), timeout=60)
    # the rank talks to mpiexec through PMI; a descriptor it is handed must reach it
    pmi_fd = os.environ.get("PMI_FD", "")
    child = subprocess.Popen(command, start_new_session=True, pass_fds=(int(pmi_fd),) if pmi_fd.isdigit() else ())
    watched, stopped_at = [control], None
    while child.poll() is None:
        readable, _, _ = select.select(watched, [], [], 0.05)
        if readable:
            watched = []  # told to stop, or the launcher is gone: either way, stop
            stopped_at = time.monotonic()
            _terminate(child.pid, signal.SIGTERM)
        if stopped_at is not None and time.monotonic() >= stopped_at + 5:
            _terminate(child.pid, signal.SIGKILL)
    code = _status(child.returncode)
    try:
        control.sendall(f"{code}\n".encode())
    except OSError:  # the launcher is gone
        pass
    control.close()
    return code


def spawn(n: int, command: list[str], env: dict, grace: float) -> int:
    """N processes of `command`, each in a session of its own (so that terminating one takes its children)."""
    port = _free_port()
    procs = []
    try:
        for rank in range(n):
            e = dict(env, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n),
                     TESSERA_RENDEZVOUS=f"127.0.0.1:{port}")
            procs.append(subprocess.Popen(command, env=e, start_new_session=True))
        return supervise(procs, grace)
    finally:
        for p in procs:  # interrupted (Ctrl-C): nothing is left running
            if p.poll() is None:
                _terminate(p.pid, signal.SIGKILL)
                p.wait()


def _unrunnable(script: str) -> str | None:
    """Why `python script` could not start (what Python runs: a file, or a directory or zip with __main__.py)."""
    path = Path(script)
    if path.is_file() or (path / "__main__.py").is_file():
        return None
    if path.is_dir():
        return f"{script}: is a directory without __main__.py, not a script"
    return f"{script}: no such script"


@tool_main("tessera-run")
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tessera-run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    p.add_argument("--backend", choices=["mpi", "nccl"], default="mpi",
                   help="mpi: start the ranks with mpiexec (default); nccl: start them here, with the rendezvous "
                        "in their environment")
    p.add_argument("--grace", type=float, default=10.0,
                   help="seconds the other ranks get after one fails, before they are terminated (default 10)")
    p.add_argument("script", help="the Python script each rank runs")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rank-wrapper"]:
        return rank_wrapper(argv[1:])
    args = p.parse_args(argv)
    if args.nproc < 1:
        raise ToolError(f"-n must be at least 1, got {args.nproc}")
    if args.grace < 0:
        raise ToolError(f"--grace must be >= 0, got {args.grace}")
    problem = _unrunnable(args.script)
    if problem:  # said once here, rather than as a traceback from each of N ranks
        print(f"tessera-run: error: {problem}", file=sys.stderr)
        return 2
    env = dict(os.environ, TESSERA_COMM_BACKEND=args.backend)
    command = [sys.executable, args.script, *args.args]
    if args.backend == "mpi":
        return run_mpi(args.nproc, command, env, args.grace)
    return spawn(args.nproc, command, env, args.grace)


if __name__ == "__main__":
    sys.exit(main())
