//===- Npy.cpp - numpy .npy and .npz files --------------------------------===//
//
// .npy: magic, version, a Python-dict header (descr, fortran_order, shape)
// and the raw data. .npz: a zip archive of .npy files; numpy.savez stores
// them uncompressed (with zip64 extra fields), savez_compressed deflates
// them. The zip reader walks the central directory, so both work.
//
//===----------------------------------------------------------------------===//

#include "qatc/Support/Npy.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <zlib.h>

using namespace qatc;
using llvm::StringRef;

namespace {

struct TypeInfo {
  NpyType type;
  const char *descr;
  const char *name;
  size_t size;
};

const TypeInfo kTypes[] = {
    {NpyType::F32, "<f4", "float32", 4}, {NpyType::F64, "<f8", "float64", 8},
    {NpyType::F16, "<f2", "float16", 2}, {NpyType::I8, "|i1", "int8", 1},
    {NpyType::U8, "|u1", "uint8", 1},    {NpyType::I16, "<i2", "int16", 2},
    {NpyType::U16, "<u2", "uint16", 2},  {NpyType::I32, "<i4", "int32", 4},
    {NpyType::U32, "<u4", "uint32", 4},  {NpyType::I64, "<i8", "int64", 8},
    {NpyType::U64, "<u8", "uint64", 8},  {NpyType::Bool, "|b1", "bool", 1},
};

const TypeInfo &info(NpyType type) {
  for (const TypeInfo &t : kTypes)
    if (t.type == type)
      return t;
  return kTypes[0];
}

llvm::Error fail(StringRef name, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 (name + ": " + msg).str());
}

/// The value of `key` in a numpy header dict, as written (quotes stripped).
std::optional<StringRef> headerValue(StringRef header, StringRef key) {
  size_t pos = header.find(("'" + key + "'").str());
  if (pos == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(pos + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  if (rest.starts_with("(")) {
    size_t end = rest.find(')');
    return end == StringRef::npos ? std::nullopt
                                  : std::optional(rest.slice(1, end));
  }
  if (rest.starts_with("'") || rest.starts_with("\"")) {
    char q = rest.front();
    size_t end = rest.find(q, 1);
    return end == StringRef::npos ? std::nullopt
                                  : std::optional(rest.slice(1, end));
  }
  return rest.take_until([](char c) { return c == ',' || c == '}'; }).trim();
}

uint16_t le16(const char *p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) |
                               (static_cast<uint8_t>(p[1]) << 8));
}
uint32_t le32(const char *p) {
  return static_cast<uint32_t>(le16(p)) |
         (static_cast<uint32_t>(le16(p + 2)) << 16);
}
uint64_t le64(const char *p) {
  return static_cast<uint64_t>(le32(p)) |
         (static_cast<uint64_t>(le32(p + 4)) << 32);
}

void put16(std::string &s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>(v >> 8));
}
void put32(std::string &s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

} // namespace

size_t qatc::npyTypeSize(NpyType type) { return info(type).size; }
StringRef qatc::npyTypeName(NpyType type) { return info(type).name; }

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

llvm::Expected<NpyArray> qatc::parseNpy(StringRef bytes, StringRef name) {
  if (bytes.size() < 10 || !bytes.starts_with("\x93NUMPY"))
    return fail(name, "is not a .npy file (no NUMPY magic)");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3)
    return fail(name, "has unsupported .npy format version " +
                          llvm::Twine(static_cast<int>(major)));
  size_t headerLen = major == 1
                         ? le16(bytes.data() + 8)
                         : (bytes.size() >= 12 ? le32(bytes.data() + 8) : 0);
  size_t start = major == 1 ? 10 : 12;
  if (start + headerLen > bytes.size())
    return fail(name, "is truncated (header)");
  StringRef header = bytes.substr(start, headerLen);
  auto descr = headerValue(header, "descr");
  auto order = headerValue(header, "fortran_order");
  auto shape = headerValue(header, "shape");
  if (!descr || !order || !shape)
    return fail(name, "has a malformed header: " + header.trim());
  NpyArray array;
  const TypeInfo *type = nullptr;
  for (const TypeInfo &t : kTypes) {
    // '|i1' and '<i1' (and '=' for the native order) mean the same.
    StringRef d = *descr;
    if (d == t.descr ||
        (d.size() == 3 && StringRef(t.descr).substr(1) == d.substr(1) &&
         (d[0] == '<' || d[0] == '|' || d[0] == '=')))
      type = &t;
  }
  if (!type)
    return fail(name, "has dtype '" + *descr +
                          "'; qatc reads float32, float64, float16, int8-64, "
                          "uint8-64 and bool");
  if (order->trim() != "False")
    return fail(name, "is in Fortran order; save it in C order "
                      "(numpy.ascontiguousarray)");
  array.type = type->type;
  llvm::SmallVector<StringRef> dims;
  shape->split(dims, ',', -1, /*KeepEmpty=*/false);
  for (StringRef d : dims) {
    d = d.trim();
    if (d.empty())
      continue;
    int64_t v;
    if (d.getAsInteger(10, v) || v < 0)
      return fail(name, "has a malformed shape (" + *shape + ")");
    array.shape.push_back(v);
  }
  // The element count and byte size, without overflow: a shape may claim
  // anything (even with a zero dimension, every prefix product must fit).
  StringRef data = bytes.drop_front(start + headerLen);
  uint64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : array.shape) {
    empty |= d == 0;
    if (d &&
        __builtin_mul_overflow(nonzero, static_cast<uint64_t>(d), &nonzero))
      nonzero = UINT64_MAX;
  }
  if (nonzero > (uint64_t(1) << 48))
    return fail(name, "has an impossible shape (" + shape->trim() + ")");
  uint64_t need = empty ? 0 : nonzero * type->size;
  if (data.size() < need)
    return fail(name, "is truncated: " + llvm::Twine(data.size()) +
                          " data bytes for " + llvm::Twine(need) + " needed");
  array.data.assign(data.begin(), data.begin() + need);
  return array;
}

llvm::Expected<NpyArray> qatc::readNpy(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path, "cannot be read: " + buffer.getError().message());
  return parseNpy((*buffer)->getBuffer(), path);
}

std::string qatc::serializeNpy(const NpyArray &array) {
  std::string dims;
  for (int64_t d : array.shape)
    dims += std::to_string(d) + ", ";
  if (array.shape.size() > 1)
    dims.resize(dims.size() - 2);
  else if (array.shape.size() == 1)
    dims.pop_back();
  std::string header = std::string("{'descr': '") + info(array.type).descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad so that the data starts 64-byte aligned; the header ends in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  put16(out, static_cast<uint16_t>(header.size()));
  out += header;
  out.append(array.data.begin(), array.data.end());
  return out;
}

static llvm::Error writeFile(StringRef path, StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return fail(path, "cannot be written: " + ec.message());
  os << bytes;
  os.close();
  if (os.has_error())
    return fail(path, "cannot be written: " + os.error().message());
  return llvm::Error::success();
}

llvm::Error qatc::writeNpy(StringRef path, const NpyArray &array) {
  return writeFile(path, serializeNpy(array));
}

llvm::Expected<std::map<std::string, NpyArray>> qatc::readNpz(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path, "cannot be read: " + buffer.getError().message());
  return parseNpz((*buffer)->getBuffer(), path);
}

llvm::Expected<std::map<std::string, NpyArray>> qatc::parseNpz(StringRef zip,
                                                               StringRef path) {
  // [off, off + len) lies inside the archive (no overflow: zip64 fields
  // are 64-bit and may hold anything).
  auto inside = [&](uint64_t off, uint64_t len) {
    return off <= zip.size() && len <= zip.size() - off;
  };
  // End of central directory: the last 0x06054b50 record (it is followed
  // by at most a 64 KiB comment).
  size_t eocd = StringRef::npos;
  if (zip.size() >= 22) {
    size_t lowest = zip.size() > 22 + 65535 ? zip.size() - 22 - 65535 : 0;
    for (size_t i = zip.size() - 22 + 1; i-- > lowest;) {
      if (le32(zip.data() + i) == 0x06054b50) {
        eocd = i;
        break;
      }
    }
  }
  if (eocd == StringRef::npos)
    return fail(path, "is not a .npz file (no zip directory)");
  uint64_t entries = le16(zip.data() + eocd + 10);
  uint64_t dirOffset = le32(zip.data() + eocd + 16);
  if (dirOffset == 0xffffffff || entries == 0xffff) {
    // Zip64: the locator just before the EOCD points at the zip64 EOCD.
    if (eocd < 20 || le32(zip.data() + eocd - 20) != 0x07064b50)
      return fail(path, "has a broken zip64 directory");
    uint64_t z64 = le64(zip.data() + eocd - 20 + 8);
    if (!inside(z64, 56) || le32(zip.data() + z64) != 0x06064b50)
      return fail(path, "has a broken zip64 directory");
    entries = le64(zip.data() + z64 + 32);
    dirOffset = le64(zip.data() + z64 + 48);
  }
  std::map<std::string, NpyArray> out;
  uint64_t p = dirOffset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (!inside(p, 46) || le32(zip.data() + p) != 0x02014b50)
      return fail(path, "has a corrupt zip directory");
    uint16_t method = le16(zip.data() + p + 10);
    uint64_t compSize = le32(zip.data() + p + 20);
    uint64_t size = le32(zip.data() + p + 24);
    uint16_t nameLen = le16(zip.data() + p + 28);
    uint16_t extraLen = le16(zip.data() + p + 30);
    uint16_t commentLen = le16(zip.data() + p + 32);
    uint64_t local = le32(zip.data() + p + 42);
    if (!inside(p, 46 + nameLen + extraLen))
      return fail(path, "has a corrupt zip directory");
    std::string entryName(zip.data() + p + 46, nameLen);
    // Zip64 extra field: the 0xffffffff fields, in order.
    StringRef extra = zip.substr(p + 46 + nameLen, extraLen);
    while (extra.size() >= 4) {
      uint16_t id = le16(extra.data()), len = le16(extra.data() + 2);
      StringRef body = extra.substr(4, len);
      if (id == 0x0001) {
        size_t q = 0;
        auto next = [&](uint64_t &field) {
          if (field == 0xffffffff && q + 8 <= body.size()) {
            field = le64(body.data() + q);
            q += 8;
          }
        };
        next(size);
        next(compSize);
        next(local);
      }
      extra = extra.drop_front(std::min<size_t>(extra.size(), 4 + len));
    }
    p += 46 + nameLen + extraLen + commentLen;
    if (!inside(local, 30) || le32(zip.data() + local) != 0x04034b50)
      return fail(path, "has a corrupt entry '" + entryName + "'");
    uint64_t dataStart = local + 30 + le16(zip.data() + local + 26) +
                         le16(zip.data() + local + 28);
    if (!inside(dataStart, compSize))
      return fail(path, "is truncated (entry '" + entryName + "')");
    // Deflate expands at most 1032:1; a larger claimed size is a lie that
    // would only allocate memory.
    if (method == 8 && size > compSize * 1032 + 64)
      return fail(path, "has a corrupt compressed entry '" + entryName + "'");
    StringRef comp = zip.substr(dataStart, compSize);
    std::string raw;
    if (method == 0) {
      raw = comp.str();
    } else if (method == 8) {
      raw.resize(size);
      z_stream zs{};
      if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
        return fail(path, "cannot be inflated");
      zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(comp.data()));
      zs.avail_in = static_cast<uInt>(comp.size());
      zs.next_out = reinterpret_cast<Bytef *>(raw.data());
      zs.avail_out = static_cast<uInt>(raw.size());
      int rc = inflate(&zs, Z_FINISH);
      inflateEnd(&zs);
      if (rc != Z_STREAM_END || zs.total_out != size)
        return fail(path, "has a corrupt compressed entry '" + entryName + "'");
    } else {
      return fail(path, "uses zip compression method " + llvm::Twine(method) +
                            "; use numpy.savez or savez_compressed");
    }
    StringRef key(entryName);
    key.consume_back(".npy");
    auto array = parseNpy(raw, (path + ":" + entryName).str());
    if (!array)
      return array.takeError();
    out[key.str()] = std::move(*array);
  }
  return out;
}

llvm::Error
qatc::writeNpz(StringRef path,
               const std::vector<std::pair<std::string, NpyArray>> &arrays) {
  std::string zip, dir;
  for (const auto &[name, array] : arrays) {
    std::string file = name + ".npy";
    std::string bytes = serializeNpy(array);
    uint32_t crc = llvm::crc32(llvm::arrayRefFromStringRef(bytes));
    if (zip.size() > 0xffffffffull || bytes.size() > 0xffffffffull)
      return fail(path, "is too large for a plain zip archive");
    uint32_t offset = static_cast<uint32_t>(zip.size());
    auto header = [&](std::string &s, bool central) {
      put32(s, central ? 0x02014b50 : 0x04034b50);
      if (central)
        put16(s, 20); // version made by
      put16(s, 20);   // version needed
      put16(s, 0);    // flags
      put16(s, 0);    // stored
      put16(s, 0);    // time
      put16(s, 0x21); // date 1980-01-01
      put32(s, crc);
      put32(s, static_cast<uint32_t>(bytes.size()));
      put32(s, static_cast<uint32_t>(bytes.size()));
      put16(s, static_cast<uint16_t>(file.size()));
      put16(s, 0); // extra
      if (central) {
        put16(s, 0); // comment
        put16(s, 0); // disk
        put16(s, 0); // internal attributes
        put32(s, 0); // external attributes
        put32(s, offset);
      }
      s += file;
    };
    header(zip, false);
    zip += bytes;
    header(dir, true);
  }
  uint32_t dirOffset = static_cast<uint32_t>(zip.size());
  zip += dir;
  put32(zip, 0x06054b50);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, static_cast<uint16_t>(arrays.size()));
  put16(zip, static_cast<uint16_t>(arrays.size()));
  put32(zip, static_cast<uint32_t>(dir.size()));
  put32(zip, dirOffset);
  put16(zip, 0);
  return writeFile(path, zip);
}
