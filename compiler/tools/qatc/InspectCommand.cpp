//===- InspectCommand.cpp - `qatc inspect` --------------------------------===//
//
//   qatc inspect m.plan [--json] [--isa NAME [-o path.plan]]
//
// What a plan holds: target and required CPU features, inputs and outputs
// (with quantization), layers (ONNX node, precision, kernel and tile, MACs)
// and the memory plan. The plan is verified (checksum, features) first.
// A multi-path plan lists its code paths and which one this CPU runs, then
// describes that one (or the one --isa names); -o writes it out as a plan
// of its own.
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
cl::opt<std::string> isa("isa",
                         cl::desc("The code path of a multi-path plan to "
                                  "describe (default: the one this CPU runs)"),
                         cl::value_desc("target"), cl::sub(sub));
cl::opt<std::string> extractPath(
    "o",
    cl::desc("Write the described code path of a multi-path plan to this "
             "file as a single-path plan"),
    cl::value_desc("file"), cl::sub(sub));

/// Writes the loaded path of a multi-path plan as a plan of its own: the
/// plan the loader reassembled and verified.
int extract(const rt::Plan &loaded, const std::string &to) {
  std::error_code ec;
  llvm::raw_fd_ostream os(to, ec);
  if (ec) {
    llvm::errs() << "qatc inspect: cannot write " << to << ": " << ec.message()
                 << "\n";
    return 1;
  }
  os.write(reinterpret_cast<const char *>(loaded.planData()),
           loaded.planSize());
  llvm::errs() << "wrote code path " << loaded.manifest().target << " to " << to
               << " (" << loaded.planSize() << " bytes)\n";
  return 0;
}

} // namespace

int qatc::driver::runInspect() {
  std::string error;
  // Described, not run: a plan for another CPU is shown too.
  rt::Plan::LoadOptions describe;
  describe.runnable = false;
  describe.isa = isa;
  auto plan = rt::Plan::load(planPath, error, describe);
  if (!plan) {
    llvm::errs() << "qatc inspect: " << error << "\n";
    return 1;
  }
  const std::vector<plan::PathDesc> &paths = plan->paths();
  if (!isa.empty() && paths.empty()) {
    llvm::errs() << "qatc inspect: " << planPath
                 << ": --isa: the plan holds one code path ("
                 << plan->manifest().target << ")\n";
    return 1;
  }
  if (!extractPath.empty()) {
    if (paths.empty()) {
      llvm::errs() << "qatc inspect: " << planPath
                   << ": -o: the plan holds one code path already\n";
      return 1;
    }
    return extract(*plan, extractPath);
  }
  uint64_t host = plan::hostFeatures();
  // The path Plan::load takes here without --isa.
  int runs = plan::firstRunnablePath(paths, host);
  const plan::Manifest &m = plan->manifest();
  const plan::PlanHeader &h = plan->header();
  std::map<std::string, int> kernels, precisions;
  int64_t macs = 0, int8Macs = 0;
  // Barriers between layers on more than one thread (not before the
  // first: the run starts at one).
  int shared = 0, barriers = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    shared += m.layers[i].parallel;
    barriers += i > 0 && m.layers[i].sync;
  }
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
      if (!paths.empty()) {
        j.attribute("path", m.target);
        j.attribute("file_bytes", plan->fileBytes());
        j.attributeArray("paths", [&] {
          for (size_t i = 0; i < paths.size(); ++i)
            j.object([&] {
              const plan::PathDesc &p = paths[i];
              j.attribute("target", p.target);
              j.attribute("required_features",
                          plan::featureNames(p.cpuFeatures));
              j.attribute("runs_here", (p.cpuFeatures & ~host) == 0);
              j.attribute("chosen_here", static_cast<int>(i) == runs);
              j.attribute("plan_bytes", p.planBytes);
              j.attribute("weights_segment",
                          static_cast<int64_t>(p.weightsSegment));
              j.attribute("weights_bytes", p.weightsBytes);
              j.attribute("code_bytes", p.codeBytes);
            });
        });
      }
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
            j.attribute("barrier_before", l.sync);
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
  if (!paths.empty()) {
    llvm::outs() << planPath << ": qatc multi-path plan by "
                 << h.compilerVersion << ", " << plan->fileBytes() << " bytes, "
                 << paths.size() << " code paths (best first):\n";
    for (size_t i = 0; i < paths.size(); ++i) {
      const plan::PathDesc &p = paths[i];
      uint64_t lacks = p.cpuFeatures & ~host;
      std::string status =
          static_cast<int>(i) == runs ? "  <- this CPU runs it"
          : lacks ? "  (this CPU lacks " + plan::featureNames(lacks) + ")"
                  : "";
      llvm::outs() << fmt::format("  {:<11} requires {:<52} weights #{} {:>9} "
                                  "bytes, code {:>8} bytes{}\n",
                                  p.target, plan::featureNames(p.cpuFeatures),
                                  p.weightsSegment, p.weightsBytes, p.codeBytes,
                                  status);
    }
    if (runs < 0)
      llvm::outs() << "  this CPU runs none of them\n";
    llvm::outs() << "code path " << m.target << ":\n";
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
  llvm::outs() << "  threads: " << shared << " layers shared, " << barriers
               << " barriers between layers\n";
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
