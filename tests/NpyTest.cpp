//===- NpyTest.cpp - numpy file I/O and tensor comparison -----------------===//

#include "qatc/Support/Npy.h"
#include "qatc/Reference/Compare.h"
#include "qatc/Reference/TensorIO.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace qatc;
using namespace qatc::ref;

namespace {

std::string errorOf(llvm::Expected<NpyArray> r) {
  if (r)
    return "";
  return llvm::toString(r.takeError());
}

std::string header(const std::string &dict) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(h.size() & 0xff));
  out.push_back(static_cast<char>(h.size() >> 8));
  return out + h;
}

} // namespace

TEST(Npy, RoundTripsEveryType) {
  for (NpyType type : {NpyType::F32, NpyType::F64, NpyType::I8, NpyType::U8,
                       NpyType::I16, NpyType::U16, NpyType::I32, NpyType::U32,
                       NpyType::I64, NpyType::U64, NpyType::Bool}) {
    NpyArray a;
    a.type = type;
    a.shape = {2, 3};
    a.data.resize(6 * npyTypeSize(type));
    for (size_t i = 0; i < a.data.size(); ++i)
      a.data[i] = static_cast<char>(type == NpyType::Bool ? i % 2 : i * 7 + 1);
    std::string bytes = serializeNpy(a);
    EXPECT_EQ((bytes.size() - a.data.size()) % 64, 0u); // aligned data
    auto b = parseNpy(bytes, "mem");
    ASSERT_TRUE(bool(b)) << npyTypeName(type).str();
    EXPECT_EQ(b->type, type);
    EXPECT_EQ(b->shape, a.shape);
    EXPECT_EQ(b->data, a.data);
  }
  NpyArray scalar;
  scalar.type = NpyType::F32;
  scalar.data.resize(4);
  auto s = parseNpy(serializeNpy(scalar), "mem");
  ASSERT_TRUE(bool(s));
  EXPECT_TRUE(s->shape.empty());
}

TEST(Npy, BadFilesSayWhatIsWrong) {
  EXPECT_EQ(errorOf(parseNpy("hello world", "x.npy")),
            "x.npy: is not a .npy file (no NUMPY magic)");
  std::string ok =
      header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }");
  EXPECT_EQ(errorOf(parseNpy(ok + std::string(8, '\0'), "t.npy")),
            "t.npy: is truncated: 8 data bytes for 16 needed");
  EXPECT_EQ(errorOf(parseNpy(header("{'descr': '<f4', 'fortran_order': True, "
                                    "'shape': (2,), }") +
                                 std::string(8, '\0'),
                             "f.npy")),
            "f.npy: is in Fortran order; save it in C order "
            "(numpy.ascontiguousarray)");
  EXPECT_NE(errorOf(parseNpy(header("{'descr': '<c8', 'fortran_order': False, "
                                    "'shape': (2,), }"),
                             "c.npy"))
                .find("c.npy: has dtype '<c8'"),
            std::string::npos);
  EXPECT_NE(errorOf(parseNpy(header("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (2, x), }"),
                             "s.npy"))
                .find("has a malformed shape"),
            std::string::npos);
  EXPECT_EQ(
      errorOf(parseNpy(std::string("\x93NUMPY\x01\x00\xff\x00", 10), "h.npy")),
      "h.npy: is truncated (header)");
  EXPECT_NE(errorOf(readNpy("/nonexistent/qatc.npy")).find("cannot be read"),
            std::string::npos);
  // A shape whose element count overflows 64 bits is not read as the
  // wrapped-around count.
  EXPECT_EQ(
      errorOf(parseNpy(header("{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (4294967296, 4294967296, 16), }") +
                           std::string(64, '\0'),
                       "o.npy")),
      "o.npy: has an impossible shape (4294967296, 4294967296, 16)");
}

TEST(Npy, NpzOffsetsThatOverflowAreRefused) {
  // A stored entry whose local-header offset is the largest 64-bit value
  // (a zip64 extra field may say anything): offset + 30 wraps around.
  std::string zip, dir;
  auto put16 = [](std::string &s, uint16_t v) {
    s += static_cast<char>(v & 0xff);
    s += static_cast<char>(v >> 8);
  };
  auto put32 = [&](std::string &s, uint32_t v) {
    put16(s, v & 0xffff);
    put16(s, v >> 16);
  };
  put32(dir, 0x02014b50);
  for (int i = 0; i < 4; ++i)
    put16(dir, 0); // versions, flags, method (stored)
  put32(dir, 0);   // time and date
  put32(dir, 0);   // crc
  put32(dir, 4);   // compressed size
  put32(dir, 4);   // size
  put16(dir, 5);   // name length
  put16(dir, 12);  // extra length
  for (int i = 0; i < 3; ++i)
    put16(dir, 0);        // comment, disk, internal attributes
  put32(dir, 0);          // external attributes
  put32(dir, 0xffffffff); // local header offset: in the zip64 field
  dir += "a.npy";
  put16(dir, 0x0001); // zip64 extra field
  put16(dir, 8);
  put32(dir, 0xffffffff);
  put32(dir, 0xffffffff);
  zip += dir;
  put32(zip, 0x06054b50);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, 1);
  put16(zip, 1);
  put32(zip, static_cast<uint32_t>(dir.size()));
  put32(zip, 0);
  put16(zip, 0);
  auto r = parseNpz(zip, "z.npz");
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(llvm::toString(r.takeError()),
            "z.npz: has a corrupt entry 'a.npy'");
}

TEST(Npy, NpzWriteAndReadBack) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("qatc", "npz", path));
  Tensor a(DType::F32, {3}), b(DType::I8, {2, 2});
  for (int i = 0; i < 3; ++i)
    a.mutableData<float>()[i] = i * 1.5f;
  b.mutableData<int8_t>()[3] = -5;
  ASSERT_FALSE(bool(writeTensors(path, {{"a/b:0", a}, {"second", b}})));
  auto back = readTensors(path);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  ASSERT_EQ(back->size(), 2u);
  // numpy.load gives archive members sorted by name.
  EXPECT_EQ((*back)[0].first, "a/b:0");
  EXPECT_EQ((*back)[0].second.data<float>()[2], 3.0f);
  EXPECT_EQ((*back)[1].second.data<int8_t>()[3], -5);
  llvm::sys::fs::remove(path);
}

TEST(Compare, Metrics) {
  Tensor ref(DType::F32, {2, 4}), got(DType::F32, {2, 4});
  float r[] = {0, 1, 2, 3, 4, 3, 2, 1}, g[] = {0, 1, 2.5f, 3, 4, 3, 2, 5};
  std::memcpy(ref.mutableData<float>(), r, sizeof r);
  std::memcpy(got.mutableData<float>(), g, sizeof g);
  TensorDiff d = compareTensors("t", ref, got);
  EXPECT_DOUBLE_EQ(d.maxAbs, 4.0);
  EXPECT_DOUBLE_EQ(d.range, 4.0);
  EXPECT_DOUBLE_EQ(d.rangeRel, 1.0);
  ASSERT_TRUE(d.top1);
  EXPECT_DOUBLE_EQ(*d.top1, 0.5); // row 1's argmax moved from 0 to 3
  EXPECT_TRUE(d.ok());
  Tolerance t;
  t.minCosine = 0.99;
  t.top1 = true;
  TensorDiff strict = compareTensors("t", ref, got, t);
  EXPECT_EQ(strict.violations.size(), 2u);

  Tensor q1(DType::I8, {4}), q2(DType::I8, {4});
  q2.mutableData<int8_t>()[1] = 2;
  Tolerance lsb;
  lsb.maxLsb = 1;
  TensorDiff dq = compareTensors("q", q1, q2, lsb);
  EXPECT_TRUE(dq.quantized);
  EXPECT_EQ(dq.maxLsb, 2);
  EXPECT_EQ(dq.lsbMismatches, 1);
  EXPECT_FALSE(dq.ok());

  TensorDiff shape = compareTensors("s", ref, Tensor(DType::F32, {8}));
  EXPECT_NE(shape.problem.find("differs from the reference's"),
            std::string::npos);
  EXPECT_TRUE(std::isinf(compareTensors("same", ref, ref).sqnrDb));
}
