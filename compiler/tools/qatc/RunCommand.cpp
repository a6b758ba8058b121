//===- RunCommand.cpp - `qatc run` ----------------------------------------===//
//
//   qatc run m.plan --input x.npy [-o out.npz] [--dump-tensors DIR]
//            [--threads N] [--labels y.npy]
//
// Runs a plan with the runtime on .npy data. Data with more rows than the
// plan's batch runs in chunks of the plan's batch; outputs are concatenated.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "Driver.h"
#include "qatc/Reference/TensorIO.h"
#include "qatc/Runtime/Runtime.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <chrono>

using namespace qatc;
using namespace qatc::ref;
namespace cl = llvm::cl;

cl::SubCommand qatc::driver::runCommand("run", "Run a plan on .npy data");

namespace {
cl::SubCommand &sub = qatc::driver::runCommand;
cl::opt<std::string> planPath(cl::Positional, cl::desc("<model.plan>"),
                              cl::Required, cl::sub(sub));
cl::list<std::string> inputSpecs(
    "input",
    cl::desc("Input data: file.npy (inputs in order) or name=file.npy"),
    cl::value_desc("[name=]file"), cl::sub(sub));
cl::opt<std::string> outputPath("o",
                                cl::desc("Write the outputs to this .npz "
                                         "(or .npy for one output)"),
                                cl::value_desc("file"), cl::sub(sub));
cl::opt<std::string>
    dumpDir("dump-tensors",
            cl::desc("Write every layer's output tensor to DIR (as `qatc eval "
                     "--dump-tensors` does, ONNX order and names)"),
            cl::value_desc("DIR"), cl::sub(sub));
driver::SessionCLOptions sessionOptions(sub);
cl::opt<std::string> labelsPath(
    "labels",
    cl::desc("Integer class labels (.npy): print the first output's top-1 "
             "accuracy"),
    cl::value_desc("file.npy"), cl::sub(sub));

int fail(const llvm::Twine &message) {
  llvm::errs() << "qatc run: " << message << "\n";
  return 1;
}

DType dtypeOf(const plan::TensorDesc &t) {
  switch (t.type) {
  case plan::ElemType::F32:
    return DType::F32;
  case plan::ElemType::I32:
    return DType::I32;
  case plan::ElemType::I64:
    return DType::I64;
  case plan::ElemType::Bool:
    return DType::Bool;
  case plan::ElemType::I16:
    return DType::I16;
  case plan::ElemType::U16:
    return DType::U16;
  case plan::ElemType::U32:
    return DType::U32;
  case plan::ElemType::F64:
    return DType::F64;
  default:
    return t.quantized ? (t.isSigned ? DType::I8 : DType::U8)
                       : (t.type == plan::ElemType::I8 ? DType::I8 : DType::U8);
  }
}
} // namespace

std::string qatc::driver::numpyTypeName(const plan::TensorDesc &t) {
  return dtypeName(dtypeOf(t)).str();
}

int qatc::driver::runRun() {
  std::string error;
  auto plan = rt::Plan::load(planPath, error);
  if (!plan)
    return fail(error);
  const plan::Manifest &m = plan->manifest();
  std::vector<std::string> names;
  for (int i : m.inputs)
    names.push_back(m.tensors[i].name);
  auto given = readInputSpecs(inputSpecs, names, "run");
  if (failed(given))
    return 1;
  std::vector<std::optional<Tensor>> &inputs = *given;
  // The runtime reads each input in the plan's element type.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i])
      inputs[i] = castTensor(*inputs[i], dtypeOf(m.tensors[m.inputs[i]]));
  // Chunks of the plan's batch.
  int64_t chunks = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const plan::TensorDesc &d = m.tensors[m.inputs[i]];
    if (!inputs[i])
      return fail("no data for input '" + d.name + "' (--input)");
    int64_t per = d.numElements(), have = inputs[i]->numElements();
    if (per == 0 || have % per != 0 ||
        (have != per && inputs[i]->rank() != (int64_t)d.shape.size()))
      return fail("input '" + d.name + "' has shape " + inputs[i]->describe() +
                  "; the plan takes " + plan::shapeText(d.shape) +
                  " (recompile with --input-shape for another size)");
    int64_t c = have / per;
    if (chunks >= 0 && c != chunks)
      return fail("the inputs hold different numbers of rows");
    chunks = c;
  }
  if (chunks < 0)
    chunks = 1; // a plan without inputs (constant outputs) runs once
  if (chunks > 1 && !dumpDir.empty())
    return fail("--dump-tensors needs one batch of data");
  rt::Session session(*plan, sessionOptions.threads());
  {
    std::string error;
    if (!sessionOptions.applyShares(session, error))
      return fail(error);
  }
  std::optional<TensorDumper> dumper;
  std::string dumpError; // the first failed write, reported after the run
  if (!dumpDir.empty()) {
    auto d = TensorDumper::create(dumpDir);
    if (!d)
      return fail(llvm::toString(d.takeError()));
    dumper.emplace(std::move(*d));
    session.setLayerCallback([&](size_t layer, const uint8_t *arena) {
      for (int ti : m.layers[layer].outputs) {
        const plan::TensorDesc &t = m.tensors[ti];
        Tensor out(dtypeOf(t), t.shape);
        rt::readTensor(t, arena, out.mutableData<uint8_t>());
        if (auto err = dumper->add(t.name, out))
          if (dumpError.empty())
            dumpError = llvm::toString(std::move(err));
      }
    });
  }
  std::vector<Tensor> outputs;
  for (int oi : m.outputs) {
    const plan::TensorDesc &d = m.tensors[oi];
    std::vector<int64_t> shape = d.shape;
    if (!shape.empty())
      shape[0] *= chunks;
    outputs.emplace_back(dtypeOf(d), shape);
  }
  std::vector<double> times;
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<const void *> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const plan::TensorDesc &d = m.tensors[m.inputs[i]];
      in.push_back(inputs[i]->data<uint8_t>() +
                   c * d.numElements() * plan::elemSize(d.type));
    }
    std::vector<void *> out;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const plan::TensorDesc &d = m.tensors[m.outputs[i]];
      out.push_back(outputs[i].mutableData<uint8_t>() +
                    c * d.numElements() * plan::elemSize(d.type));
    }
    auto t0 = std::chrono::steady_clock::now();
    if (!session.run(in, out, error))
      return fail(error);
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  std::sort(times.begin(), times.end());
  llvm::outs() << "ran " << planPath << " " << chunks
               << (chunks == 1 ? " time" : " times") << " on "
               << session.threads() << " thread(s): median "
               << llvm::format("%.3f", times[times.size() / 2] * 1e3)
               << " ms per run\n";
  if (!dumpError.empty())
    return fail("--dump-tensors: " + dumpError);
  if (dumper) {
    if (auto err = dumper->finish())
      return fail(llvm::toString(std::move(err)));
    llvm::outs() << "wrote " << dumper->count() << " tensors to " << dumpDir
                 << "\n";
  }
  if (!outputPath.empty()) {
    NamedTensors named;
    for (size_t i = 0; i < outputs.size(); ++i)
      named.push_back({m.tensors[m.outputs[i]].name, outputs[i]});
    if (auto err = writeTensors(outputPath, named))
      return fail(llvm::toString(std::move(err)));
    llvm::outs() << "wrote " << outputPath << "\n";
  }
  if (!labelsPath.empty())
    return printTop1Accuracy(outputs.front(), labelsPath, "run");
  return 0;
}
