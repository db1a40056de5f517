"""Horovod's reduce-op values (horovod.common.basics), shared by hoop.torch and hoop.jax so that
code comparing them keeps working. Adasum takes floating-point tensors in allreduce only."""

Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5
