//===- PlanFormat.h - the .plan container, shared by writer and runtime ---===//
//
// A plan is one file:
//
//   [PlanHeader, 128 bytes][manifest text][pad to 64][weights][pad to 64][code]
//
// The header locates the segments; the manifest (line-oriented text, see
// docs/Plan.md) describes the inputs, outputs, tensors, layers and the arena;
// the weights segment holds the packed constants the layers read; the code
// segment is an ELF shared object with one entry point per layer. The
// runtime owns this header: the compiler includes it, never the reverse, and
// it includes nothing from MLIR or LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_RUNTIME_PLANFORMAT_H
#define QATC_RUNTIME_PLANFORMAT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qatc::plan {

/// "QATCPLN\0" at offset 0.
inline constexpr char kMagic[8] = {'Q', 'A', 'T', 'C', 'P', 'L', 'N', '\0'};
/// Bumped whenever the header, the manifest grammar or the layer ABI change.
/// Version 2: the code segment carries a code record (below). Version 3: the
/// layers' barrier flags. Version 4: a thread's share of a layer is a range
/// of the work (LayerFn), not its index among equal shares.
inline constexpr uint32_t kFormatVersion = 4;
/// Segments start at multiples of this (aligned vector loads of weights).
inline constexpr uint64_t kSegmentAlign = 64;

/// CPU features a plan's code may require (bits of PlanHeader::cpuFeatures).
enum CpuFeature : uint64_t {
  kFeatAVX2 = 1u << 0,
  kFeatFMA = 1u << 1,
  kFeatAVX512F = 1u << 2,
  kFeatAVX512BW = 1u << 3,
  kFeatAVX512VL = 1u << 4,
  kFeatAVX512VNNI = 1u << 5,
  kFeatAVXVNNI = 1u << 6,
  kFeatAVX512DQ = 1u << 7,
  /// AMX tiles and their int8 products. hostFeatures() reports them only
  /// when Linux lets this process use the tile state.
  kFeatAMXTILE = 1u << 8,
  kFeatAMXINT8 = 1u << 9,
};
/// Every feature bit this runtime knows; a header with others is refused.
inline constexpr uint64_t kKnownFeatures = (1u << 10) - 1;

/// The names of the features in `mask`, space separated ("avx2 fma ...").
std::string featureNames(uint64_t mask);
/// The features of the CPU this process runs on. AMX counts only when the
/// CPU has it, the OS saves its state (XCR0) and Linux granted this process
/// the tile data (arch_prctl(ARCH_REQ_XCOMP_PERM), asked once, on the first
/// call): code using tiles may run on any thread of the process after that.
uint64_t hostFeatures();
/// Why the CPU's AMX is not usable here ("" when it is, or the CPU has none).
std::string amxUnavailableReason();

/// The fixed-size header at offset 0, little-endian.
struct PlanHeader {
  char magic[8];
  uint32_t formatVersion;
  uint32_t headerSize;
  uint64_t fileSize;
  /// checksum() of the whole file with this field read as zero.
  uint64_t checksum;
  uint64_t cpuFeatures;
  uint64_t manifestOffset, manifestSize;
  uint64_t weightsOffset, weightsSize;
  uint64_t codeOffset, codeSize;
  /// NUL-terminated version of the compiler that wrote the plan.
  char compilerVersion[40];
};
static_assert(sizeof(PlanHeader) == 128, "the header is 128 bytes");

/// A 64-bit checksum of `size` bytes (word-wise multiply-xorshift; detects
/// bit flips and truncation, not tampering: a plan is trusted native code).
uint64_t checksum(const uint8_t *data, size_t size, size_t skipOffset,
                  size_t skipSize);

/// Element types of plan tensors.
/// Bool: one byte, 0 or 1 (graph inputs and outputs; inside, bools are held
/// as f32 0 / 1).
/// I16, U16, U32 (and non-quantized I8 / U8) appear at the graph boundary;
/// inside, narrow integers are held as I32 (U32 as I64).
enum class ElemType : uint8_t {
  F32,
  I8,
  U8,
  I32,
  I64,
  Bool,
  I16,
  U16,
  U32,
  F64
};
const char *elemTypeName(ElemType t);
bool parseElemType(const std::string &s, ElemType &t);
size_t elemSize(ElemType t);

/// How a tensor is laid out in the arena. `Plain` is the row-major order of
/// its logical (ONNX) shape; `NHWC` stores a rank-4 NCHW tensor as
/// [N][H][W][channelStride] (channels padded to channelStride), a rank-2
/// [M, K] tensor as [M][channelStride].
enum class Layout : uint8_t { Plain, NHWC };

/// A tensor in the arena. Quantized int8 tensors may be stored with an
/// offset of +128 (s8 values held as u8 = q + 128, see docs/Plan.md):
/// `storedOffset` is what was added to each stored value.
struct TensorDesc {
  std::string name; ///< the ONNX tensor name
  ElemType type = ElemType::F32;
  std::vector<int64_t> shape; ///< logical (ONNX) shape
  Layout layout = Layout::Plain;
  int64_t channelStride = 0; ///< NHWC only
  uint64_t offset = 0;       ///< in the arena
  uint64_t bytes = 0;
  bool quantized = false;
  double scale = 0;      ///< quantized only
  int64_t zeroPoint = 0; ///< in the ONNX type's domain
  int64_t storedOffset = 0;
  bool isSigned = true; ///< the ONNX element type of quantized data
  int line = 0;         ///< the manifest line that declared it (errors)

  int64_t numElements() const;
  /// Elements the layout stores (padded channels included).
  int64_t storedElements() const;
};

/// One compiled layer: an entry point of the code segment.
struct LayerDesc {
  std::string symbol;    ///< the function in the code segment
  std::string node;      ///< the ONNX node it came from
  std::string opType;    ///< "Conv", "Gemm", ...
  std::string precision; ///< "int8", "fp32", "layout"
  std::string kernel;    ///< e.g. "vnni-conv 6x64", "fp32-conv 6x32"
  bool parallel = false; ///< split across threads (else thread 0 runs it)
  /// The threads meet at a barrier before it: it touches what a layer since
  /// they last met writes, or writes what such a layer reads (the compiler
  /// decides: codegen::barriersBefore).
  bool sync = true;
  int64_t macs = 0;                 ///< multiply-accumulates (for % of peak)
  std::vector<int> inputs, outputs; ///< indices into Manifest::tensors
  int line = 0;                     ///< the manifest line (errors)
};

/// Everything the runtime knows about a plan besides its bytes.
struct Manifest {
  std::string compiler;
  std::string target; ///< "avx512vnni", "avxvnni", "avx2", "generic"
  uint64_t arenaBytes = 0;
  int arenaLine = 0; ///< the manifest line of arenaBytes (errors)
  /// codeDigest() of the code segment, checked before the code is loaded:
  /// code bytes changed (and the file checksum recomputed) never reach the
  /// dynamic loader.
  uint64_t codeDigest = 0;
  int codeLine = 0;
  std::vector<TensorDesc> tensors;
  std::vector<int> inputs, outputs; ///< graph I/O, indices into tensors
  std::vector<LayerDesc> layers;
};

/// A shape as the manifest writes it: "1x3x224x224", "scalar" for rank 0.
std::string shapeText(const std::vector<int64_t> &shape);
/// Percent-encodes a manifest token (space, '%', control and non-ASCII
/// bytes); the empty string is a lone '%'. Also how an error shows
/// untrusted bytes on one line.
std::string encodeToken(const std::string &s);

/// The manifest's text form (docs/Plan.md).
std::string writeManifest(const Manifest &m);
/// Parses and validates a manifest: every record's syntax, every index,
/// every tensor inside the arena and its bytes holding its shape in its
/// layout (sizes computed without overflow), quantization parameters (a
/// finite positive scale, a zero point in its type's range, the storage
/// offset its signedness implies), distinct inputs and outputs. On failure
/// returns false and says why, starting "manifest line N: ".
bool parseManifest(const std::string &text, Manifest &m, std::string &error);

/// The code record: what the code segment was compiled for, defined by the
/// code itself so that the loader can hold the manifest and header against
/// it before any layer runs (a checksum only says the file is as written,
/// not that an edited manifest still matches the code). The code defines
/// kCodeRecordSymbol as kCodeRecordWords uint64_t words (CodeRecordWord
/// order) and kCodeLayersSymbol as the layer symbols, each ended by a NUL.
inline constexpr char kCodeRecordSymbol[] = "qatc_plan_code_record";
inline constexpr char kCodeLayersSymbol[] = "qatc_plan_code_layers";
inline constexpr uint64_t kCodeRecordMagic = 0x31524344434f4351ULL; // QOCDCR1
enum CodeRecordWord {
  kRecMagic,
  kRecFormatVersion,
  kRecArenaBytes,   ///< the arena the code addresses
  kRecWeightsBytes, ///< the weights segment the code reads
  kRecCpuFeatures,  ///< what the code needs (the header's cpuFeatures)
  kRecLayerCount,
  kRecLayersBytes,     ///< the size of kCodeLayersSymbol
  kRecInterfaceDigest, ///< interfaceDigest() of the manifest
  kCodeRecordWords
};
/// A digest of the manifest's graph inputs and outputs (names, types,
/// shapes, layouts, places and quantization): what the runtime writes and
/// reads for the caller, and what the code was compiled to find.
uint64_t interfaceDigest(const Manifest &m);
/// The digest of a code segment that Manifest::codeDigest records.
uint64_t codeDigest(const uint8_t *code, size_t size);
/// The manifest's record of tensor `t` as text (its line without "tensor").
std::string tensorRecord(const TensorDesc &t);

/// A multi-path plan: code for several instruction sets in one file, the
/// runtime runs the best one the CPU has. It is a container of ordinary
/// (single-path) plans, stored as deduplicated segments:
///
///   [MultiPlanHeader, 128 bytes][SegmentEntry x segmentCount]
///   [PathEntry x pathCount][pad to 64][segments, each 64-aligned]
///
/// Path i is the single-path plan `head ++ weights ++ code` of its three
/// segments: the head is that plan's bytes before its weights (header,
/// manifest, padding), so reassembling a path gives back, byte for byte,
/// the plan `qatc compile --target-cpu <path>` writes, which is then
/// verified as any plan is (its own checksum included). Paths whose
/// weights packings agree share one weights segment.
inline constexpr char kMultiMagic[8] = {'Q', 'A', 'T', 'C',
                                        'M', 'P', 'L', '\0'};
inline constexpr uint32_t kMultiFormatVersion = 1;
/// More paths than any target list needs; a header asking for more is
/// corrupt.
inline constexpr uint32_t kMaxPaths = 16;

struct MultiPlanHeader {
  char magic[8];
  uint32_t formatVersion;
  uint32_t headerSize;
  uint64_t fileSize;
  /// checksum() of the whole file with this field read as zero.
  uint64_t checksum;
  uint32_t pathCount;
  uint32_t segmentCount;
  char compilerVersion[40];
  uint8_t reserved[48];
};
static_assert(sizeof(MultiPlanHeader) == 128, "the header is 128 bytes");

struct SegmentEntry {
  uint64_t offset, size;
};

/// Paths are stored best first: the runtime takes the first one whose CPU
/// features this CPU has.
struct PathEntry {
  char target[16]; ///< NUL-terminated target name ("avx512vnni", ...)
  uint64_t cpuFeatures;
  uint32_t headSegment, weightsSegment, codeSegment, reserved;
};
static_assert(sizeof(PathEntry) == 40, "a path entry is 40 bytes");

/// One path of a multi-path plan, as the table describes it.
struct PathDesc {
  std::string target;
  uint64_t cpuFeatures = 0;
  uint32_t headSegment = 0, weightsSegment = 0, codeSegment = 0;
  uint64_t planBytes = 0; ///< of the reassembled plan
  uint64_t weightsBytes = 0, codeBytes = 0;
};

/// True when `data` starts with the multi-path magic.
bool isMultiPlan(const uint8_t *data, size_t size);
/// Validates a multi-path plan's header and tables (bounds, alignment,
/// checksum unless `verifyChecksum` is false, every path's head against its
/// segments) and lists its paths. On failure returns false and says why
/// ("corrupt plan: path 2: ...").
bool parseMultiPlan(const uint8_t *data, size_t size, bool verifyChecksum,
                    std::vector<PathDesc> &paths,
                    std::vector<SegmentEntry> &segments, std::string &error);
/// The first (best) of `paths` whose CPU features `hostFeatures` has, or -1:
/// the path a multi-path plan runs when none is asked for by name.
int firstRunnablePath(const std::vector<PathDesc> &paths,
                      uint64_t hostFeatures);
/// Writes the single-path plan of `path` (after parseMultiPlan accepted it)
/// to `out`: path.planBytes bytes, zeroed by the caller.
void assemblePath(const uint8_t *data, const PathDesc &path,
                  const std::vector<SegmentEntry> &segments, uint8_t *out);
/// A multi-path plan of `plans` (single-path plans, best first, distinct
/// targets), equal segments stored once.
std::vector<uint8_t>
writeMultiPlan(const std::vector<std::vector<uint8_t>> &plans,
               const std::string &compilerVersion);

/// A whole layer's work in the units of a share (LayerFn).
inline constexpr int64_t kShareOne = int64_t(1) << 16;

/// The `share` argument of a layer function: the calling thread does the
/// part [lo, hi) of the layer's work, in units of 1 / kShareOne of it.
inline constexpr int64_t packShare(int64_t lo, int64_t hi) {
  return lo | (hi << 32);
}

/// Symbols every layer function has: (arena, weights, share, threads). The
/// threads that run a shared layer together pass shares that tile
/// [0, kShareOne) in thread order (packShare), and each takes the work
/// items from floor(lo * n / kShareOne) to floor(hi * n / kShareOne) of its
/// n; thread 0 alone passes packShare(0, kShareOne) and 1. The runtime may
/// make the shares unequal (a slower core gets less), but with T > 1
/// threads none is under kShareOne / (2 T): a kernel may rely on that to
/// lay out its part (codegen::emitDenseConv's even split).
using LayerFn = void (*)(uint8_t *arena, const uint8_t *weights, int64_t share,
                         int64_t nthreads);

} // namespace qatc::plan

#endif // QATC_RUNTIME_PLANFORMAT_H
