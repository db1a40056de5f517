"""hoop.tensorflow's failures: each one an exception naming its cause, on every rank, and no
hang.

    errors_test.py mismatch   (2 ranks) shapes and dtypes that differ across ranks, eagerly and
                              inside tf.function: every rank raises, naming the tensor and the
                              field; a name in flight twice at once on one rank (two threads)
                              is refused naming it; afterwards the job still works.
    errors_test.py killed     (N >= 2) the last rank dies; every other rank's next collective
                              raises, naming it ("CAUGHT ..."), or the watchdog prints HUNG.
Prints "OK errors_test <scenario>" (killed: "CAUGHT" per survivor); run by run_expect.py.
"""

import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import harness  # noqa: E402
import hoop.tensorflow as hvd  # noqa: E402

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()
scenario = sys.argv[1]
# Eagerly hoop.tensorflow raises HoopError; a tf.function raises TensorFlow's error where it
# runs, with hoop's message.
TF_ERRORS = (hvd.HoopError, tf.errors.OpError)


def expect_error(fn, *needles):
    harness.expect_error(fn, TF_ERRORS, *needles)


if scenario == "mismatch":
    shape = (4,) if R == 0 else (5,)
    expect_error(lambda: hvd.allreduce(tf.ones(shape), name="shaped"), "'shaped'", "shape",
                 "[4] on rank 0", "[5] on rank 1")
    dtype = tf.float32 if R == 0 else tf.int32
    typed = tf.function(lambda a: hvd.allreduce(a, name="typed"))
    expect_error(lambda: typed(tf.ones(3, dtype)), "'typed'", "dtype")
    expect_error(lambda: hvd.broadcast(tf.ones(2), root_rank=N), "root")
    # Two threads of one rank submit the same name while rank 1 has not: whichever comes
    # second is refused, naming it, while the first stays in flight. Only then (after the
    # allreduce "ready") does rank 1 submit the name, and the first completes.
    outcomes = []

    def submit():
        try:
            outcomes.append(hvd.allreduce(tf.ones(3), op=hvd.Sum, name="twice").numpy())
        except hvd.HoopError as e:
            outcomes.append(str(e))

    if R == 0:
        threads = [threading.Thread(target=submit) for _ in range(2)]
        for t in threads:
            t.start()
        while not outcomes:
            time.sleep(0.01)
        hvd.allreduce(tf.ones(1), name="ready")
        for t in threads:
            t.join()
    else:
        hvd.allreduce(tf.ones(1), name="ready")
        submit()
    refused = [o for o in outcomes if isinstance(o, str)]
    if R == 0 and not (len(refused) == 1 and "'twice'" in refused[0]):
        print(f"rank {R}: the duplicate name was not refused: {outcomes}", flush=True)
        sys.exit(1)
    print(f"rank {R}: duplicate: {refused}", flush=True)
    total = hvd.allreduce(tf.ones(3), op=hvd.Sum, name="after")
    assert float(tf.reduce_sum(total)) == 3.0 * N, total
    print("OK errors_test mismatch", flush=True)
elif scenario == "killed":
    step = tf.function(lambda a: hvd.allreduce(a, name="step"))
    harness.survive_killed_rank(lambda: step(tf.ones(1000)).numpy(), TF_ERRORS)
else:
    sys.exit(f"unknown scenario {scenario}")
hvd.shutdown()
