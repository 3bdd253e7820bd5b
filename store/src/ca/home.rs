//! Where the deployment CA is kept and how it lives: [`CaHome`] reads it for everyone (the
//! certificates clients trust, never making one), makes it for the proxy and `ca print`,
//! replaces it with a successor when it is due, and rotates it for `ca rotate`. The file and
//! the table do the keeping; this decides when.

use std::path::PathBuf;
use std::time::Duration;

use super::seal::SealKey;
use super::{CaError, DeploymentCa, file, names, table};
use crate::db::Store;
use crate::db::admin::AdminList;
use crate::pattern::SitePattern;
use crate::time::Timestamp;

/// How the deployment's CAs are made and replaced.
#[derive(Clone, Debug)]
pub struct CaPolicy {
    /// How long a new CA is valid.
    pub lifetime: Duration,
    /// A CA with less than this left is replaced, and a replaced CA stays trusted at most
    /// this long.
    pub overlap: Duration,
    /// `Some`: the CA permits only these names plus the administrators' entries marked
    /// `inspect` (name constraints); `None`: it may sign for any name.
    pub names: Option<Vec<SitePattern>>,
}

impl Default for CaPolicy {
    fn default() -> Self {
        Self {
            lifetime: Duration::from_secs(365 * 86_400),
            overlap: Duration::from_secs(30 * 86_400),
            names: None,
        }
    }
}

/// Where the CA is kept.
#[derive(Clone, Debug)]
enum Place {
    /// A mode-0600 file in this (data) directory.
    Dir(PathBuf),
    /// The `deployment_ca` table (PostgreSQL), the key sealed with this key (if given).
    Database(Option<SealKey>),
}

/// Where the CA is kept and how it is made: the handle every process of the deployment reads
/// it through.
#[derive(Clone, Debug)]
pub struct CaHome {
    place: Place,
    store: Store,
    policy: CaPolicy,
}

/// A duration in whole milliseconds, saturating.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Why a CA is replaced on its own (not by `egressgate ca rotate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Renewal {
    /// Less than the overlap is left.
    Ending,
    /// It outlives the lifetime (a CA of an older release, or the lifetime was shortened).
    TooLong,
    /// It does not permit every inspected name.
    Widened,
}

impl Renewal {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ending => "it ends within the overlap",
            Self::TooLong => "it outlives the configured lifetime",
            Self::Widened => "it does not permit every inspected name",
        }
    }
}

impl CaHome {
    /// The CA in a mode-0600 file of the data directory `dir` (SQLite deployments).
    pub fn dir(dir: PathBuf, store: Store) -> Self {
        Self {
            place: Place::Dir(dir),
            store,
            policy: CaPolicy::default(),
        }
    }

    /// The CA in the database (PostgreSQL), its key sealed with `seal`; without one the CA
    /// can be read (its certificate) but never made, replaced or used to sign.
    pub fn database(store: Store, seal: Option<SealKey>) -> Self {
        Self {
            place: Place::Database(seal),
            store,
            policy: CaPolicy::default(),
        }
    }

    /// The same home making and replacing CAs by `policy`.
    pub fn with_policy(mut self, policy: CaPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The certificates clients should trust now, PEM: the signing CA first, then each
    /// rotated-out CA whose trust has not ended (leaves it signed may still be in use).
    /// Reads only: [`CaError::Missing`] when there is no CA yet.
    pub async fn trusted_pem(&self, now: Timestamp) -> Result<String, CaError> {
        let mut out = match &self.place {
            Place::Dir(dir) => file::signing_cert(dir)?,
            Place::Database(_) => table::signing_cert(&self.store).await?,
        }
        .ok_or(CaError::Missing)?;
        let previous = match &self.place {
            Place::Dir(dir) => file::previous(dir)?,
            Place::Database(_) => table::previous(&self.store).await?,
        };
        for (cert, until) in previous {
            if until > now.millis() {
                out.push_str(&cert);
            }
        }
        Ok(out)
    }

    /// The CA to sign with now: made when there is none (of two processes starting at once,
    /// the first write wins and the other reads it), replaced by a successor when it is due
    /// ([`Renewal`]), else the one kept.
    pub async fn signing(&self, now: Timestamp) -> Result<DeploymentCa, CaError> {
        let wanted = self.wanted().await?;
        let Some(current) = self.load().await? else {
            let fresh = DeploymentCa::generate(now, self.policy.lifetime, wanted.as_deref())?;
            return self.create(fresh, now).await;
        };
        let Some(why) = self.due(&current, wanted.as_deref(), now) else {
            return Ok(current);
        };
        // Widening keeps what the CA permitted (another proxy may inspect it); the others
        // fit the successor to what is inspected now.
        let names = match why {
            Renewal::Widened => names::union(current.names(), wanted.as_deref()),
            Renewal::Ending | Renewal::TooLong => wanted,
        };
        let fresh = DeploymentCa::generate(now, self.policy.lifetime, names.as_deref())?;
        let until = self.until(&current, now, millis(self.policy.overlap));
        if self.replace(&current, &fresh, until, now).await? {
            tracing::warn!(
                reason = why.as_str(),
                previous_trusted_until = %Timestamp::from_millis(until).rfc3339(),
                "deployment CA renewed: its successor signs from now on; clients must fetch \
                 GET /v1/ca.pem (or `egressgate ca print`) again before the previous one's trust ends"
            );
            return Ok(fresh);
        }
        // Another process replaced it first: sign with theirs.
        self.load().await?.ok_or(CaError::Missing)
    }

    /// `egressgate ca rotate`: a new CA fitted to what is inspected now signs from now on; the
    /// current one stays trusted until `now + overlap` (or its own end, if sooner), which is
    /// returned. With no CA yet, one is made and `None` returned.
    pub async fn rotate(
        &self,
        now: Timestamp,
        overlap_ms: i64,
    ) -> Result<Option<Timestamp>, CaError> {
        let wanted = self.wanted().await?;
        let fresh = DeploymentCa::generate(now, self.policy.lifetime, wanted.as_deref())?;
        let Some(current) = self.load().await? else {
            self.create(fresh, now).await?;
            return Ok(None);
        };
        let until = self.until(&current, now, overlap_ms);
        if !self.replace(&current, &fresh, until, now).await? {
            return Err(CaError::Raced);
        }
        Ok(Some(Timestamp::from_millis(until)))
    }

    /// The end of a replaced CA's trust: its own end, or `overlap` from now if sooner.
    fn until(&self, current: &DeploymentCa, now: Timestamp, overlap_ms: i64) -> i64 {
        now.millis()
            .saturating_add(overlap_ms)
            .min(current.not_after.millis())
    }

    /// Why `ca` must be replaced now, if it must.
    fn due(
        &self,
        ca: &DeploymentCa,
        wanted: Option<&[SitePattern]>,
        now: Timestamp,
    ) -> Option<Renewal> {
        let left = ca.not_after.millis().saturating_sub(now.millis());
        let lifetime = millis(self.policy.lifetime);
        // Another process's clock may run a little behind this one's.
        let slack = (lifetime / 10).max(60_000);
        if left < millis(self.policy.overlap) {
            Some(Renewal::Ending)
        } else if left > lifetime.saturating_add(slack) {
            Some(Renewal::TooLong)
        } else if !names::covers(ca.names(), wanted) {
            Some(Renewal::Widened)
        } else {
            None
        }
    }

    /// The names a CA must permit now: the policy's plus the administrators' entries marked
    /// `inspect` (`None`: the CA is not constrained).
    async fn wanted(&self) -> Result<Option<Vec<SitePattern>>, CaError> {
        let Some(fixed) = &self.policy.names else {
            return Ok(None);
        };
        let mut all = fixed.clone();
        for e in self.store.admin_list(AdminList::Sites).await? {
            if e.rules.inspect {
                all.extend(SitePattern::from_db(&e.value));
            }
        }
        Ok(Some(names::minimal(all)))
    }

    /// The signing CA, if any.
    async fn load(&self) -> Result<Option<DeploymentCa>, CaError> {
        match &self.place {
            Place::Dir(dir) => file::load(dir),
            Place::Database(seal) => table::load(&self.store, seal.as_ref()).await,
        }
    }

    /// Keeps `fresh` as the first CA, or reads the one another process kept first.
    async fn create(&self, fresh: DeploymentCa, now: Timestamp) -> Result<DeploymentCa, CaError> {
        match &self.place {
            Place::Dir(dir) => file::create(dir, fresh),
            Place::Database(seal) => {
                let seal = seal.as_ref().ok_or(CaError::NoSealKey)?;
                table::create(&self.store, seal, &fresh, now).await?;
                table::load(&self.store, Some(seal))
                    .await?
                    .ok_or(CaError::Missing)
            }
        }
    }

    /// Makes `fresh` the signing CA in place of `old`, trusted until `until`; `false` when
    /// `old` was no longer the signing CA (another process replaced it first).
    async fn replace(
        &self,
        old: &DeploymentCa,
        fresh: &DeploymentCa,
        until: i64,
        now: Timestamp,
    ) -> Result<bool, CaError> {
        match &self.place {
            Place::Dir(dir) => file::replace(dir, old, fresh, until, now),
            Place::Database(seal) => {
                let seal = seal.as_ref().ok_or(CaError::NoSealKey)?;
                table::replace(&self.store, seal, old, fresh, until, now).await
            }
        }
    }
}
