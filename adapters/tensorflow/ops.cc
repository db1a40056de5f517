// hoop.tensorflow's kernels: the runtime's collectives as TensorFlow ops on the CPU, so that they
// run inside tf.function (graph mode) and eagerly. Each is an asynchronous kernel: it submits
// its tensors to hoop's runtime and returns; the runtime negotiates, fuses and runs them on its
// background thread and completes the kernel from there (Handle::on_done). Independent
// collectives of one graph are thus in flight together and fuse, as in Horovod; no TensorFlow
// thread blocks on a peer.
//
// A tensor's name is the first input, a string scalar, not an attribute: an eager call with a
// new name then reuses the cached kernel, and in a graph it is a constant. TensorFlow dtypes
// that hoop lacks travel as a hoop type of the same width (common/carrier.h). The ops are
// stateful, so that TensorFlow never folds, merges or prunes them (hoop/tensorflow/mpi_ops.py
// also keeps tf.function from ordering them).
#include <tensorflow/core/framework/common_shape_fns.h>
#include <tensorflow/core/framework/op.h>
#include <tensorflow/core/framework/op_kernel.h>
#include <tensorflow/core/framework/shape_inference.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adapters/common/carrier.h"
#include "hoop/hoop.h"

namespace tf = tensorflow;
using hoop::adapters::Carrier;
using hoop::adapters::Foreign;
using hoop::adapters::kNoOp;
using tf::shape_inference::InferenceContext;
using tf::shape_inference::ShapeHandle;

namespace {

#define HOOP_TF_TYPES                                                                       \
  "{int8, int16, int32, int64, uint8, uint16, uint32, uint64, half, bfloat16, float, double, " \
  "bool, complex64, complex128}"

Foreign foreign_of(tf::DataType t) {
  switch (t) {
    case tf::DT_INT8: return Foreign::kI8;
    case tf::DT_INT16: return Foreign::kI16;
    case tf::DT_INT32: return Foreign::kI32;
    case tf::DT_INT64: return Foreign::kI64;
    case tf::DT_UINT8: return Foreign::kU8;
    case tf::DT_HALF: return Foreign::kF16;
    case tf::DT_BFLOAT16: return Foreign::kBF16;
    case tf::DT_FLOAT: return Foreign::kF32;
    case tf::DT_DOUBLE: return Foreign::kF64;
    case tf::DT_BOOL: return Foreign::kBool;
    case tf::DT_UINT16: return Foreign::kU16;
    case tf::DT_UINT32: return Foreign::kU32;
    case tf::DT_UINT64: return Foreign::kU64;
    case tf::DT_COMPLEX64: return Foreign::kC64;
    case tf::DT_COMPLEX128: return Foreign::kC128;
    default: return Foreign::kOther;
  }
}

/// TensorFlow's error for a runtime failure, carrying hoop's message.
absl::Status error_of(const hoop::Status& s) {
  return s.code() == hoop::StatusCode::kInvalidArgument ? absl::InvalidArgumentError(s.to_string())
                                                         : absl::InternalError(s.to_string());
}

/// The hoop view of `t` as carried by `c`. An empty tensor may have no storage: it points at a
/// dummy byte instead, which the runtime never reads.
hoop::Tensor view(const tf::Tensor& t, const Carrier& c) {
  static char nothing;
  hoop::Tensor v;
  v.data = t.NumElements() == 0 ? &nothing : const_cast<char*>(t.tensor_data().data());
  v.dtype = c.dtype;
  for (int d = 0; d < t.dims(); ++d) v.shape.push_back(t.dim_size(d));
  if (c.pair > 1) v.shape.push_back(c.pair);
  return v;
}

/// The shape of a runtime result as TensorFlow sees it (a complex tensor's pair dimension
/// dropped).
tf::TensorShape shape_of(const hoop::OwnedTensor& out, const Carrier& c) {
  tf::TensorShape shape;
  const std::size_t dims = out.shape.size() - (c.pair > 1 ? 1 : 0);
  for (std::size_t d = 0; d < dims; ++d) shape.AddDim(out.shape[d]);
  return shape;
}

/// What all of hoop's kernels share: the name input, the process set, the carrier of a dtype,
/// and the hand-off of one runtime operation that completes the kernel.
class HoopKernel : public tf::AsyncOpKernel {
 public:
  explicit HoopKernel(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_));
    OP_REQUIRES_OK(c, c->GetAttr("inline_wait", &inline_wait_));
  }

 protected:
  int process_set_ = 0;
  // Set for eager calls, where the calling (Python) thread blocks on the kernel anyway: it
  // waits on the handle itself and so runs the collective at once, as hoop.torch's calls do.
  // In a graph no TensorFlow thread may block on a peer: the runtime completes the kernel.
  bool inline_wait_ = false;

  static std::string name_of(tf::OpKernelContext* c) {
    return std::string(c->input(0).scalar<tf::tstring>()());
  }

  /// The carrier of input `i` for `op`, or nothing with the context's status set.
  static std::optional<Carrier> carrier(tf::OpKernelContext* c, int i, std::int64_t op,
                                        const std::string& name) {
    std::string why;
    std::optional<Carrier> k =
        hoop::adapters::carrier_of(foreign_of(c->input(i).dtype()), op, "hoop.tensorflow", &why);
    if (!k) c->SetStatus(absl::InvalidArgumentError(why + ", tensor '" + name + "'"));
    return k;
  }

  /// Submits `start()`'s operation; when it finishes, runs `finish(handle)` (which may set
  /// the context's status) and completes the kernel. A refused submission completes it at once.
  template <typename Start, typename Finish>
  void launch(tf::OpKernelContext* c, DoneCallback done, Start start, Finish finish) const {
    hoop::Handle h;
    try {
      h = start();
    } catch (const hoop::Error& e) {
      c->SetStatus(error_of(e.status()));
      done();
      return;
    }
    // The callback holds the handle until it runs, which is once: then the runtime lets go of
    // the callback, and nothing keeps the two alive.
    auto complete = [c, done = std::move(done), h, finish](const hoop::Status& s) {
      if (s.ok()) {
        finish(h);
      } else {
        c->SetStatus(error_of(s));
      }
      done();
    };
    if (inline_wait_) {
      complete(h.status());
    } else {
      h.on_done(std::move(complete));
    }
  }

  /// Submits `start(name, view of input 1 carried for op)`, an operation whose result the
  /// runtime allocates; it becomes output 0.
  template <typename Start>
  void into_result(tf::OpKernelContext* c, DoneCallback done, std::int64_t op,
                          Start start) {
    const std::string name = name_of(c);
    const std::optional<Carrier> k = carrier(c, 1, op, name);
    if (!k) return done();
    launch(
        c, std::move(done), [&] { return start(name, view(c->input(1), *k)); },
        [c, k = *k](const hoop::Handle& h) { deliver(c, 0, h.output(), k); });
  }

  /// Allocates output `index` shaped as the runtime's result and copies it there.
  static void deliver(tf::OpKernelContext* c, int index, const hoop::OwnedTensor& out,
                      const Carrier& k) {
    tf::Tensor* result = nullptr;
    const absl::Status s = c->allocate_output(index, shape_of(out, k), &result);
    if (!s.ok()) {
      c->SetStatus(s);
      return;
    }
    if (!out.storage.empty())
      std::memcpy(const_cast<char*>(result->tensor_data().data()), out.storage.data(),
                  out.storage.size());
  }

  /// Output `index`, holding input `input`'s values: the input's own buffer where TensorFlow
  /// lets it go, else a copy.
  static tf::Tensor* in_place(tf::OpKernelContext* c, int input, int index) {
    tf::Tensor* out = nullptr;
    const absl::Status s =
        c->forward_input_or_allocate_output({input}, index, c->input(input).shape(), &out);
    if (!s.ok()) {
      c->SetStatus(s);
      return nullptr;
    }
    const auto from = c->input(input).tensor_data();
    if (out->tensor_data().data() != from.data() && !from.empty())
      std::memcpy(const_cast<char*>(out->tensor_data().data()), from.data(), from.size());
    return out;
  }
};

/// A kernel that reduces: its op and scales.
class ReduceKernel : public HoopKernel {
 public:
  explicit ReduceKernel(tf::OpKernelConstruction* c) : HoopKernel(c) {
    int op = 0;
    float prescale = 1.0f;
    float postscale = 1.0f;
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op));
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale));
    options_.op = static_cast<hoop::ReduceOp>(op);
    options_.prescale = prescale;
    options_.postscale = postscale;
    options_.process_set = process_set_;
  }

 protected:
  hoop::ReduceOptions options_;
};

/// Allreduce of one tensor or, as one group (one negotiation, fused), several: tensor i of a
/// group is named "<name>.<i>". Each result reuses its input's buffer where it can.
class AllreduceOp : public ReduceKernel {
 public:
  using ReduceKernel::ReduceKernel;

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    const std::string name = name_of(c);
    const int n = c->num_inputs() - 1;
    std::vector<std::string> names;
    std::vector<hoop::Tensor> inputs;
    std::vector<hoop::Tensor> outputs;
    for (int i = 0; i < n; ++i) {
      const std::optional<Carrier> k = carrier(c, i + 1, static_cast<std::int64_t>(options_.op),
                                               name);
      if (!k) return done();
      tf::Tensor* out = nullptr;
      OP_REQUIRES_OK_ASYNC(c, c->forward_input_or_allocate_output({i + 1}, i,
                                                                   c->input(i + 1).shape(), &out),
                           done);
      names.push_back(n == 1 ? name : name + "." + std::to_string(i));
      inputs.push_back(view(c->input(i + 1), *k));
      outputs.push_back(view(*out, *k));
    }
    launch(
        c, std::move(done),
        [&] {
          return n == 1 ? hoop::allreduce_async(names[0], inputs[0], outputs[0], options_)
                        : hoop::grouped_allreduce_async(names, inputs, outputs, options_);
        },
        [](const hoop::Handle&) {});
  }
};

/// The root's tensor on every rank.
class BroadcastOp : public HoopKernel {
 public:
  explicit BroadcastOp(tf::OpKernelConstruction* c) : HoopKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_));
  }

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    const std::string name = name_of(c);
    const std::optional<Carrier> k = carrier(c, 1, kNoOp, name);
    if (!k) return done();
    tf::Tensor* out = in_place(c, 1, 0);
    if (out == nullptr) return done();
    launch(
        c, std::move(done),
        [&] { return hoop::broadcast_async(name, view(*out, *k), root_, process_set_); },
        [](const hoop::Handle&) {});
  }

 private:
  int root_ = 0;
};

/// Every rank's tensor, concatenated along the first dimension.
class AllgatherOp : public HoopKernel {
 public:
  using HoopKernel::HoopKernel;

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    into_result(c, std::move(done), kNoOp, [&](const std::string& name, const hoop::Tensor& t) {
      return hoop::allgather_async(name, t, process_set_);
    });
  }
};

/// This rank's share of the reduction, split along the first dimension.
class ReducescatterOp : public ReduceKernel {
 public:
  using ReduceKernel::ReduceKernel;

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    into_result(c, std::move(done), static_cast<std::int64_t>(options_.op),
                [&](const std::string& name, const hoop::Tensor& t) {
                  return hoop::reducescatter_async(name, t, options_);
                });
  }
};

/// Rows splits[r] to rank r (equal shares for an empty splits); the rows received, and how many
/// came from each rank.
class AlltoallOp : public HoopKernel {
 public:
  using HoopKernel::HoopKernel;

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    const std::string name = name_of(c);
    const std::optional<Carrier> k = carrier(c, 1, kNoOp, name);
    if (!k) return done();
    const auto splits = c->input(2).flat<std::int32_t>();
    std::vector<std::int64_t> rows(splits.data(), splits.data() + splits.size());
    launch(
        c, std::move(done),
        [&] { return hoop::alltoall_async(name, view(c->input(1), *k), rows, process_set_); },
        [c, k = *k](const hoop::Handle& h) {
          deliver(c, 0, h.output(), k);
          const std::vector<std::int64_t>& got = h.received_splits();
          tf::Tensor* received = nullptr;
          const absl::Status s = c->allocate_output(
              1, tf::TensorShape({static_cast<std::int64_t>(got.size())}), &received);
          if (!s.ok()) return c->SetStatus(s);
          auto flat = received->flat<std::int32_t>();
          for (std::size_t i = 0; i < got.size(); ++i)
            flat(static_cast<std::int64_t>(i)) = static_cast<std::int32_t>(got[i]);
        });
  }
};

/// Every rank of the set has reached it: an allreduce of one number, which completes only
/// when all of them have submitted it, and blocks no thread meanwhile.
class BarrierOp : public HoopKernel {
 public:
  using HoopKernel::HoopKernel;

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    const std::string name = name_of(c);
    auto token = std::make_shared<std::int32_t>(0);
    hoop::ReduceOptions o;
    o.op = hoop::ReduceOp::kSum;
    o.process_set = process_set_;
    const hoop::Tensor t{token.get(), hoop::DataType::kI32, {}, hoop::kCpuDevice};
    launch(
        c, std::move(done), [&] { return hoop::allreduce_async(name, t, t, o); },
        [token](const hoop::Handle&) {});
  }
};

/// This rank has no more tensors: it takes part in the others' collectives with zeros until
/// every rank has joined. Gives the rank that joined last.
class JoinOp : public HoopKernel {
 public:
  using HoopKernel::HoopKernel;

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    launch(
        c, std::move(done), [&] { return hoop::join_async(process_set_); },
        [c](const hoop::Handle& h) {
          tf::Tensor* last = nullptr;
          const absl::Status s = c->allocate_output(0, tf::TensorShape({}), &last);
          if (!s.ok()) return c->SetStatus(s);
          last->scalar<std::int32_t>()() = h.last_joined_rank();
        });
  }
};

/// The shape of `input` with an unknown first dimension (allgather, reducescatter, alltoall).
absl::Status rows_unknown(InferenceContext* c, int input, int output) {
  ShapeHandle in;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(input), 1, &in));
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
  c->set_output(output, out);
  return absl::OkStatus();
}

}  // namespace

// What the ops' registrations share: the process set and the name input; the attributes of a
// reduction; one tensor in.
#define HOOP_NAMED_OP                \
  .Attr("process_set_id: int = 0")   \
  .Attr("inline_wait: bool = false") \
  .Input("tensor_name: string")
#define HOOP_REDUCE_ATTRS               \
  .Attr("reduce_op: int")               \
  .Attr("prescale_factor: float = 1.0") \
  .Attr("postscale_factor: float = 1.0")
#define HOOP_ONE_TENSOR .Attr("T: " HOOP_TF_TYPES) HOOP_NAMED_OP.Input("tensor: T")

REGISTER_OP("HoopAllreduce")
    .Attr("T: list(" HOOP_TF_TYPES ") >= 1")
    HOOP_REDUCE_ATTRS
    HOOP_NAMED_OP
    .Input("tensors: T")
    .Output("reduced: T")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 1; i < c->num_inputs(); ++i) c->set_output(i - 1, c->input(i));
      return absl::OkStatus();
    });
REGISTER_KERNEL_BUILDER(Name("HoopAllreduce").Device(tf::DEVICE_CPU), AllreduceOp);

REGISTER_OP("HoopBroadcast")
    HOOP_ONE_TENSOR
    .Attr("root_rank: int")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(1));
      return absl::OkStatus();
    });
REGISTER_KERNEL_BUILDER(Name("HoopBroadcast").Device(tf::DEVICE_CPU), BroadcastOp);

REGISTER_OP("HoopAllgather")
    HOOP_ONE_TENSOR
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return rows_unknown(c, 1, 0); });
REGISTER_KERNEL_BUILDER(Name("HoopAllgather").Device(tf::DEVICE_CPU), AllgatherOp);

REGISTER_OP("HoopReducescatter")
    HOOP_ONE_TENSOR
    HOOP_REDUCE_ATTRS
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return rows_unknown(c, 1, 0); });
REGISTER_KERNEL_BUILDER(Name("HoopReducescatter").Device(tf::DEVICE_CPU), ReducescatterOp);

REGISTER_OP("HoopAlltoall")
    HOOP_ONE_TENSOR
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(rows_unknown(c, 1, 0));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });
REGISTER_KERNEL_BUILDER(Name("HoopAlltoall").Device(tf::DEVICE_CPU), AlltoallOp);

REGISTER_OP("HoopBarrier")
    HOOP_NAMED_OP
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::NoOutputs);
REGISTER_KERNEL_BUILDER(Name("HoopBarrier").Device(tf::DEVICE_CPU), BarrierOp);

REGISTER_OP("HoopJoin")
    HOOP_NAMED_OP
    .Output("last_joined: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);
REGISTER_KERNEL_BUILDER(Name("HoopJoin").Device(tf::DEVICE_CPU), JoinOp);
