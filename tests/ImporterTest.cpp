//===- ImporterTest.cpp - ONNX importer unit tests ------------------------===//
//
// Cases that ONNX text cannot express: typed-field and external-data
// tensors, inconsistent tensor sizes, float8/int4 data, name synthesis, and
// where the importer keeps weights (resource blobs vs inline literals).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "qatc/Frontend/OnnxExporter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace mlir;
using namespace qatc;
using namespace qatc::test;

namespace {

/// Adds a float initializer `name` of `shape` with the values in float_data
/// (typed field) or raw_data.
::onnx::TensorProto *addFloatInit(::onnx::ModelProto &model,
                                  const std::string &name,
                                  std::vector<int64_t> shape,
                                  const std::vector<float> &values, bool raw) {
  auto *t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : shape)
    t->add_dims(d);
  if (raw)
    t->set_raw_data(values.data(), values.size() * sizeof(float));
  else
    for (float v : values)
      t->add_float_data(v);
  return t;
}

/// Values of a constant op's attribute, whether inline or a resource blob.
std::vector<float> constantValues(qatc::onnx::ConstantOp op) {
  Attribute value = op.getValue();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(value)) {
    std::vector<float> out;
    for (float f : dense.getValues<float>())
      out.push_back(f);
    return out;
  }
  auto res = cast<DenseResourceElementsAttr>(value);
  ArrayRef<char> data = res.getRawHandle().getBlob()->getData();
  std::vector<float> out(data.size() / 4);
  memcpy(out.data(), data.data(), data.size());
  return out;
}

qatc::onnx::ConstantOp findConstant(ModuleOp module, StringRef name) {
  qatc::onnx::ConstantOp found;
  module.walk([&](qatc::onnx::ConstantOp c) {
    auto infos = getOnnxLocInfos(c.getLoc());
    if (!infos.empty() && infos.front().name == name)
      found = c;
  });
  return found;
}

TEST(Importer, TypedFieldAndRawDataGiveTheSameWeights) {
  std::vector<float> values(40);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 0.5f * static_cast<float>(i) - 3.0f;
  for (bool raw : {false, true}) {
    auto model = makeModel({40});
    addFloatInit(model, "w", {40}, values, raw);
    addNode(model, "Add", {"x", "w"}, {"y"});
    addOutput(model, "y");
    ImportFixture f;
    auto module = f.import(model);
    ASSERT_TRUE(module) << f.diagnostics;
    auto c = findConstant(*module, "w");
    ASSERT_TRUE(c);
    // 40 elements is above the inline limit: the weight is a resource blob.
    EXPECT_TRUE(isa<DenseResourceElementsAttr>(c.getValue()));
    EXPECT_EQ(constantValues(c), values);
  }
}

TEST(Importer, SmallConstantsAreInline) {
  auto model = makeModel({4});
  addFloatInit(model, "w", {4}, {1, 2, 3, 4}, true);
  addNode(model, "Mul", {"x", "w"}, {"y"});
  addOutput(model, "y");
  ImportFixture f;
  auto module = f.import(model);
  ASSERT_TRUE(module) << f.diagnostics;
  auto c = findConstant(*module, "w");
  ASSERT_TRUE(c);
  EXPECT_TRUE(isa<DenseElementsAttr>(c.getValue()));
  EXPECT_EQ(constantValues(c), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Importer, InconsistentTensorSizeIsAnErrorAtTheInitializer) {
  auto model = makeModel({4});
  auto *t = addFloatInit(model, "w", {4}, {1, 2, 3}, true);
  (void)t;
  addNode(model, "Mul", {"x", "w"}, {"y"});
  addOutput(model, "y");
  ImportFixture f;
  EXPECT_FALSE(f.import(model));
  EXPECT_NE(f.diagnostics.find("model.onnx: initializer \"w\": error: tensor "
                               "data has 12 bytes but shape and type need 16"),
            std::string::npos)
      << f.diagnostics;
}

TEST(Importer, TypedFieldCountMismatchIsAnError) {
  auto model = makeModel({4});
  addFloatInit(model, "w", {4}, {1, 2}, false);
  addNode(model, "Mul", {"x", "w"}, {"y"});
  addOutput(model, "y");
  ImportFixture f;
  EXPECT_FALSE(f.import(model));
  EXPECT_NE(f.diagnostics.find("has 2 values instead of 4"), std::string::npos)
      << f.diagnostics;
}

class ExternalData : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("qatc-ext", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  /// A model whose initializer `w` ([8] floats) lives at `offset` in
  /// weights.bin.
  ::onnx::ModelProto model(int64_t offset, int64_t length,
                           const std::string &file = "weights.bin") {
    auto m = makeModel({8});
    auto *t = m.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(8);
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto add = [&](const std::string &k, const std::string &v) {
      auto *e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", file);
    add("offset", std::to_string(offset));
    add("length", std::to_string(length));
    addNode(m, "Add", {"x", "w"}, {"y"});
    addOutput(m, "y");
    return m;
  }

  llvm::SmallString<128> dir;
};

TEST_F(ExternalData, WeightsAreReadFromTheFileNextToTheModel) {
  std::vector<float> values{1, -2, 3, -4, 5, -6, 7, -8};
  {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, "weights.bin");
    std::ofstream out(path.c_str(), std::ios::binary);
    out.write("PAD!", 4);
    out.write(reinterpret_cast<const char *>(values.data()), 32);
  }
  ImportFixture f;
  auto module = f.import(model(4, 32), dir);
  ASSERT_TRUE(module) << f.diagnostics;
  EXPECT_EQ(constantValues(findConstant(*module, "w")), values);

  ImportFixture g;
  EXPECT_FALSE(g.import(model(8, 32), dir));
  EXPECT_NE(g.diagnostics.find("initializer \"w\": error: external data range "
                               "[8, 40) is outside"),
            std::string::npos)
      << g.diagnostics;
}

TEST_F(ExternalData, MissingFileNamesTheInitializerAndTheFile) {
  ImportFixture f;
  EXPECT_FALSE(f.import(model(0, 32, "absent.bin"), dir));
  EXPECT_NE(f.diagnostics.find("initializer \"w\": error: cannot read external "
                               "data file"),
            std::string::npos)
      << f.diagnostics;
  EXPECT_NE(f.diagnostics.find("absent.bin"), std::string::npos);
}

TEST_F(ExternalData, LocationsOutsideTheModelsDirectoryAreRefused) {
  // Absolute paths and ".." would let a model read any file (or block on a
  // device); ONNX Runtime refuses them too.
  for (const std::string location :
       {"/etc/hostname", "../weights.bin", "sub/../../x.bin"}) {
    ImportFixture f;
    EXPECT_FALSE(f.import(model(0, 32, location), dir));
    EXPECT_NE(f.diagnostics.find("initializer \"w\": error: external data "
                                 "location '" +
                                 location +
                                 "' is not a relative path inside the "
                                 "model's directory"),
              std::string::npos)
        << f.diagnostics;
  }
  // A directory is not a weights file.
  llvm::SmallString<128> sub(dir);
  llvm::sys::path::append(sub, "sub");
  ASSERT_FALSE(llvm::sys::fs::create_directory(sub));
  ImportFixture g;
  EXPECT_FALSE(g.import(model(0, 32, "sub"), dir));
  EXPECT_NE(g.diagnostics.find("is not a regular file"), std::string::npos)
      << g.diagnostics;
}

/// A Q/DQ pair whose zero point has ONNX data type `dataType`.
::onnx::ModelProto qdqWithZeroPointType(int32_t dataType) {
  auto model = makeModel({4}, 21);
  auto *s = model.mutable_graph()->add_initializer();
  s->set_name("s");
  s->set_data_type(::onnx::TensorProto::FLOAT);
  s->add_float_data(0.5f);
  auto *z = model.mutable_graph()->add_initializer();
  z->set_name("z");
  z->set_data_type(dataType);
  z->set_raw_data(std::string(1, '\0'));
  addNode(model, "QuantizeLinear", {"x", "s", "z"}, {"q"}, "/quant/q");
  addNode(model, "DequantizeLinear", {"q", "s", "z"}, {"y"});
  addOutput(model, "y");
  return model;
}

TEST(Importer, Float8AndInt4AreRefusedWithAReason) {
  {
    ImportFixture f;
    EXPECT_FALSE(f.import(qdqWithZeroPointType(17))); // FLOAT8E4M3FN
    EXPECT_NE(f.diagnostics.find("initializer \"z\": error: float8 tensors are "
                                 "not supported (qatc quantizes to int8)"),
              std::string::npos)
        << f.diagnostics;
  }
  {
    ImportFixture f;
    EXPECT_FALSE(f.import(qdqWithZeroPointType(22))); // INT4
    EXPECT_NE(f.diagnostics.find("int4/uint4 tensors are not supported"),
              std::string::npos)
        << f.diagnostics;
  }
  {
    ImportFixture f;
    auto module = f.import(qdqWithZeroPointType(::onnx::TensorProto::INT8));
    EXPECT_TRUE(module) << f.diagnostics;
  }
}

TEST(Importer, SynthesizedNamesAreUniqueAndStable) {
  auto model = makeModel({4});
  addNode(model, "Relu", {"x"}, {"a"}); // unnamed #0 -> Relu_0
  addNode(model, "Relu", {"a"}, {"b"}, "Relu_1_x");
  addNode(model, "Relu", {"b"}, {"c"}, "Relu_2"); // user name Relu_2
  addNode(model, "Relu", {"c"}, {"y"});           // unnamed #3 -> Relu_3
  model.mutable_graph()->mutable_node(3)->set_name("");
  // Node #2 is unnamed too in a second model, and must not clash with a
  // user node called "Relu_2".
  addOutput(model, "y");
  ImportFixture f;
  auto module = f.import(model);
  ASSERT_TRUE(module) << f.diagnostics;
  std::vector<std::string> names;
  module->walk([&](qatc::onnx::ReluOp op) {
    names.push_back(getOnnxLocInfos(op.getLoc()).front().name);
  });
  EXPECT_EQ(names, (std::vector<std::string>{"Relu_0", "Relu_1_x", "Relu_2",
                                             "Relu_3"}));

  auto clash = makeModel({4});
  addNode(clash, "Relu", {"x"}, {"a"}, "Relu_1");
  addNode(clash, "Relu", {"a"}, {"y"}); // unnamed #1 -> must avoid "Relu_1"
  addOutput(clash, "y");
  ImportFixture g;
  auto m2 = g.import(clash);
  ASSERT_TRUE(m2) << g.diagnostics;
  names.clear();
  m2->walk([&](qatc::onnx::ReluOp op) {
    names.push_back(getOnnxLocInfos(op.getLoc()).front().name);
  });
  EXPECT_EQ(names, (std::vector<std::string>{"Relu_1", "Relu_1_"}));
}

TEST(Importer, OutputNamesFollowTheOnnxTensors) {
  auto model = makeModel({2, 6});
  auto *split = addNode(model, "Split", {"x"}, {"left", "right"}, "split");
  auto *axis = split->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(1);
  addOutput(model, "right");
  ImportFixture f;
  auto module = f.import(model);
  ASSERT_TRUE(module) << f.diagnostics;
  qatc::onnx::SplitOp op;
  module->walk([&](qatc::onnx::SplitOp s) { op = s; });
  ASSERT_TRUE(op);
  auto names = op->getAttrOfType<ArrayAttr>(kOutputNamesAttr);
  ASSERT_TRUE(names);
  EXPECT_EQ(cast<StringAttr>(names[0]).str(), "left");
  EXPECT_EQ(cast<StringAttr>(names[1]).str(), "right");
  EXPECT_EQ(op.getSplit(), (ArrayRef<int64_t>{3, 3}));
}

TEST(Importer, ExportThenImportKeepsTheGraph) {
  std::vector<float> w(32);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(i) * 0.25f;
  auto model = makeModel({1, 2, 4, 4});
  addFloatInit(model, "w", {2, 2, 2, 2},
               std::vector<float>(w.begin(), w.begin() + 16), true);
  addNode(model, "Conv", {"x", "w"}, {"c"}, "/conv");
  addNode(model, "Relu", {"c"}, {"y"}, "/relu");
  addOutput(model, "y");
  ImportFixture f;
  auto module = f.import(model);
  ASSERT_TRUE(module) << f.diagnostics;
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  ASSERT_TRUE(succeeded(exportOnnx(*module, os))) << f.diagnostics;
  os.flush();
  ::onnx::ModelProto again;
  ASSERT_TRUE(again.ParseFromString(bytes));
  ASSERT_EQ(again.graph().node_size(), 2);
  EXPECT_EQ(again.graph().node(0).name(), "/conv");
  EXPECT_EQ(again.graph().node(0).op_type(), "Conv");
  EXPECT_EQ(again.graph().node(1).output(0), "y");
  ImportFixture g;
  auto module2 = g.import(again);
  ASSERT_TRUE(module2) << g.diagnostics;
  std::string a, b;
  llvm::raw_string_ostream(a) << *module;
  llvm::raw_string_ostream(b) << *module2;
  // Same ops, attributes, types and weights (the resource key may differ).
  auto strip = [](std::string s) { return s.substr(0, s.find("{-#")); };
  EXPECT_EQ(strip(a), strip(b));
  EXPECT_EQ(constantValues(findConstant(*module2, "w")),
            constantValues(findConstant(*module, "w")));
}

} // namespace
