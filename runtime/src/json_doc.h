/* json_doc.h — reading JSON documents (RFC 8259, plus Python's NaN, Infinity and -Infinity, which
 * `json.dumps` writes for such floats) into a tree in an arena. json.h is the writer.
 *
 * Stricter than Python's `json.loads` where a runtime must be: nesting deeper than TSR_JSON_MAX_DEPTH,
 * duplicate object keys, integers outside int64 and strings that are not valid UTF-8 (lone surrogates
 * included) are refused. Object members keep their document order. */
#ifndef TESSERA_SRC_JSON_DOC_H_
#define TESSERA_SRC_JSON_DOC_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "tessera/tessera.h"

#define TSR_JSON_MAX_DEPTH 64

typedef enum tsr_json_kind {
  TSR_JSON_NULL,
  TSR_JSON_FALSE,
  TSR_JSON_TRUE,
  TSR_JSON_INT,     /* a number without fraction or exponent: `i` */
  TSR_JSON_REAL,    /* any other number: `real` */
  TSR_JSON_STRING,  /* `str`, `len` bytes of UTF-8, NUL-terminated (it may hold NULs: \u0000) */
  TSR_JSON_ARRAY,   /* `count` items from `first`, linked by `next` */
  TSR_JSON_OBJECT,  /* `count` members from `first`, linked by `next`, each with its `key` */
} tsr_json_kind_t;

typedef struct tsr_json {
  tsr_json_kind_t kind;
  uint32_t count;
  int64_t i;
  double real;
  const char* str;
  size_t len;
  struct tsr_json *first, *next;
  const char* key;  /* a member's key (NUL-terminated; key_len bytes) */
  size_t key_len;
} tsr_json_t;

/* Parses `size` bytes into `arena`. TSR_ERROR_BAD_IMAGE with a message "`what`: ... at byte N" where the
 * bytes are not one JSON value; TSR_ERROR_OUT_OF_MEMORY. */
tsr_status_t tsr_json_parse(const char* data, size_t size, tsr_arena_t* arena, const char* what, tsr_json_t** out);

/* The member `key` of an object, or NULL. */
const tsr_json_t* tsr_json_member(const tsr_json_t* object, const char* key);

/* "an object", "a string", ...: the kind as a message names it. */
const char* tsr_json_kind_name(tsr_json_kind_t kind);

#endif  /* TESSERA_SRC_JSON_DOC_H_ */
