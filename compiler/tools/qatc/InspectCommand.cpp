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
#include "llvm/Support/JSON.h"

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

} // namespace

int qatc::driver::runInspect() {
  std::string error;
  // Described, not run: a plan for another CPU is shown too.
  rt::Plan::LoadOptions describe;
  describe.runnable = false;
  auto plan = rt::Plan::load(planPath, error, describe);
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
    std::string s = t.name + " " + plan::elemTypeName(t.type) + " " +
                    plan::shapeText(t.shape);
    if (t.quantized)
      s += " (scale " + std::to_string(t.scale) + ", zero point " +
           std::to_string(t.zeroPoint) + ")";
    return s;
  };
  if (json) {
    llvm::json::OStream j(llvm::outs(), 2);
    j.object([&] {
      j.attribute("format_version", static_cast<int64_t>(h.formatVersion));
      j.attribute("compiler", h.compilerVersion);
      j.attribute("target", m.target);
      j.attribute("required_features", plan::featureNames(h.cpuFeatures));
      j.attribute("runs_here", plan->missingFeatures() == 0);
      if (plan->missingFeatures())
        j.attribute("missing_features",
                    plan::featureNames(plan->missingFeatures()));
      j.attribute("bytes", h.fileSize);
      j.attribute("weights_bytes", h.weightsSize);
      j.attribute("code_bytes", h.codeSize);
      j.attribute("arena_bytes", m.arenaBytes);
      j.attribute("macs", macs);
      j.attribute("int8_macs", int8Macs);
      for (bool out : {false, true})
        j.attributeArray(out ? "outputs" : "inputs", [&] {
          for (int i : out ? m.outputs : m.inputs)
            j.object([&] {
              const plan::TensorDesc &t = m.tensors[i];
              j.attribute("name", t.name);
              j.attribute("type", plan::elemTypeName(t.type));
              j.attribute("shape", plan::shapeText(t.shape));
            });
        });
      j.attributeArray("layers", [&] {
        for (const plan::LayerDesc &l : m.layers)
          j.object([&] {
            j.attribute("node", l.node);
            j.attribute("op", l.opType);
            j.attribute("precision", l.precision);
            j.attribute("kernel", l.kernel);
            j.attribute("parallel", l.parallel);
            j.attribute("macs", l.macs);
          });
      });
      j.attributeArray("tensors", [&] {
        for (const plan::TensorDesc &t : m.tensors)
          j.object([&] {
            j.attribute("name", t.name);
            j.attribute("offset", t.offset);
            j.attribute("bytes", t.bytes);
            j.attribute("layout",
                        t.layout == plan::Layout::NHWC ? "nhwc" : "plain");
          });
      });
    });
    llvm::outs() << "\n";
    return 0;
  }
  llvm::outs() << planPath << ": qatc plan v" << h.formatVersion << " by "
               << h.compilerVersion << ", " << h.fileSize << " bytes\n"
               << "  target " << m.target << "; requires "
               << plan::featureNames(h.cpuFeatures)
               << (plan->missingFeatures()
                       ? " (this CPU lacks " +
                             plan::featureNames(plan->missingFeatures()) +
                             ": the plan cannot run here)"
                       : std::string())
               << "\n"
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
                      "  {:<4} {:<48} {:<17} {:<7} {:<26} {:>12} {:>10}\n", "#",
                      "node", "op", "prec", "kernel", "MACs", "out@arena");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const plan::LayerDesc &l = m.layers[i];
    std::string node = lastChars(l.node, 48);
    std::string where = l.outputs.empty()
                            ? "-"
                            : std::to_string(m.tensors[l.outputs[0]].offset);
    llvm::outs() << fmt::format(
        "  {:<4} {:<48} {:<17} {:<7} {:<26} {:>12} {:>10}\n", i, node, l.opType,
        l.precision, l.kernel, l.macs, where);
  }
  return 0;
}
