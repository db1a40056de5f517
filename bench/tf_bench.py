"""hoop.tensorflow's per-call costs and hoop.keras's training throughput, the cases of
bench/torch_horovod_bench.py.

    PYTHONPATH=build/python build/bin/hooprun -np 2 .frameworks/venv/bin/python bench/tf_bench.py

Rank 0 prints one line per case ("<case> <value>"), each a median over its repetitions, each
repetition after a barrier (an allreduce of one float):
  lone_us       one allreduce of a 2-float tensor, eagerly;
  lone_jit_us   the same inside a tf.function (its call included);
  step_us       400 tensors of 4 KiB made inside one tf.function (v * 1 of 400 captured
                variables, as a training step makes its gradients) and averaged there by one
                grouped_allreduce (negotiated and fused as one);
  step_ops_us   the same with 400 allreduce ops in flight together (TensorFlow runs them as
                their inputs are ready; the runtime fuses them);
  step_graph_us the same tf.function without the allreduce: TensorFlow's own part of the two
                above;
  step_eager_us 400 eager tensors of 4 KiB averaged by one eager grouped_allreduce;
  large_us      one 64 MiB allreduce, eagerly;
  samples/s     training throughput of examples/keras_fashion_mnist.py's LeNet-5 (model.fit,
                Adam through hoop.keras.DistributedOptimizer, --batch-size per rank, --steps
                timed steps).
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import hoop.keras  # noqa: E402
import hoop.tensorflow as hvd  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from call_timing import parse_args, report_cases  # noqa: E402
import fashion_mnist  # noqa: E402
from keras_fashion_mnist import lenet5  # noqa: E402


def main():
    args = parse_args(__doc__.splitlines()[0])
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    one = tf.zeros(1)

    def barrier():
        hvd.allreduce(one, op=hvd.Sum, name="bench.barrier")

    lone = tf.ones(2)
    lone_jit = tf.function(lambda a: hvd.allreduce(a, op=hvd.Sum, name="lone.jit"))
    grads = [tf.ones(1024) for _ in range(400)]
    # A tf.function taking 400 tensors as arguments spends milliseconds on them alone; a
    # training step makes its gradients inside.
    weights = [tf.Variable(g) for g in grads]
    step = tf.function(lambda: hvd.grouped_allreduce([w * 1.0 for w in weights], name="step"))
    step_ops = tf.function(
        lambda: [hvd.allreduce(w * 1.0, name=f"op{i}") for i, w in enumerate(weights)])
    step_graph = tf.function(lambda: [w * 1.0 for w in weights])
    large = tf.ones(16 << 20)
    cases = [
        ("lone_us", lambda: hvd.allreduce(lone, op=hvd.Sum, name="lone"), args.lone_reps),
        ("lone_jit_us", lambda: lone_jit(lone), args.lone_reps),
        ("step_us", step, args.step_reps),
        ("step_ops_us", step_ops, args.step_reps),
        ("step_graph_us", step_graph, args.step_reps),
        ("step_eager_us", lambda: hvd.grouped_allreduce(grads, name="eager"), args.step_reps),
        ("large_us", lambda: hvd.allreduce(large, op=hvd.Sum, name="large"), args.large_reps),
    ]
    report_cases(cases, lambda body: body(), barrier, rank)

    x, y = fashion_mnist.load("train", args.data_dir)
    total = (args.warmup + args.steps) * args.batch_size
    mine = slice(rank * total, (rank + 1) * total)
    x, y = x[mine, ..., None], y[mine]
    model = lenet5()
    model.compile(optimizer=hoop.keras.DistributedOptimizer(keras.optimizers.Adam(1e-3 * size)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    warm = args.warmup * args.batch_size
    model.fit(x[:warm], y[:warm], batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0,
              callbacks=[hoop.keras.callbacks.BroadcastGlobalVariablesCallback(0)])
    barrier()
    begin = time.perf_counter()
    model.fit(x[warm:], y[warm:], batch_size=args.batch_size, epochs=1, shuffle=False,
              verbose=0)
    barrier()
    rate = args.steps * args.batch_size * size / (time.perf_counter() - begin)
    if rank == 0:
        print(f"samples/s {rate:.1f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
