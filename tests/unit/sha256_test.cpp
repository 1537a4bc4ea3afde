// SHA-256 (src/support/sha256.h) against the FIPS 180-4 examples and NIST's long-message vector, fed whole and
// in pieces of every size (so each padding case — 55, 56, 63, 64 bytes in the last block — is crossed).
#include <gtest/gtest.h>

#include <string>

#include "support/sha256.h"

using namespace cuvil;

namespace {
std::string hex(const std::string& s) { return to_hex(sha256(s.data(), s.size())); }
}  // namespace

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrs"
                "tnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseEqualsWhole) {
  std::string msg;
  for (int i = 0; i < 300; ++i) msg += char(i * 37 + 11);
  for (size_t len : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 299}) {
    std::string m = msg.substr(0, len);
    std::string whole = hex(m);
    for (size_t piece = 1; piece <= 70; ++piece) {
      Sha256 h;
      for (size_t at = 0; at < m.size(); at += piece) h.update(m.substr(at, piece));
      ASSERT_EQ(to_hex(h.finish()), whole) << "length " << len << ", pieces of " << piece;
    }
  }
  // A one-bit change changes the digest.
  std::string flipped = msg;
  flipped[100] ^= 1;
  EXPECT_NE(hex(flipped), hex(msg));
}
