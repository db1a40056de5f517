"""hoop.ray and hoop.spark on real engines: a local Ray instance, or a Spark local-cluster of
two worker JVMs, started once and shared by every check.

    engines_check.py ray|spark     (from the repository root, PYTHONPATH=build/python)
    engines_check.py reference FILE   (the hooprun reference both share, into FILE)

Each engine runs, on 2 workers: every hoop.torch collective against its reference
(tests/torch/api_test.py, as hooprun runs it), results in rank order, the training example
against the same script under hooprun (the same loss and accuracy), a worker whose code raises
and one whose process dies (each fails the call on the driver naming the rank, within a
deadline), and a call that works after those. Ray also checks execute(), execute_single() and
start()'s executable, and ElasticRayExecutor: a killed and a stopped worker replaced, training
resumed from the last commit, a worker whose code raises, and the elastic training example. Prints "OK <check>" per check and
"OK engines <engine>" at the end; any failure raises.
"""

import os
import re
import runpy
import subprocess
import sys
import time

ROOT = os.getcwd()
TORCH_TESTS = os.path.join(ROOT, "tests", "torch")
EXAMPLES = os.path.join(ROOT, "examples")
sys.path[:0] = [TORCH_TESTS, EXAMPLES]
# Workers (Ray's local ones, Spark's executors) import the example and the checks from here.
PATH = os.pathsep.join([os.path.join(ROOT, "build", "python"), TORCH_TESTS, EXAMPLES])
os.environ["PYTHONPATH"] = PATH
# A failed call must fail within this many seconds of its fault (never a speed check).
DEADLINE_S = 60
TRAIN_ARGS = ["--epochs", "1", "--max-steps", "30"]


def ok(what):
    print(f"OK {what}", flush=True)


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


# -- what the workers run ---------------------------------------------------------------------

def collective_check():
    """Every hoop.torch collective against its reference, as under hooprun."""
    runpy.run_path(os.path.join(TORCH_TESTS, "api_test.py"), run_name="__main__")
    return "checked"


def whoami():
    import hoop.torch as hvd

    hvd.init()
    got = (hvd.rank(), hvd.size(), hvd.local_rank(), int(os.environ["HOOP_RANK"]))
    hvd.shutdown()
    return got


def faulty(kind):
    """Allreduces until rank 1 fails its way (kind: raise or die)."""
    import signal

    import torch

    import hoop.torch as hvd

    hvd.init()
    for step in range(100000):
        if step == 30 and hvd.rank() == 1:
            if kind == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("rank 1's own bug")
        hvd.allreduce(torch.ones(256), name=f"g{step % 3}")
    return "no fault"


def elastic_training(marker, fault, steps=40):
    """Elastic allreduces, committed every 5 steps; rank 1 of the first round kills (fault
    "kill") or stops ("stop") its own process at step 20, once: the marker file says it
    happened. The replacement must receive the committed state, so every rank ends with `steps`
    steps, each adding the job's size."""
    import signal

    import torch

    import hoop.torch as hvd

    hvd.init()
    state = hvd.elastic.ObjectState(step=0, total=0.0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            if state.step == 20 and hvd.rank() == 1 and not os.path.exists(marker):
                open(marker, "w").close()
                if fault == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                # Stopped for good: should anything continue the process, it stops again at
                # once, and the marker counts the times (the driver's kill ends it).
                while True:
                    os.kill(os.getpid(), signal.SIGSTOP)
                    with open(marker, "a") as f:
                        f.write("continued\n")
            state.total += float(hvd.allreduce(torch.ones(4), op=hvd.Sum, name="step")[0])
            state.step += 1
            if state.step % 5 == 0:
                state.commit()

    train(state)
    return (hvd.rank(), hvd.size(), state.step, state.total, len(resets))


def elastic_raising():
    import hoop.torch as hvd

    hvd.init()

    @hvd.elastic.run
    def train(state):
        if hvd.rank() == 1:
            raise ValueError("rank 1's own elastic bug")
        hvd.allreduce(__import__("torch").ones(1), name="x")

    train(hvd.elastic.ObjectState(step=0))


def train():
    import torch_fashion_mnist as example

    args = example.parse_args(TRAIN_ARGS)
    args.print_epochs = False
    return example.train(args)[-1]


# -- the driver's checks ----------------------------------------------------------------------

def hooprun_reference():
    """The example's last epoch line under hooprun: (loss, accuracy) as printed; read from the
    file $HOOP_TEST_ENGINES_REFERENCE where the test engines.reference wrote it for both engines'
    tests (a ctest fixture), else run here."""
    shared = os.environ.get("HOOP_TEST_ENGINES_REFERENCE")
    if shared and os.path.exists(shared):
        with open(shared) as f:
            return tuple(f.read().split())
    out = subprocess.run(
        [os.path.join(ROOT, "build", "bin", "hooprun"), "-np", "2", "/usr/bin/python3",
         os.path.join(EXAMPLES, "torch_fashion_mnist.py")] + TRAIN_ARGS,
        capture_output=True, text=True, timeout=300, env=dict(os.environ), check=True).stdout
    m = re.findall(r"loss (\d+\.\d+)  test accuracy (\d+\.\d+) %", out)
    expect(m, f"hooprun's example printed no epoch line: {out}")
    return m[-1]


def check_training(run_train):
    want = hooprun_reference()
    epoch = run_train()
    got = (f"{epoch['loss']:.4f}", f"{100 * epoch['accuracy']:.2f}")
    expect(got == want, f"training through the engine: loss, accuracy {got}; hooprun {want}")
    ok(f"the training example: loss {got[0]}, accuracy {got[1]} %, as under hooprun")


def check_fault(call, kind, needles):
    from hoop import HoopError

    start = time.monotonic()
    try:
        call()
    except HoopError as e:
        took = time.monotonic() - start
        text = str(e)
        for needle in needles:
            expect(needle in text, f"{kind}: the error does not say {needle!r}: {text}")
        expect(took < DEADLINE_S, f"{kind}: failed after {took:.0f} s")
        ok(f"rank 1 {kind}s: the call fails naming it ({took:.1f} s, not asserted): {text}")
        return
    raise AssertionError(f"{kind}: the call did not fail")


def ray_main():
    import ray

    from hoop.ray import RayExecutor

    started = time.monotonic()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ok(f"ray.init ({time.monotonic() - started:.1f} s)")

    class Counter:
        def __init__(self, start):
            self.value = start

    def executor(**kwargs):
        e = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2,
                        cpus_per_worker=1)
        e.start(**kwargs)
        return e

    started = time.monotonic()
    e = executor(executable_cls=Counter, executable_args=[10])
    ok(f"start ({time.monotonic() - started:.2f} s)")
    expect(e.run(collective_check) == ["checked", "checked"], "collective check")
    ok("every hoop.torch collective on 2 actors")
    got = e.run(whoami)
    expect(got == [(0, 2, 0, 0), (1, 2, 1, 1)], f"ranks in order: {got}")
    expect(e.execute(lambda c: c.value) == [10, 10], "execute")
    expect(e.execute_single(lambda c: c.value + 1) == 11, "execute_single")
    expect(e.run(lambda a, b=0: a + b, args=[1], kwargs={"b": 2}) == [3, 3], "args, kwargs")
    ok("results in rank order; execute, execute_single, args and kwargs")
    check_training(lambda: e.run(train)[0])
    e.shutdown()
    for kind, needles in [("raise", ["rank 1", "raised: RuntimeError: rank 1's own bug"]),
                          ("die", ["rank 1", "died"])]:
        e = executor()
        check_fault(lambda: e.run(faulty, args=[kind]), kind, needles)
        e.shutdown()
    e = executor()
    expect(e.run(whoami)[1][0] == 1, "a run after the faults")
    e.shutdown()
    ok("a new executor works after the faults")
    check_elastic_ray()
    ray.shutdown()


def check_elastic_ray():
    import tempfile

    from hoop.ray import ElasticRayExecutor

    settings = ElasticRayExecutor.create_settings(min_np=1, max_np=2, elastic_timeout=60,
                                                  timeout_s=60)
    # A stopped worker is found through the others' failed collectives: after their timeout.
    e = ElasticRayExecutor(settings, cpus_per_slot=1, env_vars={"HOOP_TIMEOUT_SECONDS": "3"})
    e.start()
    for fault in ("kill", "stop"):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "faulted")
            started = time.monotonic()
            got = e.run(lambda: elastic_training(marker, fault))
            took = time.monotonic() - started
            expect(os.path.exists(marker), f"the elastic worker did not {fault} itself")
            with open(marker) as f:
                continued = f.read().count("continued")
        expect([g[:4] for g in got] == [(0, 2, 40, 80.0), (1, 2, 40, 80.0)],
               f"elastic results: {got}")
        expect(got[0][4] >= 1, f"rank 0 saw no reset: {got}")
        ok(f"ElasticRayExecutor: a worker that {fault}s itself is replaced and training resumes "
           f"from the last commit ({took:.1f} s, not asserted): {got}"
           + (f"; something continued the stopped worker {continued} times" if continued else ""))
    check_fault(lambda: e.run(elastic_raising), "raise",
                ["rank 1", "raised: ValueError: rank 1's own elastic bug"])
    e.shutdown()
    import ray_fashion_mnist as ray_example

    lines = ray_example.run_elastic(ray_example.parse_args(["--elastic"] + TRAIN_ARGS))
    expect(len(lines) == 1 and "(2 workers)" in lines[0], f"the elastic example: {lines}")
    ok(f"examples/ray_fashion_mnist.py --elastic: {lines[0]}")


def spark_main():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    started = time.monotonic()
    builder = (SparkSession.builder.appName("hoop engines check")
               .master("local-cluster[2,1,1024]")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.executorEnv.PYTHONPATH", PATH))
    for name, value in os.environ.items():  # what api_test.py compares the build with
        if name.startswith("HOOP_TEST_"):
            builder = builder.config(f"spark.executorEnv.{name}", value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    ok(f"SparkSession on local-cluster[2,1,1024] ({time.monotonic() - started:.1f} s)")
    import hoop.spark

    expect(hoop.spark.run(collective_check, num_proc=2) == ["checked", "checked"],
           "collective check")
    ok("every hoop.torch collective in 2 barrier tasks")
    for _ in range(2):  # the second run reuses the first's Python workers
        got = hoop.spark.run(whoami)  # num_proc: the cluster's default parallelism, 2
        expect(got == [(0, 2, 0, 0), (1, 2, 1, 1)], f"ranks in order: {got}")
    ok("results in rank order, twice on the same Python workers")
    check_training(lambda: hoop.spark.run(train, num_proc=2)[0])
    check_fault(lambda: hoop.spark.run(faulty, args=("raise",), num_proc=2), "raise",
                ["rank 1", "raised: RuntimeError: rank 1's own bug"])
    check_fault(lambda: hoop.spark.run(faulty, args=("die",), num_proc=2), "die",
                ["rank 1"])
    expect(hoop.spark.run(whoami, num_proc=2)[1][0] == 1, "a run after the faults")
    ok("a run works after the faults")
    spark.stop()


if __name__ == "__main__":
    engine = sys.argv[1] if len(sys.argv) > 1 else ""
    if engine == "reference" and len(sys.argv) == 3:
        os.environ.pop("HOOP_TEST_ENGINES_REFERENCE", None)
        with open(sys.argv[2], "w") as f:
            f.write(" ".join(hooprun_reference()) + "\n")
        ok(f"the training example under hooprun: {open(sys.argv[2]).read().strip()}")
        sys.exit(0)
    if engine not in ("ray", "spark"):
        sys.exit("usage: engines_check.py ray|spark|reference FILE")
    ray_main() if engine == "ray" else spark_main()
    ok(f"engines {engine}")
