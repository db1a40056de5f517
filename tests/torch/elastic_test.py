"""hoop.torch.elastic end to end on one machine: three fake hosts (hooprun --spawner
"env FAKEHOST={host}"), a discovery script reading a file this test rewrites, and
elastic_worker.py on each. The worker on host c is killed: the job must go on with two workers
(round 1), then grow back to three when c is listed again (round 2), and every worker must end
with the exact weight, so no step was lost or repeated across the resets.

    elastic_test.py HOOPRUN PYTHON WORKER
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

STEPS = 300
DEADLINE_S = 150


def fail(message, output):
    print(f"FAIL: {message}\n--- job output ---\n{''.join(output)}", flush=True)
    sys.exit(1)


def main():
    hooprun, python, worker = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        hosts = os.path.join(tmp, "hosts")
        discover = os.path.join(tmp, "discover.sh")
        with open(hosts, "w") as f:
            f.write("a:1\nb:1\nc:1\n")
        with open(discover, "w") as f:
            f.write(f"#!/bin/sh\ncat {hosts}\n")
        os.chmod(discover, 0o755)
        job = subprocess.Popen(
            [hooprun, "-np", "3", "--min-np", "2", "--host-discovery-script", discover,
             "--spawner", "env FAKEHOST={host}", python, worker, str(STEPS)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output = []
        threading.Thread(target=lambda: output.extend(job.stdout), daemon=True).start()
        start = time.monotonic()

        def wait_for(pattern):
            while time.monotonic() - start < DEADLINE_S:
                for line in list(output):
                    match = re.search(pattern, line)
                    if match:
                        return match
                if job.poll() is not None and not re.search(pattern, "".join(output)):
                    time.sleep(0.2)
                    if not re.search(pattern, "".join(output)):
                        fail(f"the job ended before '{pattern}'", output)
                time.sleep(0.05)
            job.kill()
            fail(f"no '{pattern}' within {DEADLINE_S} s", output)

        victim = int(wait_for(r"READY host=c pid=(\d+)").group(1))
        os.kill(victim, signal.SIGKILL)
        wait_for(r"round 1: 2 workers on 2 hosts")
        with open(hosts, "w") as f:
            f.write("a:1\nb:1\n")
        time.sleep(1.5)
        with open(hosts, "w") as f:
            f.write("a:1\nb:1\nc:1\n")
        wait_for(r"round 2: 3 workers on 3 hosts, 1 new")
        try:
            code = job.wait(timeout=max(1, DEADLINE_S - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            job.kill()
            fail("the job did not end", output)
        time.sleep(0.2)
        done = [line for line in output if "DONE" in line]
        if code != 0:
            fail(f"hooprun exited with {code}", output)
        exact = [line for line in done if f"size 3 weight {STEPS} exact=True" in line]
        if len(exact) != 3:
            fail(f"expected 3 exact workers of size 3, got {done}", output)
        print("".join(output), end="")
        print("OK elastic_test: shrank to 2, grew back to 3, exact weights", flush=True)


if __name__ == "__main__":
    main()
