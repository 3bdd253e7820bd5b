-- Symmetric keys a deployment generates once and every process shares (the MCP server's
-- requestState sealing key). Unlike API tokens they must be kept whole, since each process
-- signs and verifies with them; they never leave the database except into memory.
CREATE TABLE deployment_keys (
    name        TEXT   PRIMARY KEY,
    key_hex     TEXT   NOT NULL,
    created_at  BIGINT NOT NULL
);
