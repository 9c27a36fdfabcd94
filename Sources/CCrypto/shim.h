// OpenSSL's SHA-256 (EVP digest) for the PKCE code challenge. Swift calls these functions directly.
#include <openssl/evp.h>
#include <openssl/sha.h>
