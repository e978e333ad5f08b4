/* json_doc.c — the JSON reader of json_doc.h: recursive descent over the bytes, depth-limited, every node in
 * the caller's arena. */
#include "json_doc.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

typedef struct reader {
  const unsigned char *p, *begin, *end;
  tsr_arena_t* arena;
  const char* what;
  int depth;
} reader_t;

static tsr_status_t fail_at(reader_t* r, const char* message) {
  if (r->p >= r->end)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "%s: %s at the end (byte %zu): the document is truncated", r->what, message,
                    (size_t)(r->end - r->begin));
  return tsr_fail(TSR_ERROR_BAD_IMAGE, "%s: %s at byte %zu", r->what, message, (size_t)(r->p - r->begin));
}

static tsr_status_t out_of_memory(reader_t* r) {
  return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of host memory reading the JSON document", r->what);
}

static void skip_blanks(reader_t* r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool take_word(reader_t* r, const char* word) {
  size_t n = strlen(word);
  if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) return false;
  r->p += n;
  return true;
}

static int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static long read_hex4(reader_t* r) {
  if (r->end - r->p < 4) return -1;
  long v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(r->p[i]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  r->p += 4;
  return v;
}

/* The length of the UTF-8 sequence at p (shortest form, no surrogates, at most U+10FFFF), or 0. */
static size_t utf8_length(const unsigned char* p, const unsigned char* end) {
  size_t n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || (size_t)(end - p) < n) return 0;
  uint32_t cp = n == 1 ? p[0] : n == 2 ? p[0] & 0x1Fu : n == 3 ? p[0] & 0x0Fu : p[0] & 0x07u;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3Fu);
  }
  static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

static size_t put_utf8(char* out, uint32_t cp) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000)
    return out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3F)), out[2] = (char)(0x80 | (cp & 0x3F)), 3;
  out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string literal at r->p (the opening quote): its decoded bytes, NUL-terminated, in the arena. Escapes only
 * ever shorten the text, so the literal's length bounds the result. */
static tsr_status_t read_string(reader_t* r, const char** out, size_t* out_len) {
  const unsigned char* start = ++r->p;
  const unsigned char* close = start;
  while (close < r->end && *close != '"') close += *close == '\\' && close + 1 < r->end ? 2 : 1;
  char* buf = tsr_arena_alloc(r->arena, (size_t)(close - start) + 1);
  if (!buf) return out_of_memory(r);
  size_t n = 0;
  for (;;) {
    if (r->p >= r->end) return fail_at(r, "unterminated string");
    unsigned char c = *r->p;
    if (c == '"') break;
    if (c < 0x20) return fail_at(r, "control character in a string");
    if (c != '\\') {
      size_t len = utf8_length(r->p, r->end);
      if (!len) return fail_at(r, "invalid UTF-8 in a string");
      memcpy(buf + n, r->p, len);
      n += len;
      r->p += len;
      continue;
    }
    r->p++;
    if (r->p >= r->end) return fail_at(r, "unterminated string");
    c = *r->p++;
    const char* simple = strchr("\"\\/bfnrt", c);
    if (c && simple) {
      buf[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
      continue;
    }
    if (c != 'u') return r->p--, fail_at(r, "invalid escape in a string");
    long cp = read_hex4(r);
    if (cp < 0) return fail_at(r, "invalid \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      long low = -1;
      if (r->end - r->p >= 2 && r->p[0] == '\\' && r->p[1] == 'u') {
        r->p += 2;
        low = read_hex4(r);
      }
      if (low < 0xDC00 || low > 0xDFFF) return fail_at(r, "lone UTF-16 surrogate in a \\u escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return fail_at(r, "lone UTF-16 surrogate in a \\u escape");
    }
    n += put_utf8(buf + n, (uint32_t)cp);
  }
  r->p++;
  buf[n] = '\0';
  *out = buf;
  *out_len = n;
  return TSR_SUCCESS;
}

static bool is_digit(const unsigned char* p, const unsigned char* end) { return p < end && *p >= '0' && *p <= '9'; }

static tsr_status_t read_number(reader_t* r, tsr_json_t* node) {
  const unsigned char* start = r->p;
  bool integer = true;
  if (r->p < r->end && *r->p == '-') r->p++;
  if (take_word(r, "Infinity")) {
    node->kind = TSR_JSON_REAL;
    node->real = *start == '-' ? -HUGE_VAL : HUGE_VAL;
    return TSR_SUCCESS;
  }
  if (!is_digit(r->p, r->end)) return fail_at(r, "expected a value");
  if (*r->p == '0') r->p++;
  else while (is_digit(r->p, r->end)) r->p++;
  if (r->p < r->end && *r->p == '.') {
    integer = false;
    r->p++;
    if (!is_digit(r->p, r->end)) return fail_at(r, "expected a digit after '.'");
    while (is_digit(r->p, r->end)) r->p++;
  }
  if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
    integer = false;
    r->p++;
    if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
    if (!is_digit(r->p, r->end)) return fail_at(r, "expected a digit in an exponent");
    while (is_digit(r->p, r->end)) r->p++;
  }
  char text[64];
  size_t len = (size_t)(r->p - start);
  if (len >= sizeof text) {
    if (integer) return r->p = start, fail_at(r, "integer outside int64");
    char* big = tsr_arena_strndup(r->arena, (const char*)start, len);
    if (!big) return out_of_memory(r);
    node->kind = TSR_JSON_REAL;
    node->real = strtod(big, NULL);
    return TSR_SUCCESS;
  }
  memcpy(text, start, len);
  text[len] = '\0';
  errno = 0;
  if (integer) {
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE) return r->p = start, fail_at(r, "integer outside int64");
    node->kind = TSR_JSON_INT;
    node->i = v;
  } else {
    node->kind = TSR_JSON_REAL;
    node->real = strtod(text, NULL);
  }
  return TSR_SUCCESS;
}

static int compare_keys(const void* a, const void* b) {
  const tsr_json_t *x = *(tsr_json_t* const*)a, *y = *(tsr_json_t* const*)b;
  size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
  int c = memcmp(x->key, y->key, n);
  return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* A duplicate key of `object`, or NULL: pairwise for small objects, sorted for large ones. */
static const tsr_json_t* duplicate_key(reader_t* r, const tsr_json_t* object, bool* oom) {
  if (object->count <= 16) {
    for (const tsr_json_t* a = object->first; a; a = a->next)
      for (const tsr_json_t* b = a->next; b; b = b->next)
        if (a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0) return a;
    return NULL;
  }
  tsr_json_t** sorted = malloc(object->count * sizeof *sorted);
  if (!sorted) return *oom = true, NULL;
  size_t n = 0;
  for (tsr_json_t* m = object->first; m; m = m->next) sorted[n++] = m;
  qsort(sorted, n, sizeof *sorted, compare_keys);
  const tsr_json_t* dup = NULL;
  for (size_t i = 1; i < n && !dup; i++)
    if (compare_keys(&sorted[i - 1], &sorted[i]) == 0) dup = sorted[i];
  free(sorted);
  (void)r;
  return dup;
}

static tsr_status_t read_value(reader_t* r, tsr_json_t** out);

static tsr_status_t read_container(reader_t* r, tsr_json_t* node, bool object) {
  if (++r->depth > TSR_JSON_MAX_DEPTH) return fail_at(r, "nesting deeper than 64 levels");
  node->kind = object ? TSR_JSON_OBJECT : TSR_JSON_ARRAY;
  r->p++;
  skip_blanks(r);
  char close = object ? '}' : ']';
  tsr_json_t** tail = &node->first;
  if (r->p < r->end && *r->p == close) {
    r->p++;
    r->depth--;
    return TSR_SUCCESS;
  }
  for (;;) {
    const char* key = NULL;
    size_t key_len = 0;
    if (object) {
      skip_blanks(r);
      if (r->p >= r->end || *r->p != '"') return fail_at(r, "expected a member name in double quotes");
      tsr_status_t s = read_string(r, &key, &key_len);
      if (s) return s;
      skip_blanks(r);
      if (r->p >= r->end || *r->p != ':') return fail_at(r, "expected ':'");
      r->p++;
    }
    tsr_json_t* item;
    tsr_status_t s = read_value(r, &item);
    if (s) return s;
    if (node->count == UINT32_MAX) return fail_at(r, "too many items");
    item->key = key;
    item->key_len = key_len;
    *tail = item;
    tail = &item->next;
    node->count++;
    skip_blanks(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      continue;
    }
    if (r->p < r->end && *r->p == close) break;
    return fail_at(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
  r->p++;
  r->depth--;
  if (object) {
    bool oom = false;
    const tsr_json_t* dup = duplicate_key(r, node, &oom);
    if (oom) return out_of_memory(r);
    if (dup)
      return tsr_fail(TSR_ERROR_BAD_IMAGE, "%s: the object ending at byte %zu has the member '%.80s' twice", r->what,
                      (size_t)(r->p - r->begin), dup->key);
  }
  return TSR_SUCCESS;
}

static tsr_status_t read_value(reader_t* r, tsr_json_t** out) {
  skip_blanks(r);
  tsr_json_t* node = tsr_arena_alloc(r->arena, sizeof *node);
  if (!node) return out_of_memory(r);
  *out = node;
  if (r->p >= r->end) return fail_at(r, "expected a value");
  switch (*r->p) {
    case '{': return read_container(r, node, true);
    case '[': return read_container(r, node, false);
    case '"': node->kind = TSR_JSON_STRING; return read_string(r, &node->str, &node->len);
    default: break;
  }
  if (take_word(r, "null")) node->kind = TSR_JSON_NULL;
  else if (take_word(r, "true")) node->kind = TSR_JSON_TRUE;
  else if (take_word(r, "false")) node->kind = TSR_JSON_FALSE;
  else if (take_word(r, "NaN")) node->kind = TSR_JSON_REAL, node->real = NAN;
  else return read_number(r, node);
  return TSR_SUCCESS;
}

tsr_status_t tsr_json_parse(const char* data, size_t size, tsr_arena_t* arena, const char* what, tsr_json_t** out) {
  reader_t r = {(const unsigned char*)data, (const unsigned char*)data, (const unsigned char*)data + size, arena,
                what, 0};
  if (!data && size) return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: no bytes to read", what);
  tsr_status_t s = read_value(&r, out);
  if (s) return s;
  skip_blanks(&r);
  if (r.p != r.end) return fail_at(&r, "extra data after the document");
  return TSR_SUCCESS;
}

const tsr_json_t* tsr_json_member(const tsr_json_t* object, const char* key) {
  size_t n = strlen(key);
  for (const tsr_json_t* m = object->first; m; m = m->next)
    if (m->key_len == n && memcmp(m->key, key, n) == 0) return m;
  return NULL;
}

const char* tsr_json_kind_name(tsr_json_kind_t kind) {
  static const char* const names[] = {"null", "false", "true", "an integer", "a real number", "a string", "a list",
                                      "an object"};
  return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "?";
}
