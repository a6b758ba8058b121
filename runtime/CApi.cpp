//===- CApi.cpp - the C API over qatc::rt ---------------------------------===//

#include "qatc/Runtime/Runtime.h"
#include "qatc/Runtime/qatc_runtime.h"

#include <cstring>

struct qatc_plan {
  std::unique_ptr<qatc::rt::Plan> plan;
};
struct qatc_session {
  std::unique_ptr<qatc::rt::Session> session;
  size_t inputs, outputs;
};

namespace {
int setError(char *err, size_t size, const std::string &msg) {
  if (err && size) {
    std::strncpy(err, msg.c_str(), size - 1);
    err[size - 1] = 0;
  }
  return 1;
}

const qatc::plan::TensorDesc *io(const qatc_plan *p, int isOutput, size_t i) {
  if (!p)
    return nullptr;
  const auto &m = p->plan->manifest();
  const auto &list = isOutput ? m.outputs : m.inputs;
  return i < list.size() ? &m.tensors[list[i]] : nullptr;
}
} // namespace

extern "C" {

int qatc_plan_load(const char *path, qatc_plan **plan, char *err,
                   size_t errSize) {
  if (!path || !plan)
    return setError(err, errSize, "null argument");
  std::string error;
  auto p = qatc::rt::Plan::load(path, error);
  if (!p)
    return setError(err, errSize, error);
  *plan = new qatc_plan{std::move(p)};
  return 0;
}

void qatc_plan_free(qatc_plan *plan) { delete plan; }

const char *qatc_plan_target(const qatc_plan *plan) {
  return plan ? plan->plan->manifest().target.c_str() : "";
}

size_t qatc_plan_num_inputs(const qatc_plan *plan) {
  return plan ? plan->plan->manifest().inputs.size() : 0;
}
size_t qatc_plan_num_outputs(const qatc_plan *plan) {
  return plan ? plan->plan->manifest().outputs.size() : 0;
}
const char *qatc_plan_io_name(const qatc_plan *plan, int isOutput, size_t i) {
  const auto *t = io(plan, isOutput, i);
  return t ? t->name.c_str() : nullptr;
}
size_t qatc_plan_io_rank(const qatc_plan *plan, int isOutput, size_t i) {
  const auto *t = io(plan, isOutput, i);
  return t ? t->shape.size() : 0;
}
int64_t qatc_plan_io_dim(const qatc_plan *plan, int isOutput, size_t i,
                         size_t d) {
  const auto *t = io(plan, isOutput, i);
  return t && d < t->shape.size() ? t->shape[d] : -1;
}
const char *qatc_plan_io_type(const qatc_plan *plan, int isOutput, size_t i) {
  const auto *t = io(plan, isOutput, i);
  return t ? qatc::plan::elemTypeName(t->type) : nullptr;
}

int qatc_session_create(const qatc_plan *plan, int threads,
                        qatc_session **session, char *err, size_t errSize) {
  if (!plan || !session)
    return setError(err, errSize, "null argument");
  if (threads < 1)
    return setError(err, errSize, "threads must be at least 1");
  *session = new qatc_session{
      std::make_unique<qatc::rt::Session>(*plan->plan, threads),
      plan->plan->manifest().inputs.size(),
      plan->plan->manifest().outputs.size()};
  return 0;
}

void qatc_session_free(qatc_session *session) { delete session; }

int qatc_session_run(qatc_session *session, const void *const *inputs,
                     void *const *outputs, char *err, size_t errSize) {
  if (!session || (!inputs && session->inputs) ||
      (!outputs && session->outputs))
    return setError(err, errSize, "null argument");
  std::vector<const void *> in(inputs, inputs + session->inputs);
  std::vector<void *> out(outputs, outputs + session->outputs);
  std::string error;
  if (!session->session->run(in, out, error))
    return setError(err, errSize, error);
  return 0;
}

} // extern "C"
