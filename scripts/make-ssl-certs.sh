#!/usr/bin/env bash
# Makes the certificates of the SSL local stack (docker-compose.ssl.yml) with
# openssl alone, no keytool or container needed:
#
#   ca.pem                  the CA clients verify the broker with (ingest's
#                           KAFKA_CONSUMER_SSL_CA_LOCATION)
#   kafka.pem               the broker's certificate, signed by the CA, for
#                           the names kafka, localhost and 127.0.0.1
#   kafka.keystore.p12      the broker's key and certificate chain (PKCS12)
#   kafka_keystore_creds    its password, twice: the files the apache/kafka
#   kafka_key_creds         image reads (KAFKA_SSL_*_CREDENTIALS)
#
# Every run makes a new CA, key and password; the CA's and the broker's
# private keys are kept only inside the keystore. Restart the stack after.
#
#   scripts/make-ssl-certs.sh [DIR]     # default .compose-ssl in the repo
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
dir=${1:-$root/.compose-ssl}
days=${MILLPOND_SSL_CERT_DAYS:-825}

command -v openssl >/dev/null || { echo "make-ssl-certs: openssl is required" >&2; exit 1; }
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/ca.ext" <<'EOF'
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
cat >"$work/broker.ext" <<'EOF'
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:kafka, DNS:localhost, IP:127.0.0.1
authorityKeyIdentifier = keyid
EOF

quiet() { "$@" >"$work/out" 2>&1 || { cat "$work/out" >&2; exit 1; }; }
# The CA: a self-signed certificate from a request, with the extensions above.
quiet openssl req -new -newkey rsa:2048 -nodes -keyout "$work/ca.key" \
    -subj "/CN=millpond-local-ca" -out "$work/ca.csr"
quiet openssl x509 -req -in "$work/ca.csr" -signkey "$work/ca.key" -days "$days" \
    -extfile "$work/ca.ext" -out "$work/ca.pem"
# The broker.
quiet openssl req -new -newkey rsa:2048 -nodes -keyout "$work/kafka.key" \
    -subj "/CN=kafka" -out "$work/kafka.csr"
quiet openssl x509 -req -in "$work/kafka.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$days" -extfile "$work/broker.ext" \
    -out "$work/kafka.pem"
quiet openssl verify -CAfile "$work/ca.pem" "$work/kafka.pem"
password=$(openssl rand -hex 24)
quiet openssl pkcs12 -export -name kafka -in "$work/kafka.pem" -inkey "$work/kafka.key" \
    -certfile "$work/ca.pem" -passout "pass:$password" -out "$work/kafka.keystore.p12"
printf '%s' "$password" >"$work/kafka_keystore_creds"
printf '%s' "$password" >"$work/kafka_key_creds"

# Readable by the containers' own users (the broker runs as uid 1000, ingest
# as 10001): this is a local stack's throwaway CA.
chmod 0755 "$dir"
for f in ca.pem kafka.pem kafka.keystore.p12 kafka_keystore_creds kafka_key_creds; do
    install -m 0644 "$work/$f" "$dir/$f"
done
echo "make-ssl-certs: $dir: ca.pem, kafka.pem (kafka, localhost, 127.0.0.1), kafka.keystore.p12, kafka_keystore_creds, kafka_key_creds"
