#include "core/crypto.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace hoop::crypto {
namespace {

std::string hex_of(const Result<Sha256Digest>& digest) {
  EXPECT_TRUE(digest.ok()) << digest.status().to_string();
  return digest.ok() ? to_hex(as_view(*digest)) : std::string();
}

// RFC 4231, test case 1.
TEST(Crypto, HmacSha256MatchesRfc4231Case1) {
  EXPECT_EQ(hex_of(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

// RFC 4231, test case 2: a key shorter than the output.
TEST(Crypto, HmacSha256MatchesRfc4231Case2) {
  EXPECT_EQ(hex_of(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

// RFC 4231, test case 6: a key longer than the hash's block is hashed first.
TEST(Crypto, HmacSha256MatchesRfc4231Case6) {
  EXPECT_EQ(hex_of(hmac_sha256(std::string(131, '\xaa'),
                               "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Crypto, HmacDependsOnKeyAndDataAndAcceptsEmptyInputs) {
  const std::string a = hex_of(hmac_sha256("key", "data"));
  EXPECT_NE(a, hex_of(hmac_sha256("key2", "data")));
  EXPECT_NE(a, hex_of(hmac_sha256("key", "data2")));
  EXPECT_EQ(hex_of(hmac_sha256("", "")).size(), 64u);
  EXPECT_NE(hex_of(hmac_sha256("", "x")), hex_of(hmac_sha256("", "y")));
}

TEST(Crypto, RandomBytesHaveTheLengthAskedAndDifferBetweenCalls) {
  auto a = random_bytes(32);
  auto b = random_bytes(32);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
  auto none = random_bytes(0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto big = random_bytes((std::size_t{1} << 20) + 7);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->size(), (std::size_t{1} << 20) + 7);
}

TEST(Crypto, RandomHexIsLowercaseHexOfTwiceTheBytes) {
  std::set<std::string> seen;
  for (int i = 0; i < 16; ++i) {
    auto hex = random_hex(16);
    ASSERT_TRUE(hex.ok()) << hex.status().to_string();
    EXPECT_EQ(hex->size(), 32u);
    EXPECT_EQ(hex->find_first_not_of("0123456789abcdef"), std::string::npos) << *hex;
    seen.insert(*hex);
  }
  EXPECT_EQ(seen.size(), 16u);
}

TEST(Crypto, ToHex) {
  EXPECT_EQ(to_hex(std::string("\x00\x01\xab\xff", 4)), "0001abff");
  EXPECT_EQ(to_hex(""), "");
}

TEST(Crypto, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_TRUE(constant_time_equal(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

}  // namespace
}  // namespace hoop::crypto
