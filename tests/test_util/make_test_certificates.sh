#!/bin/sh
# Makes throwaway TLS material for the TLS tests in DIR with the openssl command:
#   ca.pem           a test CA                  other_ca.pem      an unrelated CA
#   server.pem/.key  localhost + 127.0.0.1, signed by ca
#   client.pem/.key  a client, signed by ca     other_client.pem/.key  signed by other_ca
# EC P-256 keys (fast on a slow machine); valid for 2 days. The extensions
# X.509 strict checking asks for (Python 3.13's default SSL context sets
# VERIFY_X509_STRICT): CA basicConstraints and keyUsage, the leaves'
# authority key identifier.
set -eu
dir=${1:?usage: make_test_certificates.sh DIR}
mkdir -p "$dir"
cd "$dir"
ssl() { openssl "$@" 2>/dev/null; }
key() { ssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() {  # NAME
  key "$1.key"
  ssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=manypy test $1" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash"
}
signed() {  # NAME CA EXTENSIONS
  key "$1.key"
  ssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=manypy test $1"
  printf '%s\n' "$3" "authorityKeyIdentifier=keyid,issuer" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature" > "$1.ext"
  ssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -out "$1.pem" -days 2 \
    -extfile "$1.ext"
  rm -f "$1.csr" "$1.ext"
}
ca ca
ca other_ca
signed server ca "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
signed client ca "extendedKeyUsage=clientAuth"
signed other_client other_ca "extendedKeyUsage=clientAuth"
