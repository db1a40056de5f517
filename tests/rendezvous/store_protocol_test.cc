// The store's wire format without sockets: encodings round-trip, and decoders reject
// every truncated, padded or random payload instead of over-reading.
#include "rendezvous/store_protocol.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace hoop::rendezvous {
namespace {

// A frame taken apart; owns its payload, which decoded views point into.
struct Split {
  FrameHeader header;
  std::string payload;
};

Split split(const std::string& frame) {
  EXPECT_GE(frame.size(), kFrameHeaderBytes);
  Split s{decode_header(frame.data()), frame.substr(kFrameHeaderBytes)};
  EXPECT_EQ(s.header.length, s.payload.size());
  return s;
}

TEST(StoreProtocol, FrameHeaderIsLittleEndianLengthThenOpcode) {
  const std::string frame = FrameBuilder(Opcode::kGet).bytes("abc").finish();
  ASSERT_EQ(frame.size(), 8u);
  EXPECT_EQ(frame.substr(0, 5), std::string("\x03\x00\x00\x00\x11", 5));
  const char big[] = {'\x04', '\x03', '\x02', '\x01', '\x63'};
  const FrameHeader h = decode_header(big);
  EXPECT_EQ(h.length, 0x01020304u);
  EXPECT_EQ(h.op, 0x63);
}

TEST(StoreProtocol, FrameCapSaturates) {
  EXPECT_EQ(max_frame_payload(100), 100 + kMaxKeyBytes + kRequestOverheadBytes);
  EXPECT_EQ(max_frame_payload(SIZE_MAX), 0xFFFFFFFFu);
}

TEST(StoreProtocol, HellosRoundTrip) {
  const std::string nonce(kNonceBytes, 'n');
  auto server = split(encode_server_hello({kProtocolVersion, nonce}));
  EXPECT_EQ(server.header.op, static_cast<std::uint8_t>(Opcode::kServerHello));
  auto decoded = decode_server_hello(server.payload);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->nonce, nonce);

  ClientHello hello;
  hello.rank = -1;
  hello.nonce = std::string(kNonceBytes, 'c');
  hello.job_id = "job";
  hello.proof = std::string(kProofBytes, 'p');
  const std::string frame = encode_client_hello(hello);
  auto client = split(frame);
  EXPECT_EQ(*peek_client_version(client.payload), kProtocolVersion);
  auto back = decode_client_hello(client.payload);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->rank, -1);
  EXPECT_EQ(back->job_id, "job");
  EXPECT_EQ(back->proof, hello.proof);
  // Every truncation and any trailing byte is malformed.
  for (std::size_t n = 0; n < client.payload.size(); ++n) {
    EXPECT_FALSE(decode_client_hello(std::string_view(client.payload).substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(decode_client_hello(client.payload + "x").ok());
  EXPECT_FALSE(decode_server_hello(server.payload + "x").ok());
  EXPECT_EQ(peek_client_version("NOTHOOP!\x01\0\0\0").status().code(), StatusCode::kProtocolError);
}

TEST(StoreProtocol, ProofsDependOnRoleSecretAndEveryTranscriptField) {
  const HandshakeTranscript base{kProtocolVersion, "server-nonce", "client-nonce", "job", 3};
  const auto proof = [](ProofRole role, std::string_view secret, const HandshakeTranscript& t) {
    return std::string(crypto::as_view(*handshake_proof(role, secret, t)));
  };
  const std::string reference = proof(ProofRole::kClient, "s", base);
  EXPECT_NE(reference, proof(ProofRole::kServer, "s", base));
  EXPECT_NE(reference, proof(ProofRole::kClient, "t", base));
  HandshakeTranscript t = base;
  t.version = 2;
  EXPECT_NE(reference, proof(ProofRole::kClient, "s", t));
  t = base;
  t.server_nonce = "server-noncf";
  EXPECT_NE(reference, proof(ProofRole::kClient, "s", t));
  t = base;
  t.client_nonce = "client-noncf";
  EXPECT_NE(reference, proof(ProofRole::kClient, "s", t));
  t = base;
  t.job_id = "jo";
  EXPECT_NE(reference, proof(ProofRole::kClient, "s", t));
  t = base;
  t.rank = 4;
  EXPECT_NE(reference, proof(ProofRole::kClient, "s", t));
  EXPECT_EQ(reference, proof(ProofRole::kClient, "s", base));
}

TEST(StoreProtocol, RequestsRoundTrip) {
  auto set = split(encode_set(std::string("k\0y", 3), std::string("v\0\xff", 3)));
  auto req = decode_request(set.header.op, set.payload);
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->op, Opcode::kSet);
  EXPECT_EQ(req->key, std::string_view("k\0y", 3));
  EXPECT_EQ(req->value, std::string_view("v\0\xff", 3));

  auto add = split(encode_add("n", -42));
  req = decode_request(add.header.op, add.payload);
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->delta, -42);
  EXPECT_EQ(req->key, "n");

  const std::vector<std::string> keys = {"a", "bb", "ccc"};
  const std::string wait_frame = encode_wait(keys, 1234);
  auto wait = split(wait_frame);
  req = decode_request(wait.header.op, wait.payload);
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->timeout_ms, 1234u);
  ASSERT_EQ(req->keys.size(), 3u);
  EXPECT_EQ(req->keys[2], "ccc");
  for (std::size_t n = 0; n < wait.payload.size(); ++n) {
    EXPECT_FALSE(decode_request(wait.header.op, std::string_view(wait.payload).substr(0, n)).ok())
        << n;
  }

  auto get = split(encode_get("g"));
  EXPECT_EQ(decode_request(get.header.op, get.payload)->key, "g");
  auto del = split(encode_delete("d"));
  EXPECT_EQ(decode_request(del.header.op, del.payload)->op, Opcode::kDelete);
}

TEST(StoreProtocol, BadKeysAreArgumentsButBadFramesAreProtocolErrors) {
  EXPECT_EQ(decode_request(static_cast<std::uint8_t>(Opcode::kGet), "").status().code(),
            StatusCode::kInvalidArgument);
  auto long_key = split(encode_get(std::string(kMaxKeyBytes + 1, 'k')));
  EXPECT_EQ(decode_request(long_key.header.op, long_key.payload).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_request(static_cast<std::uint8_t>(Opcode::kAdd), "1234567").status().code(),
            StatusCode::kProtocolError);
  EXPECT_EQ(decode_request(static_cast<std::uint8_t>(Opcode::kOk), "").status().code(),
            StatusCode::kProtocolError);
  EXPECT_EQ(decode_request(200, "xyz").status().code(), StatusCode::kProtocolError);
}

TEST(StoreProtocol, AnswersRoundTrip) {
  auto ok = split(encode_ok_i64(-5));
  EXPECT_EQ(*decode_ok_i64(ok.payload), -5);
  EXPECT_FALSE(decode_ok_i64("1234567").ok());

  auto err = split(encode_error(not_found("key \"x\" is not set")));
  const Status s = decode_error(err.payload);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "key \"x\" is not set");
  EXPECT_EQ(decode_error("").code(), StatusCode::kProtocolError);
  EXPECT_EQ(decode_error(std::string(1, '\0')).code(), StatusCode::kProtocolError);
  EXPECT_EQ(decode_error("\xf0").code(), StatusCode::kProtocolError);

  auto missing = split(encode_wait_timeout({"a", "b"}));
  EXPECT_EQ(*decode_wait_timeout(missing.payload), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(decode_wait_timeout(missing.payload + "z").ok());
  EXPECT_FALSE(decode_wait_timeout("\xff\xff\xff\xff").ok());
}

TEST(StoreProtocol, RandomPayloadsNeverCrashTheDecoders) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string payload(rng() % 64, '\0');
    for (char& c : payload) c = static_cast<char>(rng() % 4 == 0 ? 0xff : rng());
    const auto op = static_cast<std::uint8_t>(rng() % 40);
    (void)decode_request(op, payload);
    (void)decode_client_hello(payload);
    (void)decode_server_hello(payload);
    (void)decode_wait_timeout(payload);
    (void)decode_error(payload);
  }
}

TEST(StoreProtocol, KeysAreQuotedReadably) {
  EXPECT_EQ(quote_key("rank/3"), "\"rank/3\"");
  EXPECT_EQ(quote_key(std::string("a\0\"\\", 4)), "\"a\\x00\\\"\\\\\"");
  const std::string quoted = quote_key(std::string(500, 'k'));
  EXPECT_LT(quoted.size(), 120u);
  EXPECT_NE(quoted.find("(500 bytes)"), std::string::npos);
  std::vector<std::string> many;
  for (int i = 0; i < 40; ++i) many.push_back("k" + std::to_string(i));
  const std::string list = format_keys(many);
  EXPECT_NE(list.find("\"k0\", \"k1\""), std::string::npos);
  EXPECT_NE(list.find("(24 more)"), std::string::npos) << list;
}

}  // namespace
}  // namespace hoop::rendezvous
