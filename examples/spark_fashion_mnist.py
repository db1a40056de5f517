"""Fashion-MNIST through hoop on a Spark cluster: examples/torch_fashion_mnist.py's training,
run by hoop.spark.run as horovod.spark.run would run it.

    PYTHONPATH=build/python .engines/venv/bin/python examples/spark_fashion_mnist.py --epochs 1

Without --master it starts local-cluster[N,1,1024] (N worker JVMs of one core each, one task
per worker); --master spark://HOST:7077 joins a standalone cluster, whose executors must find
the hoop package and this directory. Rank 0's per-epoch lines are printed here, on the driver:
the same loss and accuracy as the script under hooprun.
"""

import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import torch_fashion_mnist as example  # noqa: E402


def main():
    p = example.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--num-proc", type=int, default=2)
    p.add_argument("--master", default=None,
                   help="a Spark master URL (default: local-cluster[num_proc,1,1024])")
    args = p.parse_args()
    # The executors' Python: this interpreter, and the paths to hoop and to this example.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    path = os.pathsep.join([here] + [os.path.abspath(x) for x in
                                     os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
    from pyspark.sql import SparkSession

    started = time.perf_counter()
    spark = (SparkSession.builder.appName("hoop fashion-mnist")
             .master(args.master or f"local-cluster[{args.num_proc},1,1024]")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.executorEnv.PYTHONPATH", path)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import hoop.spark

    print(f"Spark session started in {time.perf_counter() - started:.2f} s", flush=True)
    args.print_epochs = False
    epochs = hoop.spark.run(example.train, args=(args,), num_proc=args.num_proc)[0]
    for m in epochs:
        print(example.epoch_line(m), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
