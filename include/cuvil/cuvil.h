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
 * and its source location (Python file:line or ONNX node) when a node failed. Sessions are not thread-safe: one
 * run at a time per session (create one session per thread; they share nothing but the file's pages).
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
  CUVIL_INTERNAL = 7
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

const char* cuvil_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CUVIL_CUVIL_H */
