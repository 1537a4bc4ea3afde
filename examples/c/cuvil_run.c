/* cuvil_run MODEL.cuv IN.npy ...: runs a compiled model on .npy inputs (in the order of the model's inputs) and
 * prints, per output, "NAME SHAPE SUM" (shape as 1x1000, the sum of its elements as a float).
 *
 * A plain C99 program against Cuvil's C API only:
 *   cc cuvil_run.c $(pkg-config --cflags --libs cuvil) -o cuvil_run
 */
#include <cuvil/cuvil.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  cuvil_dtype dtype;
  int32_t rank;
  int64_t dims[32];
  void* data;
  size_t bytes;
} npy_array;

static int fail(const char* what, const char* detail) {
  fprintf(stderr, "cuvil_run: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  return 1;
}

/* The dtype of a little-endian (or byte-sized) NumPy descr such as '<f4'; -1 if not supported. */
static int npy_dtype(const char* d) {
  static const struct { const char* descr; cuvil_dtype t; } table[] = {
      {"<f4", CUVIL_F32}, {"<f8", CUVIL_F64}, {"<f2", CUVIL_F16}, {"|i1", CUVIL_I8},  {"<i2", CUVIL_I16},
      {"<i4", CUVIL_I32}, {"<i8", CUVIL_I64}, {"|u1", CUVIL_U8},  {"<u2", CUVIL_U16}, {"<u4", CUVIL_U32},
      {"<u8", CUVIL_U64}, {"|b1", CUVIL_BOOL}};
  size_t i;
  for (i = 0; i < sizeof table / sizeof table[0]; ++i)
    if (strcmp(d, table[i].descr) == 0) return (int)table[i].t;
  return -1;
}

/* Reads a C-ordered .npy file (format 1.0, 2.0 or 3.0). Returns 0 on success. */
static int read_npy(const char* path, npy_array* a) {
  FILE* f = fopen(path, "rb");
  unsigned char pre[12];
  size_t hlen, numel = 1, got;
  char *h, *p, descr[8];
  int32_t r = 0;
  int t;
  if (!f) return fail("cannot open", path);
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) { fclose(f); return fail("not a .npy file", path); }
  if (pre[6] == 1) hlen = pre[8] | (size_t)pre[9] << 8;
  else {
    if (fread(pre + 10, 1, 2, f) != 2) { fclose(f); return fail("truncated .npy header", path); }
    hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  if (hlen > 1 << 20) { fclose(f); return fail("bad .npy header", path); }
  h = calloc(hlen + 1, 1);
  if (!h || fread(h, 1, hlen, f) != hlen) { free(h); fclose(f); return fail("truncated .npy header", path); }
  p = strstr(h, "'descr':");
  if (!p || sscanf(p + 8, " '%7[^']'", descr) != 1 || (t = npy_dtype(descr)) < 0) {
    free(h); fclose(f); return fail("unsupported .npy dtype", path);
  }
  if (strstr(h, "'fortran_order': True")) { free(h); fclose(f); return fail("Fortran-ordered .npy", path); }
  p = strstr(h, "'shape':");
  if (!p || !(p = strchr(p, '('))) { free(h); fclose(f); return fail("no shape in .npy header", path); }
  ++p;
  while (*p && *p != ')') {
    char* end;
    long long d = strtoll(p, &end, 10);
    if (end == p) { ++p; continue; }
    if (r >= 32 || d < 0) { free(h); fclose(f); return fail("bad .npy shape", path); }
    a->dims[r++] = d;
    numel *= (size_t)d;
    p = end;
  }
  free(h);
  a->dtype = (cuvil_dtype)t;
  a->rank = r;
  a->bytes = numel * cuvil_dtype_size(a->dtype);
  a->data = malloc(a->bytes ? a->bytes : 1);
  got = a->bytes ? fread(a->data, 1, a->bytes, f) : 0;
  fclose(f);
  if (!a->data || got != a->bytes) return fail("truncated .npy data", path);
  return 0;
}

static double element(const void* data, cuvil_dtype t, size_t i) {
  switch (t) {
    case CUVIL_F32: return ((const float*)data)[i];
    case CUVIL_F64: return ((const double*)data)[i];
    case CUVIL_I8: return ((const int8_t*)data)[i];
    case CUVIL_I16: return ((const int16_t*)data)[i];
    case CUVIL_I32: return ((const int32_t*)data)[i];
    case CUVIL_I64: return (double)((const int64_t*)data)[i];
    case CUVIL_U8: case CUVIL_BOOL: return ((const uint8_t*)data)[i];
    case CUVIL_U16: return ((const uint16_t*)data)[i];
    case CUVIL_U32: return ((const uint32_t*)data)[i];
    case CUVIL_U64: return (double)((const uint64_t*)data)[i];
    default: return 0; /* f16/bf16 sums are not printed as numbers */
  }
}

int main(int argc, char** argv) {
  cuvil_status* st = NULL;
  cuvil_session* s;
  size_t n_in, n_out, i, k;
  npy_array* ins;
  cuvil_tensor *tin, *tout;
  int64_t(*odims)[32];
  if (argc < 2) return fail("usage: cuvil_run MODEL.cuv IN.npy ...", NULL);
  s = cuvil_session_create_from_file(argv[1], NULL, &st);
  if (!s) {
    fprintf(stderr, "cuvil_run: %s\n", cuvil_status_message(st));
    cuvil_status_free(st);
    return 1;
  }
  n_in = cuvil_session_input_count(s);
  n_out = cuvil_session_output_count(s);
  if ((size_t)(argc - 2) != n_in) {
    fprintf(stderr, "cuvil_run: the model takes %zu inputs, given %d\n", n_in, argc - 2);
    return 1;
  }
  ins = calloc(n_in + 1, sizeof *ins);
  tin = calloc(n_in + 1, sizeof *tin);
  tout = calloc(n_out + 1, sizeof *tout);
  odims = calloc(n_out + 1, sizeof *odims);
  for (i = 0; i < n_in; ++i) {
    cuvil_tensor t = CUVIL_TENSOR_INIT;
    if (read_npy(argv[2 + i], &ins[i])) return 1;
    t.dtype = ins[i].dtype;
    t.rank = ins[i].rank;
    t.dims = ins[i].dims;
    t.data = ins[i].data;
    t.bytes = ins[i].bytes;
    tin[i] = t;
  }
  for (i = 0; i < n_out; ++i) {
    cuvil_tensor t = CUVIL_TENSOR_INIT;
    size_t numel = 1;
    int32_t r = cuvil_session_output_shape(s, tin, n_in, i, odims[i], 32, &st);
    if (r < 0 || r > 32) {
      fprintf(stderr, "cuvil_run: %s\n", r < 0 ? cuvil_status_message(st) : "output rank above 32");
      return 1;
    }
    for (k = 0; k < (size_t)r; ++k) numel *= (size_t)odims[i][k];
    t.dtype = cuvil_session_output_dtype(s, i);
    t.rank = r;
    t.dims = odims[i];
    t.bytes = numel * cuvil_dtype_size(t.dtype);
    t.data = malloc(t.bytes ? t.bytes : 1);
    tout[i] = t;
  }
  if (cuvil_session_run(s, tin, n_in, tout, n_out, &st) != CUVIL_OK) {
    fprintf(stderr, "cuvil_run: %s", cuvil_status_message(st));
    if (*cuvil_status_node(st)) fprintf(stderr, " [node %s at %s]", cuvil_status_node(st), cuvil_status_location(st));
    fprintf(stderr, "\n");
    cuvil_status_free(st);
    return 1;
  }
  for (i = 0; i < n_out; ++i) {
    double sum = 0;
    size_t numel = tout[i].bytes / cuvil_dtype_size(tout[i].dtype);
    printf("%s ", cuvil_session_output_name(s, i));
    if (tout[i].rank == 0) printf("scalar");
    for (k = 0; k < (size_t)tout[i].rank; ++k) printf(k ? "x%lld" : "%lld", (long long)odims[i][k]);
    for (k = 0; k < numel; ++k) sum += element(tout[i].data, tout[i].dtype, k);
    printf(" %.9g\n", sum);
    free(tout[i].data);
  }
  for (i = 0; i < n_in; ++i) free(ins[i].data);
  free(ins);
  free(tin);
  free(tout);
  free(odims);
  cuvil_session_free(s);
  return 0;
}
