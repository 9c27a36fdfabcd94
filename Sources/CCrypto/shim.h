// OpenSSL's SHA-256 (EVP digest) for the PKCE code challenge, HMAC-SHA256 for the pairing proofs and
// CRYPTO_memcmp to compare them in constant time. Swift calls these functions directly.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
