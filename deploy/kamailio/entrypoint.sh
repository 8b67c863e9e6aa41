#!/bin/sh
# Turns the environment into kamailio.cfg's defines and runs Kamailio in the foreground.
#   KAMAILIO_DB_URL  postgres://user:password@host:5432/db (the CRM's database; tables in schema kamailio)
#   SIP_DOMAIN       companies are c<id>.<SIP_DOMAIN> (same value as the API's)
#   SIP_TRUNK_URI    where external numbers go, e.g. sip:gw.carrier.example:5060;transport=tcp
#   RPC_IP           address of the JSON-RPC listener (port 5090); never publish it
set -eu
: "${KAMAILIO_DB_URL:?set KAMAILIO_DB_URL}"
: "${SIP_DOMAIN:?set SIP_DOMAIN}"
exec kamailio -DD -E -f /etc/kamailio/crm.cfg \
  -A "SIP_DOMAIN=\"$SIP_DOMAIN\"" \
  -A "DBURL=\"$KAMAILIO_DB_URL\"" \
  -A "SQLCON=\"crm=>$KAMAILIO_DB_URL\"" \
  -A "SIP_TRUNK_URI=\"${SIP_TRUNK_URI:-sip:trunk.invalid:5060}\"" \
  -A "RPC_IP=${RPC_IP:-0.0.0.0}" \
  "$@"
