/* Cuvil's C API: run compiled models (.cuv artifacts from `cuvil compile` or CompiledModule.save) from C.
 *
 * C99, a stable ABI: opaque handles, option structs that start with their own size (so a newer library reads an
 * older caller's struct), no C++ types at the boundary. Link with libcuvil_runtime (pkg-config: cuvil), which
 * needs neither LLVM nor Python.
 *
 *   cuvil_status* st = NULL;
 *   cuvil_session_options opts = CUVIL_SESSION_OPTIONS_INIT;
 *   opts.threads = 4;
 *   cuvil_session* s = cuvil_session_create_from_file("m.cuv", &opts, &st);
 *   if (!s) { fprintf(stderr, "%s\n", cuvil_status_message(st)); cuvil_status_free(st); return 1; }
 *   ...
 *   cuvil_session_run(s, inputs, n_in, outputs, n_out, &st);   // caller-owned buffers, nothing copied
 *
 * Every function that can fail returns NULL or a nonzero cuvil_code and, when `status` is not NULL, stores a
 * status object there (the caller frees it with cuvil_status_free) carrying the code, a message, and the IR node
 * and its source location (Python file:line or ONNX node) when a node failed. A session may run from several
 * threads at once (each run takes an executor of its own from the session's pool), and its weights may be
 * replaced while it runs (cuvil_weights_stage / cuvil_weights_commit below); creating and freeing a session are
 * not concurrent with anything else on it.
 */
#ifndef CUVIL_CUVIL_H
#define CUVIL_CUVIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUVIL_API_VERSION 1

typedef enum cuvil_code {
  CUVIL_OK = 0,
  CUVIL_INVALID_ARGUMENT = 1, /* a null pointer, a wrong count, a struct size this library does not know */
  CUVIL_INVALID_ARTIFACT = 2, /* not an artifact, truncated, corrupt, another format version */
  CUVIL_UNSUPPORTED_CPU = 3,  /* the artifact needs CPU features this host lacks (the message lists them) */
  CUVIL_INPUT_MISMATCH = 4,   /* an input's dtype, rank or dims do not fit the model */
  CUVIL_OUTPUT_MISMATCH = 5,  /* an output buffer's dtype, dims or size do not fit what the run produces */
  CUVIL_RUN_FAILED = 6,       /* a node failed while running (node and location in the status) */
  CUVIL_INTERNAL = 7,
  CUVIL_WEIGHTS_MISMATCH = 8  /* staged weights: unknown names, dtypes, shapes, a missing weight, a stale stage */
} cuvil_code;

typedef enum cuvil_dtype {
  CUVIL_F32 = 0, CUVIL_F64 = 1, CUVIL_F16 = 2, CUVIL_BF16 = 3, CUVIL_I8 = 4, CUVIL_I16 = 5, CUVIL_I32 = 6,
  CUVIL_I64 = 7, CUVIL_U8 = 8, CUVIL_U16 = 9, CUVIL_U32 = 10, CUVIL_U64 = 11, CUVIL_BOOL = 12
} cuvil_dtype;

typedef struct cuvil_status cuvil_status;
typedef struct cuvil_session cuvil_session;

cuvil_code cuvil_status_code(const cuvil_status* s);
const char* cuvil_status_message(const cuvil_status* s); /* valid until the status is freed */
const char* cuvil_status_node(const cuvil_status* s);     /* the failing IR node ("" when none) */
const char* cuvil_status_location(const cuvil_status* s); /* its source location ("" when none) */
void cuvil_status_free(cuvil_status* s);                  /* NULL is fine */

typedef struct cuvil_session_options {
  size_t struct_size; /* sizeof(cuvil_session_options): set by CUVIL_SESSION_OPTIONS_INIT */
  int32_t threads;    /* threads for the kernels; 0: all cores */
} cuvil_session_options;
#define CUVIL_SESSION_OPTIONS_INIT {sizeof(cuvil_session_options), 0}

/* `options` may be NULL (defaults). */
cuvil_session* cuvil_session_create_from_file(const char* path, const cuvil_session_options* options,
                                              cuvil_status** status);
/* The buffer is copied; it may be freed once this returns. */
cuvil_session* cuvil_session_create_from_memory(const void* data, size_t size, const cuvil_session_options* options,
                                                cuvil_status** status);
void cuvil_session_free(cuvil_session* s); /* NULL is fine */

/* The model's inputs and outputs. Names and dims stay valid while the session lives. A symbolic dim is -1 in
 * `dims` and named by cuvil_session_*_dim_name (NULL for a static dim). */
size_t cuvil_session_input_count(const cuvil_session* s);
size_t cuvil_session_output_count(const cuvil_session* s);
const char* cuvil_session_input_name(const cuvil_session* s, size_t i);
const char* cuvil_session_output_name(const cuvil_session* s, size_t i);
cuvil_dtype cuvil_session_input_dtype(const cuvil_session* s, size_t i);
cuvil_dtype cuvil_session_output_dtype(const cuvil_session* s, size_t i);
/* Rank, or -1 for an out-of-range index; `dims` (may be NULL) receives min(rank, max_dims) dims. */
int32_t cuvil_session_input_dims(const cuvil_session* s, size_t i, int64_t* dims, size_t max_dims);
int32_t cuvil_session_output_dims(const cuvil_session* s, size_t i, int64_t* dims, size_t max_dims);
size_t cuvil_dtype_size(cuvil_dtype t); /* bytes per element; 0 for an unknown value */

/* A tensor in the caller's memory: dense, row-major. For an output, `dims` and `rank` say the buffer's shape
 * (it must be what the run produces: cuvil_session_output_shape tells it for given input shapes) and `bytes`
 * its capacity. */
typedef struct cuvil_tensor {
  size_t struct_size; /* sizeof(cuvil_tensor) */
  cuvil_dtype dtype;
  int32_t rank;
  const int64_t* dims;
  void* data;
  size_t bytes;
} cuvil_tensor;
#define CUVIL_TENSOR_INIT {sizeof(cuvil_tensor), CUVIL_F32, 0, NULL, NULL, 0}

/* Runs the model on `inputs` (in the model's input order) and writes `outputs` (in its output order) into the
 * caller's buffers. Returns CUVIL_OK or the status's code. */
cuvil_code cuvil_session_run(cuvil_session* s, const cuvil_tensor* inputs, size_t n_inputs,
                             const cuvil_tensor* outputs, size_t n_outputs, cuvil_status** status);

/* The shape output `i` has for inputs of these shapes (plans the model for them; no run). Returns its rank, or -1
 * with a status; `dims` receives min(rank, max_dims) dims. */
int32_t cuvil_session_output_shape(cuvil_session* s, const cuvil_tensor* inputs, size_t n_inputs, size_t i,
                                   int64_t* dims, size_t max_dims, cuvil_status** status);

/* ---- Hot weight swap.
 *
 * The weights are the model's named constants (cuvil_session_weight_name; for an artifact of an ONNX model, the
 * initializers the compiler's passes kept as they were; folded ones carry the pass's name). Staging checks the
 * whole set first — names, dtypes, shapes, and unless CUVIL_WEIGHTS_SUBSET every floating-point weight given —
 * copies the data (the caller's buffers may go once it returns), builds the new version and prepares its
 * executors (weights packed into the kernels' layouts) on the calling thread; nothing serves it yet. Commit
 * publishes it at once: runs that started before finish on the weights they started with, later runs use the new
 * ones, no run sees a mix or waits, and the old weights are freed when their last run ends. A stage made before
 * another commit is refused at commit (CUVIL_WEIGHTS_MISMATCH): stage again. Versions count from 1. */
typedef struct cuvil_weights cuvil_weights; /* a staged, prepared weights version */
#define CUVIL_WEIGHTS_SUBSET 1u /* flags: update some weights, keep the others */

size_t cuvil_session_weight_count(const cuvil_session* s);
const char* cuvil_session_weight_name(const cuvil_session* s, size_t i); /* NULL out of range */
uint64_t cuvil_session_weights_version(const cuvil_session* s);          /* the version runs starting now use */

/* `names[i]` names `tensors[i]`. On success *staged receives the version (free it with cuvil_weights_free). */
cuvil_code cuvil_weights_stage(cuvil_session* s, const char* const* names, const cuvil_tensor* tensors, size_t n,
                               uint32_t flags, cuvil_weights** staged, cuvil_status** status);
/* Publishes a staged version; `version` (may be NULL) receives its number. The staged object stays the caller's. */
cuvil_code cuvil_weights_commit(cuvil_session* s, const cuvil_weights* staged, uint64_t* version,
                                cuvil_status** status);
uint64_t cuvil_weights_version(const cuvil_weights* w); /* the number it has once committed; 0 for NULL */
void cuvil_weights_free(cuvil_weights* w);              /* NULL is fine; a committed version lives on in the session */

/* cuvil_session_run, and the weights version that produced the outputs (`weights_version` may be NULL). */
cuvil_code cuvil_session_run_versioned(cuvil_session* s, const cuvil_tensor* inputs, size_t n_inputs,
                                       const cuvil_tensor* outputs, size_t n_outputs, uint64_t* weights_version,
                                       cuvil_status** status);

const char* cuvil_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CUVIL_CUVIL_H */
