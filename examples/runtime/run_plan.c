/* run_plan.c - run a qatc plan through the runtime's C API.
 *
 *   run_plan model.plan [threads]
 *
 * Feeds zeros to every input and prints each output's first values. Build:
 * link against the QATCRuntime library (see examples/runtime/README.md).
 */
#include "qatc/Runtime/qatc_runtime.h"

#include <stdio.h>
#include <stdlib.h>

static size_t elements(const qatc_plan *plan, int isOutput, size_t i) {
  size_t n = 1;
  for (size_t d = 0; d < qatc_plan_io_rank(plan, isOutput, i); ++d)
    n *= (size_t)qatc_plan_io_dim(plan, isOutput, i, d);
  return n;
}

int main(int argc, char **argv) {
  char err[512];
  qatc_plan *plan;
  qatc_session *session;
  if (argc < 2) {
    fprintf(stderr, "usage: %s model.plan [threads]\n", argv[0]);
    return 2;
  }
  if (qatc_plan_load(argv[1], &plan, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  if (qatc_session_create(plan, argc > 2 ? atoi(argv[2]) : 1, &session, err,
                          sizeof err)) {
    fprintf(stderr, "%s\n", err);
    qatc_plan_free(plan);
    return 1;
  }
  size_t nin = qatc_plan_num_inputs(plan), nout = qatc_plan_num_outputs(plan);
  const void **inputs = calloc(nin, sizeof *inputs);
  void **outputs = calloc(nout, sizeof *outputs);
  for (size_t i = 0; i < nin; ++i)
    inputs[i] = calloc(elements(plan, 0, i), 8);
  for (size_t i = 0; i < nout; ++i)
    outputs[i] = calloc(elements(plan, 1, i), 8);
  int rc = qatc_session_run(session, inputs, (void *const *)outputs, err,
                            sizeof err);
  if (rc)
    fprintf(stderr, "%s\n", err);
  for (size_t i = 0; !rc && i < nout; ++i) {
    printf("%s (%s):", qatc_plan_io_name(plan, 1, i),
           qatc_plan_io_type(plan, 1, i));
    const float *y = outputs[i];
    for (size_t k = 0; k < elements(plan, 1, i) && k < 10; ++k)
      printf(" %g", y[k]);
    printf("\n");
  }
  for (size_t i = 0; i < nin; ++i)
    free((void *)inputs[i]);
  for (size_t i = 0; i < nout; ++i)
    free(outputs[i]);
  free(inputs);
  free(outputs);
  qatc_session_free(session);
  qatc_plan_free(plan);
  return rc;
}
