/* c_check's helpers: failure reports, element access by dtype, the reference patterns. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

int g_failures = 0;
int g_checks = 0;

const hoop_dtype_t kAllDtypes[9] = {HOOP_U8,  HOOP_I8,   HOOP_I16, HOOP_I32, HOOP_I64,
                                    HOOP_F16, HOOP_BF16, HOOP_F32, HOOP_F64};
const size_t kCounts[4] = {0, 1, 10007, 262147};

void fail_at(const char* file, int line, const char* format, ...) {
  ++g_failures;
  printf("FAIL %s:%d: ", file, line);
  va_list args;
  va_start(args, format);
  vprintf(format, args);
  va_end(args);
  printf("\n");
  fflush(stdout);
}

void expect_error(const char* file, int line, const char* what, hoop_status_t got,
                  hoop_status_t code, const char* word) {
  ++g_checks;
  const char* message = hoop_last_error();
  if (got != code || strstr(message, word) == NULL) {
    fail_at(file, line, "%s: want %s naming '%s', got %s: %s", what, hoop_status_name(code), word,
            hoop_status_name(got), message);
  }
}

static double f16_to_double(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * ldexp(mantissa + 1024, exponent - 25);
}

/* Non-negative integers below 2048 only: the checks store nothing else. */
static uint16_t f16_from_int(unsigned value) {
  if (value == 0) return 0;
  int exponent = 0;
  while ((value >> (exponent + 1)) != 0) ++exponent;
  const unsigned mantissa = (value << (10 - exponent)) & 0x3ff;
  return (uint16_t)(((unsigned)(exponent + 15) << 10) | mantissa);
}

static double bf16_to_double(uint16_t bits) {
  const uint32_t wide = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &wide, sizeof f);
  return f;
}

static uint16_t bf16_from_double(double value) {
  const float f = (float)value;
  uint32_t wide;
  memcpy(&wide, &f, sizeof wide);
  return (uint16_t)(wide >> 16); /* exact for the small integers stored */
}

double get_elem(hoop_dtype_t dtype, const void* buffer, size_t i) {
  switch (dtype) {
    case HOOP_U8:
      return ((const uint8_t*)buffer)[i];
    case HOOP_I8:
      return ((const int8_t*)buffer)[i];
    case HOOP_I16:
      return ((const int16_t*)buffer)[i];
    case HOOP_I32:
      return ((const int32_t*)buffer)[i];
    case HOOP_I64:
      return (double)((const int64_t*)buffer)[i];
    case HOOP_F16:
      return f16_to_double(((const uint16_t*)buffer)[i]);
    case HOOP_BF16:
      return bf16_to_double(((const uint16_t*)buffer)[i]);
    case HOOP_F32:
      return ((const float*)buffer)[i];
    case HOOP_F64:
      return ((const double*)buffer)[i];
  }
  return NAN;
}

void set_elem(hoop_dtype_t dtype, void* buffer, size_t i, double value) {
  switch (dtype) {
    case HOOP_U8:
      ((uint8_t*)buffer)[i] = (uint8_t)value;
      break;
    case HOOP_I8:
      ((int8_t*)buffer)[i] = (int8_t)value;
      break;
    case HOOP_I16:
      ((int16_t*)buffer)[i] = (int16_t)value;
      break;
    case HOOP_I32:
      ((int32_t*)buffer)[i] = (int32_t)value;
      break;
    case HOOP_I64:
      ((int64_t*)buffer)[i] = (int64_t)value;
      break;
    case HOOP_F16:
      ((uint16_t*)buffer)[i] = f16_from_int((unsigned)value);
      break;
    case HOOP_BF16:
      ((uint16_t*)buffer)[i] = bf16_from_double(value);
      break;
    case HOOP_F32:
      ((float*)buffer)[i] = (float)value;
      break;
    case HOOP_F64:
      ((double*)buffer)[i] = value;
      break;
  }
}

void* xcalloc(size_t count, size_t size) {
  void* p = calloc(count == 0 ? 1 : count, size == 0 ? 1 : size);
  if (p == NULL) {
    printf("FAIL out of memory for %zu x %zu bytes\n", count, size);
    exit(3);
  }
  return p;
}

void compare(const char* what, hoop_dtype_t dtype, const void* got, const double* want,
             size_t count, double tol) {
  ++g_checks;
  for (size_t i = 0; i < count; ++i) {
    const double g = get_elem(dtype, got, i);
    const double limit = tol * fabs(want[i]);
    if (!(fabs(g - want[i]) <= limit)) {
      fail_at(__FILE__, __LINE__, "%s (dtype %d, count %zu): element %zu is %g, want %g", what,
              (int)dtype, count, i, g, want[i]);
      return;
    }
  }
}

double small_value(int rank, size_t i) { return (double)((rank * 3 + i) % 5 + 1); }

double pattern(int a, int b, size_t i) { return (double)((a * 131 + b * 17 + i) % 251); }
