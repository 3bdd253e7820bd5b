//! The allowed-traffic summary: per turn and host, how many connections and bytes the proxy
//! let through, added in batches like refusals and read back beside the refusal record.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::{Store, StoreError};
use crate::host::Host;
use crate::ids::TurnId;
use crate::time::Timestamp;

/// One allowed connection's traffic, summarised per (turn, host).
#[derive(Debug, Clone)]
pub struct EgressEvent {
    /// The turn.
    pub turn: TurnId,
    /// The host reached.
    pub host: Host,
    /// New connections (tunnels or forwarded requests) to count.
    pub connections: i64,
    /// Bytes from the client to the origin.
    pub bytes_up: i64,
    /// Bytes from the origin to the client.
    pub bytes_down: i64,
    /// When.
    pub at: Timestamp,
}

/// A turn's allowed traffic to one host.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EgressRow {
    /// Host reached.
    pub host: String,
    /// Connections or forwarded requests.
    pub connections: i64,
    /// Bytes sent upstream.
    pub bytes_up: i64,
    /// Bytes received.
    pub bytes_down: i64,
    /// First time.
    pub first_seen: Timestamp,
    /// Latest time.
    pub last_seen: Timestamp,
}

impl Store {
    /// Adds allowed-traffic counters, batched like refusals.
    pub async fn record_egress(&self, events: &[EgressEvent]) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        for e in events {
            sqlx::query(
                "INSERT INTO egress (turn_id, host, connections, bytes_up, bytes_down, first_seen, last_seen) \
                 VALUES ($1, $2, $3, $4, $5, $6, $6) \
                 ON CONFLICT (turn_id, host) DO UPDATE SET \
                   connections = egress.connections + excluded.connections, \
                   bytes_up = egress.bytes_up + excluded.bytes_up, \
                   bytes_down = egress.bytes_down + excluded.bytes_down, \
                   last_seen = excluded.last_seen",
            )
            .bind(e.turn.as_str())
            .bind(e.host.as_str())
            .bind(e.connections)
            .bind(e.bytes_up)
            .bind(e.bytes_down)
            .bind(e.at.millis())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A turn's allowed traffic per host.
    pub async fn list_egress(&self, turn: &TurnId) -> Result<Vec<EgressRow>, StoreError> {
        let query = sqlx::query(
            "SELECT host, connections, bytes_up, bytes_down, first_seen, last_seen FROM egress \
             WHERE turn_id = $1 ORDER BY host",
        )
        .bind(turn.as_str());
        super::fetch_all(self.pool(), query).await
    }
}

impl super::FromRow for EgressRow {
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            host: r.try_get(0)?,
            connections: r.try_get(1)?,
            bytes_up: r.try_get(2)?,
            bytes_down: r.try_get(3)?,
            first_seen: Timestamp::from_millis(r.try_get(4)?),
            last_seen: Timestamp::from_millis(r.try_get(5)?),
        })
    }
}
