// hoop.jax's XLA FFI handlers: the runtime's collectives as XLA custom calls on the CPU, so that
// they run inside jax.jit (and eagerly, through the same call). hoop/jax/__init__.py loads this
// library with ctypes and registers each hoop_jax_* symbol as an FFI target. Every call blocks
// until the runtime has run it; several tensors in one call (a pytree's gradients) go through
// one grouped allreduce, which the runtime negotiates and fuses as one.
//
// A tensor's name is the first operand, its UTF-8 bytes zero-padded to kNameBytes, not an
// attribute: an eager call with a new name then reuses the compiled call (attributes are part
// of what JAX compiles), and under jit the operand is a constant.
//
// JAX dtypes that hoop lacks travel as a hoop type of the same width (common/carrier.h).
//
// Every handler also takes and returns a token, which it ignores: hoop/jax/__init__.py chains
// the calls of one function body by their tokens, so that XLA runs them in the order they were
// traced. Without the chain XLA runs calls that do not depend on each other in whatever order
// their inputs become ready, also concurrently on its thread pool, and since every call blocks
// until all ranks have submitted its tensor, two ranks that started different calls first
// waited for each other for ever.
#include <xla/ffi/api/ffi.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/common/carrier.h"
#include "hoop/hoop.h"

namespace ffi = xla::ffi;

namespace {

constexpr std::size_t kNameBytes = 64;  // hoop/jax/__init__.py's _NAME_BYTES

/// The name carried by the first operand, or an error.
std::optional<std::string> name_of(const ffi::AnyBuffer& bytes) {
  if (bytes.element_type() != ffi::DataType::U8 || bytes.size_bytes() != kNameBytes)
    return std::nullopt;
  const char* p = static_cast<const char*>(bytes.untyped_data());
  return std::string(p, strnlen(p, kNameBytes));
}

ffi::Error bad_name() {
  return ffi::Error::InvalidArgument("hoop.jax: the first operand must be a tensor's name as " +
                                     std::to_string(kNameBytes) + " bytes (uint8)");
}

using hoop::adapters::Carrier;
using hoop::adapters::Foreign;
using hoop::adapters::kNoOp;

/// The carrier of `t` for reduction `op` (kNoOp: bytes are only moved), or an error.
std::optional<Carrier> carrier_of(ffi::DataType t, std::int64_t op, std::string* why) {
  Foreign f = Foreign::kOther;
  switch (t) {
    case ffi::DataType::S8: f = Foreign::kI8; break;
    case ffi::DataType::S16: f = Foreign::kI16; break;
    case ffi::DataType::S32: f = Foreign::kI32; break;
    case ffi::DataType::S64: f = Foreign::kI64; break;
    case ffi::DataType::U8: f = Foreign::kU8; break;
    case ffi::DataType::F16: f = Foreign::kF16; break;
    case ffi::DataType::BF16: f = Foreign::kBF16; break;
    case ffi::DataType::F32: f = Foreign::kF32; break;
    case ffi::DataType::F64: f = Foreign::kF64; break;
    case ffi::DataType::PRED: f = Foreign::kBool; break;
    case ffi::DataType::U16: f = Foreign::kU16; break;
    case ffi::DataType::U32: f = Foreign::kU32; break;
    case ffi::DataType::U64: f = Foreign::kU64; break;
    case ffi::DataType::C64: f = Foreign::kC64; break;
    case ffi::DataType::C128: f = Foreign::kC128; break;
    default:
      *why = "hoop.jax: unsupported dtype (XLA type " + std::to_string(static_cast<int>(t)) + ")";
      return std::nullopt;
  }
  return hoop::adapters::carrier_of(f, op, "hoop.jax", why);
}

/// The hoop view of `buf` as carried by `c`.
hoop::Tensor view(const ffi::AnyBuffer& buf, const Carrier& c) {
  hoop::Tensor t;
  t.data = buf.untyped_data();
  t.dtype = c.dtype;
  for (std::int64_t d : buf.dimensions()) t.shape.push_back(d);
  if (c.pair > 1) t.shape.push_back(c.pair);
  return t;
}

/// The name and carrier of a call on tensor `in` with reduction `op` (kNoOp: none), or the
/// error that refuses it.
ffi::Error prepare(const ffi::AnyBuffer& name_bytes, const ffi::AnyBuffer& in, std::int64_t op,
                   std::string* name, Carrier* carrier) {
  std::optional<std::string> n = name_of(name_bytes);
  if (!n) return bad_name();
  std::string why;
  std::optional<Carrier> c = carrier_of(in.element_type(), op, &why);
  if (!c) return ffi::Error::InvalidArgument(why + ", tensor '" + *n + "'");
  *name = std::move(*n);
  *carrier = *c;
  return ffi::Error::Success();
}

/// Runs `f`, turning the runtime's errors into an FFI error carrying hoop's message.
template <typename F>
ffi::Error guarded(F&& f) {
  try {
    f();
    return ffi::Error::Success();
  } catch (const hoop::Error& e) {
    const auto code = e.status().code() == hoop::StatusCode::kInvalidArgument
                          ? ffi::ErrorCode::kInvalidArgument
                          : ffi::ErrorCode::kInternal;
    return ffi::Error(code, e.status().to_string());
  }
}

/// Copies an owned result into the output buffer the program allocated for it.
ffi::Error deliver(const hoop::OwnedTensor& result, ffi::Result<ffi::AnyBuffer> out,
                   std::string_view what, const std::string& name) {
  if (result.storage.size() != out->size_bytes())
    return ffi::Error::InvalidArgument(
        "hoop.jax: " + std::string(what) + " of tensor '" + std::string(name) + "' gave " +
        std::to_string(result.storage.size()) + " bytes where the program expects " +
        std::to_string(out->size_bytes()) +
        " (under jax.jit every rank must pass the same first dimension)");
  if (!result.storage.empty())
    std::memcpy(out->untyped_data(), result.storage.data(), result.storage.size());
  return ffi::Error::Success();
}

ffi::Error allreduce_impl(ffi::Token, ffi::AnyBuffer name_bytes, ffi::RemainingArgs args,
                          ffi::Result<ffi::Token>, ffi::RemainingRets rets, std::int64_t op,
                          double prescale, double postscale, std::int64_t process_set) {
  const std::optional<std::string> name = name_of(name_bytes);
  if (!name) return bad_name();
  if (args.size() != rets.size() || args.size() == 0)
    return ffi::Error::InvalidArgument("hoop.jax: allreduce needs one output per input");
  std::vector<std::string> names;
  std::vector<hoop::Tensor> inputs;
  std::vector<hoop::Tensor> outputs;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto in = args.get<ffi::AnyBuffer>(i);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (!in.has_value()) return in.error();
    if (!out.has_value()) return out.error();
    std::string why;
    const std::optional<Carrier> c = carrier_of(in->element_type(), op, &why);
    if (!c) return ffi::Error::InvalidArgument(why + ", tensor '" + *name + "'");
    names.push_back(args.size() == 1 ? *name : *name + "." + std::to_string(i));
    inputs.push_back(view(*in, *c));
    outputs.push_back(view(**out, *c));
  }
  hoop::ReduceOptions o;
  o.op = static_cast<hoop::ReduceOp>(op);
  o.prescale = prescale;
  o.postscale = postscale;
  o.process_set = static_cast<int>(process_set);
  return guarded([&] {
    if (names.size() == 1) {
      hoop::allreduce(names[0], inputs[0], outputs[0], o);
    } else {
      hoop::grouped_allreduce(names, inputs, outputs, o);
    }
  });
}

ffi::Error broadcast_impl(ffi::Token, ffi::AnyBuffer name_bytes, ffi::AnyBuffer in,
                          ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                          std::int64_t root, std::int64_t process_set) {
  std::string name;
  Carrier c;
  if (ffi::Error e = prepare(name_bytes, in, kNoOp, &name, &c); e.failure()) return e;
  if (out->untyped_data() != in.untyped_data() && in.size_bytes() > 0)
    std::memcpy(out->untyped_data(), in.untyped_data(), in.size_bytes());
  return guarded([&] {
    hoop::broadcast(name, view(*out, c), static_cast<int>(root),
                    static_cast<int>(process_set));
  });
}

ffi::Error allgather_impl(ffi::Token, ffi::AnyBuffer name_bytes, ffi::AnyBuffer in,
                          ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                          std::int64_t process_set) {
  std::string name;
  Carrier c;
  if (ffi::Error e = prepare(name_bytes, in, kNoOp, &name, &c); e.failure()) return e;
  hoop::OwnedTensor result;
  ffi::Error e = guarded([&] {
    result = hoop::allgather(name, view(in, c), static_cast<int>(process_set));
  });
  return e.failure() ? e : deliver(result, out, "allgather", name);
}

ffi::Error reducescatter_impl(ffi::Token, ffi::AnyBuffer name_bytes, ffi::AnyBuffer in,
                              ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                              std::int64_t op, double prescale, double postscale,
                              std::int64_t process_set) {
  std::string name;
  Carrier c;
  if (ffi::Error e = prepare(name_bytes, in, op, &name, &c); e.failure()) return e;
  hoop::ReduceOptions o;
  o.op = static_cast<hoop::ReduceOp>(op);
  o.prescale = prescale;
  o.postscale = postscale;
  o.process_set = static_cast<int>(process_set);
  hoop::OwnedTensor result;
  ffi::Error e =
      guarded([&] { result = hoop::reducescatter(name, view(in, c), o); });
  return e.failure() ? e : deliver(result, out, "reducescatter", name);
}

ffi::Error alltoall_impl(ffi::Token, ffi::AnyBuffer name_bytes, ffi::AnyBuffer in,
                         ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                         ffi::Span<const std::int64_t> splits, std::int64_t process_set) {
  std::string name;
  Carrier c;
  if (ffi::Error e = prepare(name_bytes, in, kNoOp, &name, &c); e.failure()) return e;
  const std::vector<std::int64_t> rows(splits.begin(), splits.end());
  hoop::OwnedTensor result;
  ffi::Error e = guarded([&] {
    result = hoop::alltoall(name, view(in, c), rows, static_cast<int>(process_set));
  });
  return e.failure() ? e : deliver(result, out, "alltoall", name);
}

}  // namespace

namespace {

/// The binding of a handler of one tensor: the order token, the name operand, the input; the
/// token and the output.
auto one_tensor() {
  return ffi::Ffi::Bind()
      .Arg<ffi::Token>()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::AnyBuffer>()
      .Ret<ffi::Token>()
      .Ret<ffi::AnyBuffer>();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(hoop_jax_allreduce, allreduce_impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Token>()
                                  .Arg<ffi::AnyBuffer>()
                                  .RemainingArgs()
                                  .Ret<ffi::Token>()
                                  .RemainingRets()
                                  .Attr<std::int64_t>("op")
                                  .Attr<double>("prescale")
                                  .Attr<double>("postscale")
                                  .Attr<std::int64_t>("process_set"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(hoop_jax_broadcast, broadcast_impl,
                              one_tensor().Attr<std::int64_t>("root").Attr<std::int64_t>(
                                  "process_set"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(hoop_jax_allgather, allgather_impl,
                              one_tensor().Attr<std::int64_t>("process_set"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(hoop_jax_reducescatter, reducescatter_impl,
                              one_tensor()
                                  .Attr<std::int64_t>("op")
                                  .Attr<double>("prescale")
                                  .Attr<double>("postscale")
                                  .Attr<std::int64_t>("process_set"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(hoop_jax_alltoall, alltoall_impl,
                              one_tensor()
                                  .Attr<ffi::Span<const std::int64_t>>("splits")
                                  .Attr<std::int64_t>("process_set"));
