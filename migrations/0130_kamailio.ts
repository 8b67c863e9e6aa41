import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The tables Kamailio (PBX=kamailio) reads and writes, in a schema of their own: Kamailio finds
 * them through its connection's search_path (`PGOPTIONS=-c search_path=kamailio`), and their
 * generic names (`version`, `location`) stay out of ours. The layout is Kamailio 5.6's
 * (`/usr/share/kamailio/postgres/{standard,auth_db,usrloc}-create.sql`, table versions included:
 * modules refuse to start on a mismatch).
 *
 * `subscriber` holds digests only (ha1, ha1b; `password` stays empty) and is tied to the operator
 * row it was made from, so no SIP account outlives the member's telephony, however that row goes.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE SCHEMA kamailio`
  yield* sql`
    CREATE TABLE kamailio.version (
      id SERIAL PRIMARY KEY NOT NULL,
      table_name VARCHAR(32) NOT NULL,
      table_version INTEGER DEFAULT 0 NOT NULL,
      CONSTRAINT version_table_name_idx UNIQUE (table_name)
    )`
  yield* sql`
    CREATE TABLE kamailio.subscriber (
      id SERIAL PRIMARY KEY NOT NULL,
      username VARCHAR(64) DEFAULT '' NOT NULL,
      domain VARCHAR(64) DEFAULT '' NOT NULL,
      password VARCHAR(64) DEFAULT '' NOT NULL CHECK (password = ''),
      ha1 VARCHAR(128) DEFAULT '' NOT NULL,
      ha1b VARCHAR(128) DEFAULT '' NOT NULL,
      company_id bigint NOT NULL,
      user_id bigint NOT NULL,
      CONSTRAINT subscriber_account_idx UNIQUE (username, domain),
      CONSTRAINT subscriber_operator_fk FOREIGN KEY (company_id, user_id)
        REFERENCES telephony_operators (company_id, user_id) ON DELETE CASCADE
    )`
  yield* sql`CREATE INDEX subscriber_username_idx ON kamailio.subscriber (username)`
  yield* sql`CREATE INDEX subscriber_operator_idx ON kamailio.subscriber (company_id, user_id)`
  yield* sql`
    CREATE TABLE kamailio.location (
      id SERIAL PRIMARY KEY NOT NULL,
      ruid VARCHAR(64) DEFAULT '' NOT NULL,
      username VARCHAR(64) DEFAULT '' NOT NULL,
      domain VARCHAR(64) DEFAULT NULL,
      contact VARCHAR(512) DEFAULT '' NOT NULL,
      received VARCHAR(128) DEFAULT NULL,
      path VARCHAR(512) DEFAULT NULL,
      expires TIMESTAMP WITHOUT TIME ZONE DEFAULT '2030-05-28 21:32:15' NOT NULL,
      q REAL DEFAULT 1.0 NOT NULL,
      callid VARCHAR(255) DEFAULT 'Default-Call-ID' NOT NULL,
      cseq INTEGER DEFAULT 1 NOT NULL,
      last_modified TIMESTAMP WITHOUT TIME ZONE DEFAULT '2000-01-01 00:00:01' NOT NULL,
      flags INTEGER DEFAULT 0 NOT NULL,
      cflags INTEGER DEFAULT 0 NOT NULL,
      user_agent VARCHAR(255) DEFAULT '' NOT NULL,
      socket VARCHAR(64) DEFAULT NULL,
      methods INTEGER DEFAULT NULL,
      instance VARCHAR(255) DEFAULT NULL,
      reg_id INTEGER DEFAULT 0 NOT NULL,
      server_id INTEGER DEFAULT 0 NOT NULL,
      connection_id INTEGER DEFAULT 0 NOT NULL,
      keepalive INTEGER DEFAULT 0 NOT NULL,
      partition INTEGER DEFAULT 0 NOT NULL,
      CONSTRAINT location_ruid_idx UNIQUE (ruid)
    )`
  yield* sql`CREATE INDEX location_account_contact_idx ON kamailio.location (username, domain, contact)`
  yield* sql`CREATE INDEX location_expires_idx ON kamailio.location (expires)`
  yield* sql`CREATE INDEX location_tcpcon_idx ON kamailio.location (connection_id)`
  yield* sql`CREATE INDEX location_connection_idx ON kamailio.location (server_id, connection_id)`
  yield* sql`
    CREATE TABLE kamailio.location_attrs (
      id SERIAL PRIMARY KEY NOT NULL,
      ruid VARCHAR(64) DEFAULT '' NOT NULL,
      username VARCHAR(64) DEFAULT '' NOT NULL,
      domain VARCHAR(64) DEFAULT NULL,
      aname VARCHAR(64) DEFAULT '' NOT NULL,
      atype INTEGER DEFAULT 0 NOT NULL,
      avalue VARCHAR(512) DEFAULT '' NOT NULL,
      last_modified TIMESTAMP WITHOUT TIME ZONE DEFAULT '2000-01-01 00:00:01' NOT NULL
    )`
  yield* sql`CREATE INDEX location_attrs_account_record_idx ON kamailio.location_attrs (username, domain, ruid)`
  yield* sql`CREATE INDEX location_attrs_last_modified_idx ON kamailio.location_attrs (last_modified)`
  yield* sql`
    INSERT INTO kamailio.version (table_name, table_version)
    VALUES ('version', 1), ('subscriber', 7), ('location', 9), ('location_attrs', 1)`
})
