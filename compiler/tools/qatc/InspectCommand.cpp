//===- InspectCommand.cpp - `qatc inspect` --------------------------------===//
//
//   qatc inspect m.plan [--json]
//
// What a plan holds: target and required CPU features, inputs and outputs
// (with quantization), layers (ONNX node, precision, kernel and tile, MACs)
// and the memory plan. The plan is verified (checksum, features) first.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Runtime/Runtime.h"

#include "llvm/Support/Format.h"

#include <fmt/format.h>

#include <map>

using namespace qatc;
namespace cl = llvm::cl;

cl::SubCommand qatc::driver::inspectCommand("inspect",
                                            "Describe what a plan holds");

namespace {
cl::SubCommand &sub = qatc::driver::inspectCommand;
cl::opt<std::string> planPath(cl::Positional, cl::desc("<model.plan>"),
                              cl::Required, cl::sub(sub));
cl::opt<bool> json("json", cl::desc("Print JSON"), cl::sub(sub));

std::string shapeOf(const plan::TensorDesc &t) {
  std::string s;
  for (size_t i = 0; i < t.shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(t.shape[i]);
  return s;
}

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s)
    out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}
} // namespace

int qatc::driver::runInspect() {
  std::string error;
  auto plan = rt::Plan::load(planPath, error);
  if (!plan) {
    llvm::errs() << "qatc inspect: " << error << "\n";
    return 1;
  }
  const plan::Manifest &m = plan->manifest();
  const plan::PlanHeader &h = plan->header();
  std::map<std::string, int> kernels, precisions;
  int64_t macs = 0, int8Macs = 0;
  for (const plan::LayerDesc &l : m.layers) {
    ++kernels[l.kernel];
    ++precisions[l.precision];
    macs += l.macs;
    if (l.precision == "int8")
      int8Macs += l.macs;
  }
  auto io = [&](const plan::TensorDesc &t) {
    std::string s =
        t.name + " " + plan::elemTypeName(t.type) + " " + shapeOf(t);
    if (t.quantized)
      s += " (scale " + std::to_string(t.scale) + ", zero point " +
           std::to_string(t.zeroPoint) + ")";
    return s;
  };
  if (json) {
    llvm::outs() << "{\"format_version\": " << h.formatVersion
                 << ", \"compiler\": " << quote(h.compilerVersion)
                 << ", \"target\": " << quote(m.target)
                 << ", \"required_features\": "
                 << quote(plan::featureNames(h.cpuFeatures))
                 << ", \"bytes\": " << h.fileSize
                 << ", \"weights_bytes\": " << h.weightsSize
                 << ", \"code_bytes\": " << h.codeSize
                 << ", \"arena_bytes\": " << m.arenaBytes
                 << ", \"macs\": " << macs << ", \"int8_macs\": " << int8Macs;
    for (bool out : {false, true}) {
      llvm::outs() << (out ? ", \"outputs\": [" : ", \"inputs\": [");
      const auto &list = out ? m.outputs : m.inputs;
      for (size_t i = 0; i < list.size(); ++i) {
        const plan::TensorDesc &t = m.tensors[list[i]];
        llvm::outs() << (i ? ", " : "") << "{\"name\": " << quote(t.name)
                     << ", \"type\": \"" << plan::elemTypeName(t.type)
                     << "\", \"shape\": \"" << shapeOf(t) << "\"}";
      }
      llvm::outs() << "]";
    }
    llvm::outs() << ", \"layers\": [";
    for (size_t i = 0; i < m.layers.size(); ++i) {
      const plan::LayerDesc &l = m.layers[i];
      llvm::outs() << (i ? ", " : "") << "{\"node\": " << quote(l.node)
                   << ", \"op\": " << quote(l.opType)
                   << ", \"precision\": " << quote(l.precision)
                   << ", \"kernel\": " << quote(l.kernel)
                   << ", \"parallel\": " << (l.parallel ? "true" : "false")
                   << ", \"macs\": " << l.macs << "}";
    }
    llvm::outs() << "], \"tensors\": [";
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const plan::TensorDesc &t = m.tensors[i];
      llvm::outs() << (i ? ", " : "") << "{\"name\": " << quote(t.name)
                   << ", \"offset\": " << t.offset << ", \"bytes\": " << t.bytes
                   << ", \"layout\": \""
                   << (t.layout == plan::Layout::NHWC ? "nhwc" : "plain")
                   << "\"}";
    }
    llvm::outs() << "]}\n";
    return 0;
  }
  llvm::outs() << planPath << ": qatc plan v" << h.formatVersion << " by "
               << h.compilerVersion << ", " << h.fileSize << " bytes\n"
               << "  target " << m.target << "; requires "
               << plan::featureNames(h.cpuFeatures) << "\n"
               << "  weights " << h.weightsSize << " bytes, code " << h.codeSize
               << " bytes, activation arena " << m.arenaBytes
               << " bytes (planned for " << m.tensors.size() << " tensors)\n";
  for (int i : m.inputs)
    llvm::outs() << "  input  " << io(m.tensors[i]) << "\n";
  for (int i : m.outputs)
    llvm::outs() << "  output " << io(m.tensors[i]) << "\n";
  llvm::outs() << "  " << m.layers.size() << " layers:";
  for (auto &[p, n] : precisions)
    llvm::outs() << " " << n << " " << p;
  llvm::outs() << llvm::format("; %.1f%% of %lld MACs in int8\n",
                               macs ? 100.0 * int8Macs / macs : 0.0,
                               (long long)macs);
  llvm::outs() << "  kernels:";
  for (auto &[k, n] : kernels)
    llvm::outs() << " " << k << " (" << n << ")";
  llvm::outs() << "\n\n"
               << fmt::format(
                      "  {:<4} {:<48} {:<10} {:<7} {:<22} {:>12} {:>10}\n", "#",
                      "node", "op", "prec", "kernel", "MACs", "out@arena");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const plan::LayerDesc &l = m.layers[i];
    std::string node =
        l.node.size() > 48 ? "..." + l.node.substr(l.node.size() - 45) : l.node;
    std::string where = l.outputs.empty()
                            ? "-"
                            : std::to_string(m.tensors[l.outputs[0]].offset);
    llvm::outs() << llvm::format("  %-4zu %-48s %-10s %-7s %-22s %12lld %10s\n",
                                 i, node.c_str(), l.opType.c_str(),
                                 l.precision.c_str(), l.kernel.c_str(),
                                 (long long)l.macs, where.c_str());
  }
  return 0;
}
