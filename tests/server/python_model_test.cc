// Every example model, packaged by the project's own tool, loads into every
// interpreter of a pool with one shared copy of its weights and gives the
// same results as the eager model built from its source.
#include "server/lifecycle/python_model.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>

#include "interpreters/python_error.h"
#include "tests/test_util/pool_fixture.h"

namespace manypy {
namespace {

std::string ArchivePath(const std::string& model) {
  return std::string(MANYPY_TEST_REPOSITORY) + "/" + model + ".mpk";
}

std::unique_ptr<InterpreterPool> MakeModelPool(size_t n) {
  PoolOptions options = testing::TestPoolOptions(n);
  options.extra_sys_path.push_back(MANYPY_SOURCE_DIR "/models");
  auto pool = InterpreterPool::Create(options);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  return pool.ok() ? std::move(*pool) : nullptr;
}

// Eager reference computed from the model's own source (not the archive).
struct Reference {
  std::vector<Value> inputs;
  std::vector<Value> outputs;
};

Reference EagerReference(InterpreterPool& pool, const std::string& model, const Manifest& manifest) {
  auto s = pool.AcquireAt(0);
  std::string names;
  for (const auto& o : manifest.outputs) names += "'" + o.name + "',";
  s.Exec("import torch, importlib\n"
         "def _reference(name, names):\n"
         "    m = importlib.import_module(name)\n"
         "    model, inputs = m.build(), m.example_inputs(2) if " +
         std::to_string(manifest.max_batch_size) +
         " > 0 else m.example_inputs()\n"
         "    with torch.inference_mode():\n"
         "        out = model(*inputs)\n"
         // SCHEMA.md's calling convention: a list holding one dict is that
         // dict; a longer tuple than the outputs is read by NAME__<index>.
         "    if isinstance(out, (tuple, list)) and len(out) == 1 and isinstance(out[0], dict):\n"
         "        out = out[0]\n"
         "    if isinstance(out, dict): out = [out[n] for n in names]\n"
         "    elif not isinstance(out, (tuple, list)): out = [out]\n"
         "    elif len(out) != len(names): out = [out[int(n.rsplit('__', 1)[1])] for n in names]\n"
         "    return list(inputs), list(out)\n");
  Value r = s.Eval("_reference('" + model + "', [" + names + "])").ToValue();
  return {r.items()[0].items(), r.items()[1].items()};
}

void ExpectSameOutputs(const std::vector<Value>& got, const std::vector<Value>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (want[i].kind() == Value::Kind::kTensor) {
      // Tolerance: the pool may use a different intra-op thread count than the
      // reference, which reorders float sums.
      EXPECT_TRUE(got[i].to_tensor().allclose(want[i].to_tensor(), 1e-5, 1e-5))
          << "output " << i << " differs";
    } else {
      EXPECT_EQ(got[i].DebugString(), want[i].DebugString());
    }
  }
}

class ExampleModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExampleModelTest, MatchesEagerPyTorchInEveryInterpreter) {
  auto pool = MakeModelPool(2);
  ASSERT_NE(pool, nullptr);
  auto model = PythonModel::Load(pool.get(), ArchivePath(GetParam()));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->manifest().name, GetParam());
  Reference ref = EagerReference(*pool, GetParam(), (*model)->manifest());
  // Interpreter by interpreter, through the replicated runner.
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      auto outputs = (*model)->Call(ref.inputs);
      ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
      ExpectSameOutputs(*outputs, ref.outputs);
    });
  }
  for (auto& t : threads) t.join();
}

INSTANTIATE_TEST_SUITE_P(Models, ExampleModelTest,
                         ::testing::Values("resnet18", "resnet50", "mobilenet_v3_small",
                                           "text_classifier", "python_heavy", "mlp_loop",
                                           "two_io", "numpy_model",
                                           "fasterrcnn_mobilenet_v3_large_320_fpn",
                                           "deeplabv3_mobilenet_v3_large", "wav2vec2_base"));

TEST(PythonModelTest, WeightsAreSharedByEveryInterpreter) {
  auto pool = MakeModelPool(3);
  ASSERT_NE(pool, nullptr);
  auto model = PythonModel::Load(pool.get(), ArchivePath("resnet18"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<int64_t> pointers, model_ids;
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    Obj m = (*model)->In(s);
    pointers.push_back(m.Attr("conv1").Attr("weight").Attr("data_ptr").Call().ToValue().to_int());
    pointers.push_back(m.Attr("fc").Attr("bias").Attr("data_ptr").Call().ToValue().to_int());
    model_ids.push_back(s.Global("builtins", "id").CallWith({m}).ToValue().to_int());
  }
  // Each interpreter has its own model object ...
  EXPECT_NE(model_ids[0], model_ids[1]);
  EXPECT_NE(model_ids[1], model_ids[2]);
  // ... whose parameters live in the same memory.
  for (size_t i = 2; i < pointers.size(); i += 2) {
    EXPECT_EQ(pointers[i], pointers[0]);
    EXPECT_EQ(pointers[i + 1], pointers[1]);
  }
  EXPECT_NE(pointers[0], pointers[1]);
}

TEST(PythonModelTest, MissingArchiveIsNotFound) {
  auto pool = MakeModelPool(1);
  ASSERT_NE(pool, nullptr);
  auto model = PythonModel::Load(pool.get(), ArchivePath("no_such_model"));
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_NE(model.status().message().find("no_such_model.mpk"), std::string::npos);
}

TEST(PythonModelTest, ExternModuleTheServerLacksFailsTheLoadNamingIt) {
  // Packaged where `manypy_test_installed_lib` was installed (so it is extern),
  // loaded where it is not (tests/server/models/make_server_test_models.py).
  auto pool = MakeModelPool(2);
  ASSERT_NE(pool, nullptr);
  auto model = PythonModel::Load(
      pool.get(), std::string(MANYPY_TEST_REPOSITORY) + "/missing_module/needs_missing_module.mpk");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kFailedPrecondition) << model.status().ToString();
  EXPECT_NE(model.status().message().find("cannot import: manypy_test_installed_lib (ModuleNotFoundError"),
            std::string::npos)
      << model.status().message();
  EXPECT_NE(model.status().message().find("needs_missing_module.mpk"), std::string::npos);
}

TEST(PythonModelTest, ModelExceptionIsAPythonError) {
  auto pool = MakeModelPool(1);
  ASSERT_NE(pool, nullptr);
  auto model = PythonModel::Load(pool.get(), ArchivePath("two_io"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // Wrong shapes: the model's own code raises; the pool keeps serving.
  auto raised = (*model)->Call({Value(at::ones({3})), Value(at::ones({5}, at::kLong))});
  EXPECT_EQ(raised.status().code(), StatusCode::kInternal) << raised.status().ToString();
  auto out = (*model)->Call({Value(at::ones({4})), Value(at::ones({4}, at::kLong))}).value();
  EXPECT_TRUE(out[0].to_tensor().equal(at::full({4}, 2.0)));
}

// make soak found every reload keeping the old model resident: torch.package's
// linecache entries held its importer (modules, storages) for good, and what
// was freed waited for a full collection that an idle interpreter never runs.
TEST(PythonModelTest, UnloadingFreesTheModelsImporterInEveryInterpreter) {
  auto pool = MakeModelPool(2);
  ASSERT_NE(pool, nullptr);
  const std::string importers =
      "sum(isinstance(o, __import__('torch').package.PackageImporter) "
      "for o in __import__('gc').get_objects())";
  for (int reload = 0; reload < 3; ++reload) {
    auto model = PythonModel::Load(pool.get(), ArchivePath("text_classifier"));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto s = pool->AcquireAt(1);
    EXPECT_EQ(s.Eval(importers).ToValue().to_int(), 1);
  }
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    EXPECT_EQ(s.Eval(importers).ToValue().to_int(), 0) << "interpreter " << i;
    EXPECT_EQ(s.Eval("sum('torch_package' in f for f in __import__('linecache').cache)")
                  .ToValue().to_int(), 0) << "interpreter " << i;
    // Nor do the modules' sys.modules entries (the runtime's ArchiveImporter) outlive them.
    EXPECT_EQ(s.Eval("sum(n.startswith('<torch_package_') for n in __import__('sys').modules)")
                  .ToValue().to_int(), 0) << "interpreter " << i;
  }
}

// Names a load looks attributes up by (a pickle's globals, getattr with a
// built name) stay in CPython's method cache after the model is gone; each
// keeps the 1 MiB arena it was allocated in. named_table's load interleaves
// 4,000 such names with its own 200,000-row table (about 28 MiB): the unload
// must give those arenas back, not keep them for a few thousand strings.
TEST(PythonModelTest, UnloadingGivesBackTheArenasOfTheNamesItsLoadLookedUp) {
  auto pool = MakeModelPool(1);
  ASSERT_NE(pool, nullptr);
  // obmalloc's own count (sys._debugmallocstats writes it to the C stderr).
  const std::string count_arenas =
      "def _arenas():\n"
      "    import os, re, sys, tempfile\n"
      "    with tempfile.TemporaryFile() as f:\n"
      "        saved = os.dup(2)\n"
      "        os.dup2(f.fileno(), 2)\n"
      "        try:\n"
      "            sys._debugmallocstats()\n"
      "        finally:\n"
      "            os.dup2(saved, 2)\n"
      "            os.close(saved)\n"
      "        f.seek(0)\n"
      "        text = f.read().decode()\n"
      "    return int(re.search(r'# arenas allocated current\\s*=\\s*([\\d,]+)', text)\n"
      "               .group(1).replace(',', ''))\n";
  auto arenas = [&] {
    auto s = pool->AcquireAt(0);
    s.Exec(count_arenas);
    return s.Eval("_arenas()").ToValue().to_int();
  };
  const std::string archive = std::string(MANYPY_TEST_REPOSITORY) + "/corner_cases/named_table.mpk";
  const int64_t before = arenas();
  for (int reload = 0; reload < 3; ++reload) {
    auto model = PythonModel::Load(pool.get(), archive);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto out = (*model)->Call({Value(at::zeros({1}))}).value();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].to_tensor().item<float>(), 200000.f);
    EXPECT_GT(arenas(), before + 20) << "the table did not fill arenas of its own";
  }
  const int64_t after = arenas();
  std::cout << "obmalloc arenas: " << before << " before the first load, " << after
            << " after the third unload\n";
  // What the first load keeps for good (the model runtime's own imports) is
  // an arena or two; the names kept 19 more (CPython 3.11) without the clearing.
  EXPECT_LE(after, before + 4) << "arenas the unloaded models' names kept";
}

// Issue 28: a dataclass config with `from __future__ import annotations` failed
// to load ("'NoneType' object has no attribute '__dict__'"), as did anything at
// module level that finds its module by name in sys.modules (typing, pydantic).
TEST(PythonModelTest, ModuleLevelCodeThatLooksItsModuleUpByNameLoadsAndServes) {
  auto pool = MakeModelPool(2);
  ASSERT_NE(pool, nullptr);
  auto model = PythonModel::Load(
      pool.get(), std::string(MANYPY_TEST_REPOSITORY) + "/corner_cases/configured_affine.mpk");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  at::Tensor x = at::arange(4, at::kFloat);
  for (int call = 0; call < 2; ++call) {  // the pool picks the interpreter
    auto out = (*model)->Call({Value(x)}).value();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].to_tensor().equal(x * 2 + 1.5)) << out[0].DebugString();
  }
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    EXPECT_EQ(s.Eval("sum(n.endswith('>.config_models') for n in __import__('sys').modules)")
                  .ToValue().to_int(), 1) << "interpreter " << i;
  }
}

TEST(PythonModelTest, OpenLoadsNowherePrepareLoadsOneInterpreterReleaseFreesIt) {
  auto pool = MakeModelPool(2);
  ASSERT_NE(pool, nullptr);
  const std::string importers =
      "sum(isinstance(o, __import__('torch').package.PackageImporter) "
      "for o in __import__('gc').get_objects())";
  auto count = [&](size_t i) {
    auto s = pool->AcquireAt(i);
    return s.Eval(importers).ToValue().to_int();
  };
  auto archive = PackageArchive::Open(ArchivePath("text_classifier"));
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  auto model = PythonModel::Open(pool.get(), std::move(*archive));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(count(0), 0);
  EXPECT_EQ(count(1), 0);
  ASSERT_TRUE((*model)->Prepare(1).ok());
  EXPECT_EQ(count(0), 0) << "Prepare(1) loaded interpreter 0 too";
  EXPECT_EQ(count(1), 1);
  ASSERT_TRUE((*model)->Prepare(0).ok());
  EXPECT_EQ(count(0), 1);
  (*model)->Release(1);  // freed at once, while the model lives on in interpreter 0
  EXPECT_EQ(count(1), 0);
  EXPECT_EQ(count(0), 1);
  model->reset();
  EXPECT_EQ(count(0), 0);
}

TEST(PythonModelTest, OpenTouchesNoInterpreterAndPrepareNamesAMissingExternModule) {
  auto pool = MakeModelPool(2);
  ASSERT_NE(pool, nullptr);
  auto archive = PackageArchive::Open(std::string(MANYPY_TEST_REPOSITORY) +
                                      "/missing_module/needs_missing_module.mpk");
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  auto model = PythonModel::Open(pool.get(), std::move(*archive));
  ASSERT_TRUE(model.ok()) << model.status().ToString();  // no Python ran yet
  Status prepared = (*model)->Prepare(1);
  EXPECT_EQ(prepared.code(), StatusCode::kFailedPrecondition) << prepared.ToString();
  EXPECT_NE(prepared.message().find("cannot import: manypy_test_installed_lib"), std::string::npos)
      << prepared.message();
}

}  // namespace
}  // namespace manypy
