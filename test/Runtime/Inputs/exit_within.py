"""Runs an MPI job with an injected fault and checks how soon it ends after the fault.

usage: exit_within.py SECONDS [--any-status] -- COMMAND...

Echoes the job's output (stderr merged). The clock starts at the first line containing
"fault injection" (printed by the faulty rank right before it stalls or dies) and stops
when the job exits; the job must exit non-zero within SECONDS of the fault. Start-up time
is not counted: mpirun's own start-up varies with the machine's load. A job still running
SECONDS + 60 after its start is killed. Exit status 0 when the job failed in time, else 1.

--any-status: accept the job's status 0. Open MPI 4.1's mpirun --enable-recovery reports 0
even when ranks end with MPI_Abort(70); such tests check the ranks' own messages instead.
"""
import os
import signal
import subprocess
import sys
import threading
import time


def main():
    limit = float(sys.argv[1])
    any_status = "--any-status" in sys.argv[2:sys.argv.index("--")]
    command = sys.argv[sys.argv.index("--") + 1:]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True)
    killer = threading.Timer(limit + 60, lambda: os.killpg(job.pid, signal.SIGKILL))
    killer.start()
    fault_at = None
    for raw in job.stdout:
        line = raw.decode(errors="replace")
        sys.stdout.write(line)
        if fault_at is None and "fault injection" in line:
            fault_at = time.monotonic()
    status = job.wait()
    ended = time.monotonic()
    killer.cancel()
    if fault_at is None:
        print("exit_within: no fault injection line in the output")
        return 1
    elapsed = ended - fault_at
    verdict = "ok" if (status != 0 or any_status) and elapsed <= limit else "FAILED"
    print(f"exit_within: {verdict}: exit status {status}, {elapsed:.1f} s after the fault "
          f"(limit {limit:g} s)")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
