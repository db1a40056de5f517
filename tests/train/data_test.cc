// The IDX loader on small files written here (raw and gzipped, intact and damaged in each way
// the loader reports), and on Debian's Fashion-MNIST when it is installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "hoop/train.h"

namespace hoop::train {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using Bytes = std::vector<unsigned char>;

constexpr const char* kDebianDir = "/usr/share/datasets/fashion-mnist";

void put_u32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<unsigned char>(v >> shift));
}

Bytes idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, const Bytes& pixels) {
  Bytes out;
  put_u32(out, 0x00000803);
  put_u32(out, count);
  put_u32(out, rows);
  put_u32(out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

Bytes idx_labels(const Bytes& labels, std::optional<std::uint32_t> count = std::nullopt) {
  Bytes out;
  put_u32(out, 0x00000801);
  put_u32(out, count.value_or(static_cast<std::uint32_t>(labels.size())));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// Three 2 x 3 images (rows differ from columns so a transposed shape would show) whose pixels
// run through 0..17 scaled by 15, and their labels.
const Bytes kImagePixels = [] {
  Bytes p;
  for (int i = 0; i < 18; ++i) p.push_back(static_cast<unsigned char>(i * 15));
  return p;
}();
const Bytes kLabels = {7, 0, 9};

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "hoop_data_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  void write_raw(const std::string& name, const Bytes& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good());
  }

  // Writes name + ".gz" through zlib's gzip writer, as Debian's package ships the files.
  void write_gz(const std::string& name, const Bytes& bytes) const {
    gzFile gz = gzopen(path(name + ".gz").c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(gz), Z_OK);
  }

  // The loader's error for this directory; fails the test when it loads.
  Status load_error(bool train = true) const {
    try {
      load_fashion_mnist(dir_, train);
    } catch (const Error& e) {
      return e.status();
    }
    ADD_FAILURE() << "load_fashion_mnist(" << dir_ << ") succeeded";
    return Status();
  }

  std::string dir_;
};

void expect_small_dataset(const Dataset& data) {
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data.images.shape(), (std::vector<std::int64_t>{3, 1, 2, 3}));
  EXPECT_EQ(data.labels, (std::vector<int>{7, 0, 9}));
  for (std::size_t i = 0; i < kImagePixels.size(); ++i) {
    EXPECT_EQ(data.images[i], static_cast<float>(kImagePixels[i]) / 255.0f) << "pixel " << i;
  }
  EXPECT_EQ(data.images[0], 0.0f);
  EXPECT_EQ(data.images[17], 1.0f);
}

TEST_F(DataTest, LoadsUncompressedFiles) {
  write_raw("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  write_raw("train-labels-idx1-ubyte", idx_labels(kLabels));
  expect_small_dataset(load_fashion_mnist(dir_, true));
}

TEST_F(DataTest, LoadsGzippedTestSplit) {
  write_gz("t10k-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  write_gz("t10k-labels-idx1-ubyte", idx_labels(kLabels));
  expect_small_dataset(load_fashion_mnist(dir_, false));
  // The training split's files are not there.
  EXPECT_EQ(load_error(true).code(), StatusCode::kNotFound);
}

TEST_F(DataTest, MixesGzippedAndPlainFiles) {
  write_gz("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  write_raw("train-labels-idx1-ubyte", idx_labels(kLabels));
  expect_small_dataset(load_fashion_mnist(dir_, true));
}

TEST_F(DataTest, MissingFileNamesBothCandidatesAndHowToGetThem) {
  Status s = load_error();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path("train-images-idx3-ubyte.gz")),
                                 HasSubstr(path("train-images-idx3-ubyte") + " exists"),
                                 HasSubstr("apt-get install dataset-fashion-mnist"),
                                 HasSubstr("HOOP_DATA_DIR")));

  write_raw("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  s = load_error();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(path("train-labels-idx1-ubyte.gz")));
}

TEST_F(DataTest, BadMagicNamesTheFileAndBothNumbers) {
  // A labels file where the images belong.
  write_raw("train-images-idx3-ubyte", idx_labels(kLabels));
  write_raw("train-labels-idx1-ubyte", idx_labels(kLabels));
  Status s = load_error();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(path("train-images-idx3-ubyte") +
                                     ": bad magic number 0x00000801, expected 0x00000803"));

  write_raw("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  write_raw("train-labels-idx1-ubyte", idx_images(3, 2, 3, kImagePixels));
  EXPECT_THAT(load_error().message(),
              HasSubstr(path("train-labels-idx1-ubyte") +
                        ": bad magic number 0x00000803, expected 0x00000801"));
}

TEST_F(DataTest, TruncatedFilesSayHowManyBytesWereExpected) {
  write_raw("train-labels-idx1-ubyte", idx_labels(kLabels));
  // 16 + 18 bytes announced, 16 + 10 present.
  write_raw("train-images-idx3-ubyte",
            idx_images(3, 2, 3, Bytes(kImagePixels.begin(), kImagePixels.begin() + 10)));
  Status s = load_error();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path("train-images-idx3-ubyte") + ": truncated"),
                                 HasSubstr("expected 34 bytes"), HasSubstr("3 images of 2 x 3"),
                                 HasSubstr("only 26 are present")));

  // Cut inside the header.
  write_raw("train-images-idx3-ubyte", Bytes{0, 0, 8, 3, 0});
  EXPECT_THAT(load_error().message(),
              HasSubstr("truncated: the IDX header needs 16 bytes but the file has 5"));

  write_raw("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  write_raw("train-labels-idx1-ubyte", idx_labels({7, 0}, 3));
  EXPECT_THAT(load_error().message(),
              AllOf(HasSubstr(path("train-labels-idx1-ubyte") + ": truncated"),
                    HasSubstr("expected 11 bytes"), HasSubstr("only 10 are present")));
}

TEST_F(DataTest, TrailingBytesAreMalformed) {
  Bytes pixels = kImagePixels;
  pixels.push_back(1);
  write_raw("train-images-idx3-ubyte", idx_images(3, 2, 3, pixels));
  write_raw("train-labels-idx1-ubyte", idx_labels(kLabels));
  EXPECT_THAT(load_error().message(), HasSubstr("expected 34 bytes (a 16-byte header and 3 "
                                                "images of 2 x 3) but the file has 35"));
}

TEST_F(DataTest, ImageAndLabelCountsMustAgree) {
  write_raw("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  write_raw("train-labels-idx1-ubyte", idx_labels({7, 0}));
  Status s = load_error();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), path("train-images-idx3-ubyte") + " holds 3 images but " +
                             path("train-labels-idx1-ubyte") + " holds 2 labels");
}

TEST_F(DataTest, LabelsOutsideTheTenClassesNameTheirIndex) {
  write_raw("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  write_raw("train-labels-idx1-ubyte", idx_labels({7, 12, 9}));
  Status s = load_error();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr(path("train-labels-idx1-ubyte") + ": label 12 at index 1 is outside 0..9"));
}

TEST_F(DataTest, ImpossibleSizesAreMalformed) {
  write_raw("train-images-idx3-ubyte", idx_images(3, 0, 3, {}));
  write_raw("train-labels-idx1-ubyte", idx_labels(kLabels));
  EXPECT_THAT(load_error().message(), HasSubstr("malformed: images of 0 x 3 pixels"));
  // More bytes than 64 bits count: the check must not wrap around to a small size.
  write_raw("train-images-idx3-ubyte", idx_images(0xffffffff, 0xffffffff, 0xffffffff, {}));
  EXPECT_THAT(load_error().message(),
              HasSubstr("malformed: 4294967295 images of 4294967295 x 4294967295 pixels"));
}

TEST_F(DataTest, CorruptGzipStreamsAreReported) {
  write_raw("train-labels-idx1-ubyte", idx_labels(kLabels));
  write_gz("train-images-idx3-ubyte", idx_images(3, 2, 3, kImagePixels));
  const std::string gz = path("train-images-idx3-ubyte.gz");
  Bytes good(std::filesystem::file_size(gz));
  std::ifstream(gz, std::ios::binary)
      .read(reinterpret_cast<char*>(good.data()), static_cast<std::streamsize>(good.size()));

  // The trailer's CRC-32 (the 8th byte from the end) no longer matches the data.
  Bytes bad_crc = good;
  bad_crc[bad_crc.size() - 8] ^= 0xff;
  write_raw("train-images-idx3-ubyte.gz", bad_crc);
  Status s = load_error();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(gz + ": corrupt gzip stream"));

  // The stream stops before its end.
  write_raw("train-images-idx3-ubyte.gz", Bytes(good.begin(), good.end() - 12));
  EXPECT_THAT(load_error().message(),
              AllOf(HasSubstr(gz + ": corrupt gzip stream"), HasSubstr("unexpected end of file")));
}

// Sets (or clears, for nullopt) HOOP_DATA_DIR for one scope.
class ScopedDataDir {
 public:
  explicit ScopedDataDir(std::optional<std::string> value) {
    if (const char* old = std::getenv("HOOP_DATA_DIR")) old_ = old;
    if (value) {
      ::setenv("HOOP_DATA_DIR", value->c_str(), 1);
    } else {
      ::unsetenv("HOOP_DATA_DIR");
    }
  }
  ~ScopedDataDir() {
    if (old_) {
      ::setenv("HOOP_DATA_DIR", old_->c_str(), 1);
    } else {
      ::unsetenv("HOOP_DATA_DIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(DefaultDataDir, EnvironmentOverridesDebiansPath) {
  {
    ScopedDataDir env(std::nullopt);
    EXPECT_EQ(default_data_dir(), kDebianDir);
  }
  {
    ScopedDataDir env("");
    EXPECT_EQ(default_data_dir(), kDebianDir);
  }
  {
    ScopedDataDir env("/srv/mnist");
    EXPECT_EQ(default_data_dir(), "/srv/mnist");
  }
}

void expect_fashion_mnist(const Dataset& data, std::size_t count) {
  ASSERT_EQ(data.size(), count);
  EXPECT_EQ(data.images.shape(),
            (std::vector<std::int64_t>{static_cast<std::int64_t>(count), 1, 28, 28}));
  std::vector<std::size_t> histogram(10, 0);
  for (int label : data.labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++histogram[static_cast<std::size_t>(label)];
  }
  EXPECT_EQ(histogram, std::vector<std::size_t>(10, count / 10));
  float lo = 1.0f, hi = 0.0f;
  for (std::size_t i = 0; i < data.images.size(); ++i) {
    lo = std::min(lo, data.images[i]);
    hi = std::max(hi, data.images[i]);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

TEST(FashionMnist, LoadsDebiansFiles) {
  if (!std::filesystem::exists(std::string(kDebianDir) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << kDebianDir
                 << " (apt-get install dataset-fashion-mnist)";
  }
  expect_fashion_mnist(load_fashion_mnist(kDebianDir, true), 60000);
  expect_fashion_mnist(load_fashion_mnist(kDebianDir, false), 10000);
}

}  // namespace
}  // namespace hoop::train
