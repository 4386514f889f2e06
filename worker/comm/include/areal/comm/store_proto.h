/*
 * store_proto.h - the rendezvous store's wire format: length-prefixed binary
 * frames with bounded sizes, decoded without allocation.
 *
 *   request  = u32 body_len | u8 op | u8 0 | u16 key_len | u32 timeout_ms
 *              | u32 val_len | u32 val2_len | key | val | val2
 *   response = u32 body_len | u8 status | u8 0 0 0 | u32 val_len | val
 *
 * All integers little-endian. body_len counts the bytes after itself and must
 * equal the header plus the three lengths. A frame is rejected when a length
 * exceeds its bound, a reserved byte is not zero, the op or status is unknown,
 * the key is empty, or an op carries fields it does not use. Rejected: text
 * (no length bound until the newline) and varints (a second encoding of the
 * same frame).
 */
#ifndef AREAL_COMM_STORE_PROTO_H
#define AREAL_COMM_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

#define AREAL_STORE_KEY_MAX   1024u      /* bytes of a key */
#define AREAL_STORE_VAL_MAX   (1u << 20) /* bytes of a value */
#define AREAL_STORE_REQ_HDR   20u        /* length prefix + fixed request fields */
#define AREAL_STORE_RESP_HDR  12u
#define AREAL_STORE_FRAME_MAX (AREAL_STORE_REQ_HDR + AREAL_STORE_KEY_MAX + 2 * AREAL_STORE_VAL_MAX)

typedef enum areal_store_op {
    AREAL_STORE_SET = 1,  /* key val: store val */
    AREAL_STORE_GET = 2,  /* key, timeout: the value, waiting up to timeout for the key */
    AREAL_STORE_WAIT = 3, /* key, timeout: OK once the key exists */
    AREAL_STORE_ADD = 4,  /* key, val = 8-byte delta: the new counter value (8 bytes) */
    AREAL_STORE_CAS = 5,  /* key, val = expected, val2 = desired: the value after the op */
    AREAL_STORE_DEL = 6,  /* key: OK when deleted, NOTFOUND when absent */
    AREAL_STORE_CHECK = 7 /* key: OK when present, NOTFOUND when absent (never waits) */
} areal_store_op;

typedef enum areal_store_status {
    AREAL_STORE_OK = 0,
    AREAL_STORE_NOTFOUND = 1,
    AREAL_STORE_TIMEOUT = 2,
    AREAL_STORE_BADREQ = 3, /* the server rejected the request (message in val) */
    AREAL_STORE_FULL = 4,   /* the server's key or byte budget is spent */
} areal_store_status;

/* A decoded request; key/val/val2 point into the decoded buffer. */
typedef struct areal_store_req {
    areal_store_op op;
    uint32_t timeout_ms;
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *val;
    uint32_t val_len;
    const uint8_t *val2;
    uint32_t val2_len;
} areal_store_req;

typedef struct areal_store_resp {
    areal_store_status status;
    const uint8_t *val;
    uint32_t val_len;
} areal_store_resp;

/*
 * Decodes the request at the start of buf[0..n). Returns 1 and sets *used to
 * the frame length when a whole valid frame is there, 0 when more bytes are
 * needed (never more than AREAL_STORE_FRAME_MAX in all), or AREAL_EINVAL with
 * a message saying what is malformed. Reads only buf[0..n).
 */
int areal_store_decode_req(const uint8_t *buf, size_t n, areal_store_req *req, size_t *used,
                           areal_error *err);

/* The same for a response (val at most AREAL_STORE_VAL_MAX). */
int areal_store_decode_resp(const uint8_t *buf, size_t n, areal_store_resp *resp, size_t *used,
                            areal_error *err);

/*
 * Encodes into out[0..cap); returns the frame length, or 0 when a field is
 * out of bounds or cap is too small (nothing useful written then).
 */
size_t areal_store_encode_req(const areal_store_req *req, uint8_t *out, size_t cap);
size_t areal_store_encode_resp(const areal_store_resp *resp, uint8_t *out, size_t cap);

#endif
