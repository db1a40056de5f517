// Fashion-MNIST (and MNIST) from their IDX files, the format Debian's dataset-fashion-mnist
// installs: a big-endian header (magic, then one 32-bit size per dimension) followed by the
// unsigned bytes, gzipped or not.
#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "hoop/train.h"

namespace hoop::train {
namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr std::size_t kImagesHeader = 16;
constexpr std::size_t kLabelsHeader = 8;
constexpr int kClasses = 10;

// The decompressed contents of one IDX file and the path they came from.
struct IdxFile {
  std::string path;
  std::vector<unsigned char> bytes;
};

// Closes a gzFile however the reader leaves.
class GzCloser {
 public:
  explicit GzCloser(gzFile gz) : gz_(gz) {}
  ~GzCloser() {
    if (gz_ != nullptr) gzclose_r(gz_);
  }
  GzCloser(const GzCloser&) = delete;
  GzCloser& operator=(const GzCloser&) = delete;
  // Closes now and returns zlib's verdict (Z_BUF_ERROR: the stream ended early).
  int close() {
    int rc = gzclose_r(gz_);
    gz_ = nullptr;
    return rc;
  }

 private:
  gzFile gz_;
};

// Reads the whole file through zlib, which decompresses gzip and passes other files through
// unchanged, so one reader serves both spellings of the name.
std::vector<unsigned char> read_all(const std::string& path) {
  errno = 0;
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    // gzopen fails without errno only when it cannot allocate its state.
    if (errno != 0) throw Error(errno_error(fmt::format("open {}", path), errno));
    throw Error(io_error(fmt::format("open {}: zlib could not allocate its state", path)));
  }
  GzCloser closer(gz);
  // A larger input buffer than zlib's 8 KiB default cuts the number of read(2) calls on the
  // 26 MB training images file.
  gzbuffer(gz, 1 << 20);

  std::vector<unsigned char> bytes;
  std::size_t used = 0;
  constexpr std::size_t kChunk = 8 << 20;
  for (;;) {
    if (bytes.size() - used < kChunk) bytes.resize(used + kChunk);
    int got = gzread(gz, bytes.data() + used, static_cast<unsigned>(kChunk));
    if (got <= 0) break;
    used += static_cast<std::size_t>(got);
  }
  int errnum = Z_OK;
  const char* what = gzerror(gz, &errnum);
  // zlib reports a stream cut short as Z_BUF_ERROR, not as a read failure.
  if (errnum == Z_ERRNO) throw Error(errno_error(fmt::format("read {}", path), errno));
  if (errnum != Z_OK) {
    throw Error(invalid_argument(
        fmt::format("{}: corrupt gzip stream ({}) after {} decompressed bytes", path, what, used)));
  }
  if (int rc = closer.close(); rc != Z_OK) {
    throw Error(invalid_argument(
        fmt::format("{}: corrupt gzip stream (zlib error {} at close)", path, rc)));
  }
  bytes.resize(used);
  return bytes;
}

// Finds "<name>.gz" or "<name>" in dir and reads it.
IdxFile open_idx(const std::string& dir, const std::string& name) {
  const std::filesystem::path base(dir.empty() ? "." : dir);
  const std::string gz_path = (base / (name + ".gz")).string();
  const std::string raw_path = (base / name).string();
  std::error_code ec;
  for (const std::string& path : {gz_path, raw_path}) {
    if (std::filesystem::exists(path, ec)) return IdxFile{path, read_all(path)};
  }
  throw Error(not_found(fmt::format(
      "neither {} nor {} exists; install the data with `apt-get install "
      "dataset-fashion-mnist` or set HOOP_DATA_DIR to a directory holding the IDX files",
      gz_path, raw_path)));
}

std::uint32_t big_endian_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Checks that the file starts with `magic` and holds at least its header. The magic comes
// first so that a labels file in the images' place is reported as such, not as truncated.
void check_header(const IdxFile& f, std::size_t header, std::uint32_t magic,
                  const char* expected_kind) {
  const auto truncated = [&] {
    return Error(invalid_argument(
        fmt::format("{}: truncated: the IDX header needs {} bytes but the file has {}", f.path,
                    header, f.bytes.size())));
  };
  if (f.bytes.size() < 4) throw truncated();
  const std::uint32_t got = big_endian_u32(f.bytes.data());
  if (got != magic) {
    throw Error(
        invalid_argument(fmt::format("{}: bad magic number 0x{:08x}, expected 0x{:08x} ({})",
                                     f.path, got, magic, expected_kind)));
  }
  if (f.bytes.size() < header) throw truncated();
}

// Checks that the file holds exactly `expected` bytes; `layout` explains that count.
void check_length(const IdxFile& f, std::uint64_t expected, const std::string& layout) {
  if (f.bytes.size() < expected) {
    throw Error(invalid_argument(
        fmt::format("{}: truncated: expected {} bytes ({}) but only {} are present", f.path,
                    expected, layout, f.bytes.size())));
  }
  if (f.bytes.size() > expected) {
    throw Error(
        invalid_argument(fmt::format("{}: malformed: expected {} bytes ({}) but the file has {}",
                                     f.path, expected, layout, f.bytes.size())));
  }
}

}  // namespace

std::string default_data_dir() {
  // The registry (src/core/config.cc) holds the default, Debian's location; an empty value
  // means the default too.
  const std::string dir = config_value("HOOP_DATA_DIR").value();
  if (!dir.empty()) return dir;
  return config_default("HOOP_DATA_DIR").value();
}

Dataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const IdxFile images = open_idx(dir, prefix + "-images-idx3-ubyte");
  check_header(images, kImagesHeader, kImagesMagic, "IDX images: unsigned bytes, 3 dimensions");
  const std::uint32_t count = big_endian_u32(images.bytes.data() + 4);
  const std::uint32_t rows = big_endian_u32(images.bytes.data() + 8);
  const std::uint32_t cols = big_endian_u32(images.bytes.data() + 12);
  if (rows == 0 || cols == 0) {
    throw Error(invalid_argument(
        fmt::format("{}: malformed: images of {} x {} pixels", images.path, rows, cols)));
  }
  const std::uint64_t per_image = std::uint64_t{rows} * cols;  // < 2^64 for 32-bit sizes
  // A corrupt header could announce more bytes than 64 bits count, which would wrap around.
  if (count > (std::numeric_limits<std::uint64_t>::max() - kImagesHeader) / per_image) {
    throw Error(invalid_argument(
        fmt::format("{}: malformed: {} images of {} x {} pixels", images.path, count, rows, cols)));
  }
  const std::uint64_t pixels = count * per_image;
  check_length(
      images, kImagesHeader + pixels,
      fmt::format("a {}-byte header and {} images of {} x {}", kImagesHeader, count, rows, cols));

  const IdxFile labels = open_idx(dir, prefix + "-labels-idx1-ubyte");
  check_header(labels, kLabelsHeader, kLabelsMagic, "IDX labels: unsigned bytes, 1 dimension");
  const std::uint32_t label_count = big_endian_u32(labels.bytes.data() + 4);
  check_length(labels, kLabelsHeader + std::uint64_t{label_count},
               fmt::format("a {}-byte header and {} labels", kLabelsHeader, label_count));
  if (label_count != count) {
    throw Error(invalid_argument(fmt::format("{} holds {} images but {} holds {} labels",
                                             images.path, count, labels.path, label_count)));
  }

  Dataset data;
  data.labels.resize(count);
  const unsigned char* label_bytes = labels.bytes.data() + kLabelsHeader;
  for (std::size_t i = 0; i < count; ++i) {
    if (label_bytes[i] >= kClasses) {
      throw Error(invalid_argument(
          fmt::format("{}: label {} at index {} is outside 0..{} (Fashion-MNIST has {} classes)",
                      labels.path, int{label_bytes[i]}, i, kClasses - 1, kClasses)));
    }
    data.labels[i] = label_bytes[i];
  }

  // A table makes each pixel one load rather than a conversion and a division, and gives
  // exactly x / 255 for every byte value.
  std::array<float, 256> scale;
  for (int v = 0; v < 256; ++v) scale[v] = static_cast<float>(v) / 255.0f;
  data.images = Tensor({static_cast<std::int64_t>(count), 1, static_cast<std::int64_t>(rows),
                        static_cast<std::int64_t>(cols)});
  const unsigned char* pixel_bytes = images.bytes.data() + kImagesHeader;
  float* out = data.images.data();
  for (std::uint64_t i = 0; i < pixels; ++i) out[i] = scale[pixel_bytes[i]];
  return data;
}

}  // namespace hoop::train
