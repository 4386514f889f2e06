/*
 * store_proto.c - encode and validate store frames; see areal/comm/store_proto.h.
 *
 * The decoder checks every length against its bound before it adds them, so
 * no sum can overflow, and it accepts exactly the frames the encoder writes.
 */
#include "areal/comm/store_proto.h"

#include <string.h>

#include "areal/comm/net.h"

static int op_valid(uint8_t op) {
    return op >= AREAL_STORE_SET && op <= AREAL_STORE_CHECK;
}

/* Which fields an op carries: bit 0 val, bit 1 val2, bit 2 timeout. */
static unsigned op_fields(areal_store_op op) {
    switch (op) {
    case AREAL_STORE_SET:
        return 1;
    case AREAL_STORE_GET:
    case AREAL_STORE_WAIT:
        return 4;
    case AREAL_STORE_ADD:
        return 1;
    case AREAL_STORE_CAS:
        return 3;
    default:
        return 0;
    }
}

static int check_fields(const areal_store_req *r, areal_error *err) {
    unsigned f = op_fields(r->op);
    if (r->key_len == 0)
        return areal_error_set(err, AREAL_EINVAL, 0, "store request has an empty key");
    if (!(f & 1) && r->val_len != 0)
        return areal_error_set(err, AREAL_EINVAL, 0, "store op %d carries no value", r->op);
    if (!(f & 2) && r->val2_len != 0)
        return areal_error_set(err, AREAL_EINVAL, 0, "store op %d carries no second value", r->op);
    if (!(f & 4) && r->timeout_ms != 0)
        return areal_error_set(err, AREAL_EINVAL, 0, "store op %d carries no timeout", r->op);
    if (r->op == AREAL_STORE_ADD && r->val_len != 8)
        return areal_error_set(err, AREAL_EINVAL, 0, "store add needs an 8-byte delta, got %u",
                               r->val_len);
    return AREAL_OK;
}

int areal_store_decode_req(const uint8_t *buf, size_t n, areal_store_req *req, size_t *used,
                           areal_error *err) {
    if (n < 4)
        return 0;
    uint32_t body = areal_get_u32(buf);
    if (body < AREAL_STORE_REQ_HDR - 4 || body > AREAL_STORE_FRAME_MAX - 4)
        return areal_error_set(err, AREAL_EINVAL, 0, "store request length %u is outside %u..%u",
                               body, AREAL_STORE_REQ_HDR - 4, AREAL_STORE_FRAME_MAX - 4);
    if (n < AREAL_STORE_REQ_HDR)
        return 0;
    uint8_t op = buf[4];
    if (!op_valid(op))
        return areal_error_set(err, AREAL_EINVAL, 4, "unknown store op %u", op);
    if (buf[5] != 0)
        return areal_error_set(err, AREAL_EINVAL, 5, "reserved byte is %u, not 0", buf[5]);
    uint32_t klen = (uint32_t)buf[6] | (uint32_t)buf[7] << 8;
    uint32_t vlen = areal_get_u32(buf + 12), v2len = areal_get_u32(buf + 16);
    if (klen > AREAL_STORE_KEY_MAX)
        return areal_error_set(err, AREAL_EINVAL, 6, "store key of %u bytes exceeds %u", klen,
                               AREAL_STORE_KEY_MAX);
    if (vlen > AREAL_STORE_VAL_MAX || v2len > AREAL_STORE_VAL_MAX)
        return areal_error_set(err, AREAL_EINVAL, 12, "store value exceeds %u bytes",
                               AREAL_STORE_VAL_MAX);
    if (body != AREAL_STORE_REQ_HDR - 4 + klen + vlen + v2len)
        return areal_error_set(err, AREAL_EINVAL, 0,
                               "store request length %u disagrees with its fields", body);
    areal_store_req r = {
        .op = (areal_store_op)op,
        .timeout_ms = areal_get_u32(buf + 8),
        .key_len = klen,
        .val_len = vlen,
        .val2_len = v2len,
    };
    int rc = check_fields(&r, err);
    if (rc != AREAL_OK)
        return rc;
    if (n < (size_t)body + 4)
        return 0;
    r.key = buf + AREAL_STORE_REQ_HDR;
    r.val = r.key + klen;
    r.val2 = r.val + vlen;
    *req = r;
    *used = (size_t)body + 4;
    return 1;
}

int areal_store_decode_resp(const uint8_t *buf, size_t n, areal_store_resp *resp, size_t *used,
                            areal_error *err) {
    if (n < 4)
        return 0;
    uint32_t body = areal_get_u32(buf);
    if (body < AREAL_STORE_RESP_HDR - 4 || body > AREAL_STORE_RESP_HDR - 4 + AREAL_STORE_VAL_MAX)
        return areal_error_set(err, AREAL_EINVAL, 0, "store response length %u is out of range",
                               body);
    if (n < AREAL_STORE_RESP_HDR)
        return 0;
    if (buf[4] > AREAL_STORE_FULL)
        return areal_error_set(err, AREAL_EINVAL, 4, "unknown store status %u", buf[4]);
    if (buf[5] != 0 || buf[6] != 0 || buf[7] != 0)
        return areal_error_set(err, AREAL_EINVAL, 5, "reserved response bytes are not 0");
    uint32_t vlen = areal_get_u32(buf + 8);
    if (body != AREAL_STORE_RESP_HDR - 4 + vlen)
        return areal_error_set(err, AREAL_EINVAL, 0,
                               "store response length %u disagrees with its value", body);
    if (n < (size_t)body + 4)
        return 0;
    resp->status = (areal_store_status)buf[4];
    resp->val = buf + AREAL_STORE_RESP_HDR;
    resp->val_len = vlen;
    *used = (size_t)body + 4;
    return 1;
}

size_t areal_store_encode_req(const areal_store_req *r, uint8_t *out, size_t cap) {
    if (!op_valid((uint8_t)r->op) || check_fields(r, NULL) != AREAL_OK ||
        r->key_len > AREAL_STORE_KEY_MAX || r->val_len > AREAL_STORE_VAL_MAX ||
        r->val2_len > AREAL_STORE_VAL_MAX)
        return 0;
    size_t total = AREAL_STORE_REQ_HDR + (size_t)r->key_len + r->val_len + r->val2_len;
    if (total > cap)
        return 0;
    areal_put_u32(out, (uint32_t)(total - 4));
    out[4] = (uint8_t)r->op;
    out[5] = 0;
    out[6] = (uint8_t)(r->key_len & 0xff);
    out[7] = (uint8_t)(r->key_len >> 8);
    areal_put_u32(out + 8, r->timeout_ms);
    areal_put_u32(out + 12, r->val_len);
    areal_put_u32(out + 16, r->val2_len);
    uint8_t *p = out + AREAL_STORE_REQ_HDR;
    if (r->key_len)
        memcpy(p, r->key, r->key_len);
    p += r->key_len;
    if (r->val_len)
        memcpy(p, r->val, r->val_len);
    p += r->val_len;
    if (r->val2_len)
        memcpy(p, r->val2, r->val2_len);
    return total;
}

size_t areal_store_encode_resp(const areal_store_resp *r, uint8_t *out, size_t cap) {
    if ((unsigned)r->status > AREAL_STORE_FULL || r->val_len > AREAL_STORE_VAL_MAX)
        return 0;
    size_t total = AREAL_STORE_RESP_HDR + (size_t)r->val_len;
    if (total > cap)
        return 0;
    areal_put_u32(out, (uint32_t)(total - 4));
    out[4] = (uint8_t)r->status;
    out[5] = out[6] = out[7] = 0;
    areal_put_u32(out + 8, r->val_len);
    if (r->val_len)
        memcpy(out + AREAL_STORE_RESP_HDR, r->val, r->val_len);
    return total;
}
