/*===- qatc_runtime.h - the qatc runtime's C API --------------------------===*
 *
 * Load a plan, create a session, run it. Every function that can fail
 * returns 0 on success and writes a message into `err` (of `errSize` bytes).
 * A plan holds native code: load only plans from a source you trust.
 *
 *===----------------------------------------------------------------------===*/

#ifndef QATC_RUNTIME_QATC_RUNTIME_H
#define QATC_RUNTIME_QATC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qatc_plan qatc_plan;
typedef struct qatc_session qatc_session;

/** Loads and verifies a plan file. Of a multi-path plan, the best code path
 *  this CPU runs (or the one the environment variable QATC_ISA names). */
int qatc_plan_load(const char *path, qatc_plan **plan, char *err,
                   size_t errSize);
void qatc_plan_free(qatc_plan *plan);
/** The target of the loaded code ("avx512vnni", "avx2", ...). */
const char *qatc_plan_target(const qatc_plan *plan);

/** Graph inputs and outputs: name, rank, dims, element count. */
size_t qatc_plan_num_inputs(const qatc_plan *plan);
size_t qatc_plan_num_outputs(const qatc_plan *plan);
const char *qatc_plan_io_name(const qatc_plan *plan, int isOutput, size_t i);
size_t qatc_plan_io_rank(const qatc_plan *plan, int isOutput, size_t i);
int64_t qatc_plan_io_dim(const qatc_plan *plan, int isOutput, size_t i,
                         size_t d);
/** "f32", "i8", "u8", "i16", "u16", "i32", "u32", "i64" or "bool". */
const char *qatc_plan_io_type(const qatc_plan *plan, int isOutput, size_t i);

/** A session with `threads` worker threads (>= 1). */
int qatc_session_create(const qatc_plan *plan, int threads,
                        qatc_session **session, char *err, size_t errSize);
void qatc_session_free(qatc_session *session);
/** Runs one inference on row-major buffers, one per input / output. */
int qatc_session_run(qatc_session *session, const void *const *inputs,
                     void *const *outputs, char *err, size_t errSize);

#ifdef __cplusplus
}
#endif

#endif /* QATC_RUNTIME_QATC_RUNTIME_H */
