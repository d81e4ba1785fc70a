#ifndef KINDRED_COPENSSL_SHIM_H
#define KINDRED_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/kdf.h>

// Macro-only OpenSSL APIs, as functions Swift can call.

static inline int kindred_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

/// No renegotiation (TLS 1.2), server cipher preference, no compression (CRIME).
static inline void kindred_SSL_CTX_set_default_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
}

static inline long kindred_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline long kindred_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

static inline int kindred_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

static inline int kindred_BIO_set_mem_eof_return(BIO *bio, int value) {
    return (int)BIO_set_mem_eof_return(bio, value);
}

static inline long kindred_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

static inline void kindred_OPENSSL_free(void *pointer) {
    OPENSSL_free(pointer);
}

static inline unsigned long kindred_XN_FLAG_RFC2253(void) {
    return XN_FLAG_RFC2253;
}

static inline int kindred_EVP_PKEY_PUBLIC_KEY(void) {
    return EVP_PKEY_PUBLIC_KEY;
}

// OSSL_PARAM_BLD keeps the key names, strings and BIGNUMs it is given by reference until
// OSSL_PARAM_BLD_to_param(): the names must be static C strings, so they are pushed from C.

static inline int kindred_OSSL_PARAM_BLD_push_rsa_public(OSSL_PARAM_BLD *bld, const BIGNUM *n, const BIGNUM *e) {
    return OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n)
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e);
}

static inline int kindred_OSSL_PARAM_BLD_push_p256_public(OSSL_PARAM_BLD *bld, const unsigned char *point, size_t length) {
    return OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1, 0)
        && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, length);
}

static inline int kindred_EVP_PKEY_KEYPAIR(void) {
    return EVP_PKEY_KEYPAIR;
}

/// A fresh P-256 key pair (EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen).
static inline EVP_PKEY *kindred_EVP_EC_gen_p256(void) {
    return EVP_EC_gen(SN_X9_62_prime256v1);
}

static inline int kindred_OSSL_PARAM_BLD_push_p256_keypair(OSSL_PARAM_BLD *bld, const BIGNUM *private_key,
                                                          const unsigned char *point, size_t length) {
    return OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1, 0)
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, private_key)
        && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, length);
}

/// The encoded public key of an EC key (SEC 1; uncompressed unless the key says otherwise). Returns 1 on success;
/// with a NULL `out` only the length is stored.
static inline int kindred_EVP_PKEY_get_public_point(const EVP_PKEY *key, unsigned char *out, size_t size, size_t *length) {
    return EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, out, size, length);
}

/// HKDF with SHA-256 (RFC 5869, extract then expand) through the EVP_KDF API. Returns 1 on success, 0 on failure.
static inline int kindred_HKDF_SHA256(unsigned char *out, size_t out_length,
                                      const unsigned char *key, size_t key_length,
                                      const unsigned char *salt, size_t salt_length,
                                      const unsigned char *info, size_t info_length) {
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, OSSL_KDF_NAME_HKDF, NULL);
    if (kdf == NULL) return 0;
    EVP_KDF_CTX *context = EVP_KDF_CTX_new(kdf);
    EVP_KDF_free(kdf);
    if (context == NULL) return 0;
    OSSL_PARAM parameters[5];
    parameters[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)SN_sha256, 0);
    parameters[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, key_length);
    parameters[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_length);
    parameters[3] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_length);
    parameters[4] = OSSL_PARAM_construct_end();
    int result = EVP_KDF_derive(context, out, out_length, parameters);
    EVP_KDF_CTX_free(context);
    return result == 1 ? 1 : 0;
}

static inline int kindred_EVP_CTRL_GCM_GET_TAG(void) {
    return EVP_CTRL_GCM_GET_TAG;
}

static inline int kindred_EVP_CTRL_GCM_SET_TAG(void) {
    return EVP_CTRL_GCM_SET_TAG;
}

#endif
