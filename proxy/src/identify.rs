//! Step 1, identify the turn: `Proxy-Authorization: Basic base64(turn_id:secret)`, checked
//! against the stored hash in constant time. Turns are cached in memory (their credential
//! never changes; only their expiry can grow), so an allowed request costs no database trip.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use egressgate_store::db::refusals::Subject;
use egressgate_store::db::turns::Turn;
use egressgate_store::{Grant, Host, Mode, Package, Secret, Store, StoreError, Timestamp, TurnId};
use subtle::ConstantTimeEq as _;

/// Why a request could not be tied to a live turn.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No credential, or not Basic, or not `id:secret`.
    #[error("missing or malformed proxy credential")]
    Missing,
    /// Unknown turn or wrong secret (indistinguishable on purpose).
    #[error("wrong proxy credential")]
    Wrong,
    /// The turn's credential has expired.
    #[error("turn expired")]
    Expired,
    /// The database could not be read: fail closed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An allow decision remembered for a turn: the cache epoch it was made under, when, and the
/// grant behind it (the remembered allow ends when the grant does).
struct CachedAllow {
    epoch: i64,
    at: Instant,
    grant: Grant,
}

/// The allows remembered for one turn, keyed so that a lookup borrows what the request
/// already holds: the hot path asks by `&Host` and builds no key.
#[derive(Default)]
struct AllowCache {
    sites: HashMap<Host, CachedAllow>,
    /// Per package, per version asked for (`None`: metadata about the package).
    packages: HashMap<Package, HashMap<Option<String>, CachedAllow>>,
}

impl AllowCache {
    fn get(&self, subject: &Subject) -> Option<&CachedAllow> {
        match subject {
            Subject::Site(host) => self.sites.get(host),
            Subject::Package { package, version } => self.packages.get(package)?.get(version),
        }
    }

    fn insert(&mut self, subject: &Subject, allow: CachedAllow) {
        match subject {
            Subject::Site(host) => {
                self.sites.insert(host.clone(), allow);
            }
            Subject::Package { package, version } => {
                let versions = self.packages.entry(package.clone()).or_default();
                versions.insert(version.clone(), allow);
            }
        }
    }
}

/// A live turn as the proxy keeps it.
pub struct TurnEntry {
    /// The stored turn (credential hash, chat, launch lists, expiry at load time).
    pub turn: Turn,
    /// Hosts and packages (with the version asked for) already allowed in this turn.
    allowed: RwLock<AllowCache>,
    /// Open connections of this turn (for the per-turn limit). Shared with the entry that
    /// replaces this one when a claim extends the turn, so the count survives the reload.
    pub active: Arc<AtomicUsize>,
    /// The cache epoch read before the turn was loaded. Once the epoch moves on (hiding a chat
    /// ends its turns and bumps it) the entry is re-read before it is trusted again, so a
    /// hidden chat's credential stops working as soon as the proxy learns of it (pushed).
    loaded_epoch: Option<i64>,
}

impl TurnEntry {
    fn new(turn: Turn, loaded_epoch: Option<i64>) -> Self {
        Self {
            turn,
            allowed: RwLock::default(),
            active: Arc::default(),
            loaded_epoch,
        }
    }

    /// Whether the entry may be used without re-reading the turn under `epoch`.
    fn current(&self, epoch: Option<i64>, now: Timestamp) -> bool {
        epoch.is_some() && self.loaded_epoch == epoch && !self.turn.expires_at.has_passed(now)
    }

    /// The grant that allowed `subject` in this turn within `ttl`, under the current cache epoch
    /// (a decision made under an older epoch may predate a revocation), while that grant is
    /// live at `now`. An unknown epoch (`None`: the database is not answering) trusts nothing.
    pub fn allowed_recently(
        &self,
        subject: &Subject,
        ttl: Duration,
        epoch: Option<i64>,
        now: Timestamp,
    ) -> Option<Grant> {
        self.fresh(|cache| cache.get(subject), ttl, epoch, now)
    }

    /// [`TurnEntry::allowed_recently`] for a host, without building a [`Subject`] for it:
    /// this is every request's first question.
    pub fn site_allowed_recently(
        &self,
        host: &Host,
        ttl: Duration,
        epoch: Option<i64>,
        now: Timestamp,
    ) -> Option<Grant> {
        self.fresh(|cache| cache.sites.get(host), ttl, epoch, now)
    }

    /// The remembered grant `lookup` finds, if it was decided under `epoch` within `ttl` and
    /// is still live at `now`.
    fn fresh(
        &self,
        lookup: impl FnOnce(&AllowCache) -> Option<&CachedAllow>,
        ttl: Duration,
        epoch: Option<i64>,
        now: Timestamp,
    ) -> Option<Grant> {
        let epoch = epoch?;
        let cache = self.allowed.read().ok()?;
        let c = lookup(&cache)?;
        (c.epoch == epoch && c.at.elapsed() < ttl && c.grant.is_live(now)).then(|| c.grant.clone())
    }

    /// Remembers an allow decision read from the database under `epoch` (read *before* the
    /// database query, so a revocation racing the query invalidates the entry), with the grant
    /// that made it. A counted grant is never remembered: each connection it admits spends a
    /// use in the database, so each one asks.
    pub fn remember_allowed(&self, subject: &Subject, epoch: Option<i64>, grant: Grant) {
        let Some(epoch) = epoch else { return };
        if grant.counted.is_some() {
            return;
        }
        if let Ok(mut cache) = self.allowed.write() {
            let at = Instant::now();
            cache.insert(subject, CachedAllow { epoch, at, grant });
        }
    }

    /// The mode this turn's requests are decided in: its user's own, else the deployment's.
    pub fn mode(&self, deployment: Mode) -> Mode {
        self.turn.user_mode.unwrap_or(deployment)
    }

    /// The launch-time grant for `host`, when one of the turn's launch-time sites matches it
    /// (it ends with the turn): `full` when a full site matches, else `read` for a read one.
    pub fn launch_grant(&self, host: &Host) -> Option<Grant> {
        let matches = |list: &[egressgate_store::SitePattern]| list.iter().any(|p| p.matches(host));
        let grant = Grant::launch(self.turn.expires_at);
        if matches(&self.turn.launch.sites) {
            Some(grant)
        } else {
            matches(&self.turn.launch.read_sites)
                .then(|| grant.with_access(egressgate_store::Access::Read))
        }
    }

    /// The launch-time grant for `version` of `package`, when the turn's launch-time
    /// packages name it (and their pin, if any, admits the version).
    pub fn launch_package_grant(&self, package: &Package, version: Option<&str>) -> Option<Grant> {
        self.turn
            .launch
            .packages
            .iter()
            .any(|p| p.package() == package && p.admits(version))
            .then(|| Grant::launch(self.turn.expires_at))
    }
}

/// A guard counting one open connection against its turn.
pub struct ActiveGuard(Arc<TurnEntry>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ActiveGuard {
    /// Counts a connection if the turn is under `limit`.
    pub fn try_new(entry: &Arc<TurnEntry>, limit: usize) -> Option<Self> {
        let prev = entry.active.fetch_add(1, Ordering::Relaxed);
        if prev >= limit {
            entry.active.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Self(entry.clone()))
    }
}

/// Turns by id, loaded on first use.
pub struct TurnCache {
    store: Store,
    map: RwLock<HashMap<TurnId, Arc<TurnEntry>>>,
    /// Bumped by [`TurnCache::clear`], so per-connection memories made before it are void.
    generation: AtomicU64,
}

/// What one client connection last authenticated with: the exact `Proxy-Authorization`
/// bytes, the turn they proved, and the cache generation at the time. A keep-alive client
/// repeats the same header on every request; recognising it (compared in constant time)
/// skips decoding, hashing and the shared map, which was a visible share of a forwarded
/// request's CPU. The bytes include the secret, so they live only as long as the connection.
#[derive(Default)]
pub struct ConnAuth(Mutex<Option<Remembered>>);

struct Remembered {
    header: Box<[u8]>,
    entry: Arc<TurnEntry>,
    generation: u64,
}

impl ConnAuth {
    fn recall(&self, header: &[u8], generation: u64) -> Option<Arc<TurnEntry>> {
        let slot = self.0.lock().ok()?;
        let r = slot.as_ref()?;
        (r.generation == generation && bool::from(r.header.as_ref().ct_eq(header)))
            .then(|| r.entry.clone())
    }

    fn remember(&self, header: &[u8], entry: &Arc<TurnEntry>, generation: u64) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(Remembered {
                header: header.into(),
                entry: entry.clone(),
                generation,
            });
        }
    }
}

/// Entries kept before expired turns are swept out.
const SWEEP_AT: usize = 50_000;

impl TurnCache {
    /// An empty cache over `store`.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            map: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// [`TurnCache::authenticate`], remembering the result for the connection: the same
    /// header on the same connection is recognised without re-checking the credential, as
    /// long as the turn has not expired, the cache epoch is still `epoch` and the cache was
    /// not cleared since.
    pub async fn authenticate_conn(
        &self,
        conn: &ConnAuth,
        header: Option<&[u8]>,
        epoch: Option<i64>,
    ) -> Result<Arc<TurnEntry>, AuthError> {
        let header = header.ok_or(AuthError::Missing)?;
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(entry) = conn.recall(header, generation)
            && entry.current(epoch, Timestamp::now())
        {
            return Ok(entry);
        }
        let entry = self.authenticate(Some(header), epoch).await?;
        conn.remember(header, &entry, generation);
        Ok(entry)
    }

    /// Parses the header and returns the live turn it names; a cached turn loaded under
    /// another cache epoch than `epoch` is re-read first.
    pub async fn authenticate(
        &self,
        header: Option<&[u8]>,
        epoch: Option<i64>,
    ) -> Result<Arc<TurnEntry>, AuthError> {
        let (id, secret) = parse_basic(header.ok_or(AuthError::Missing)?)?;
        let Some(id) = TurnId::parse(&id) else {
            // Still hash, so an invalid id costs the same as a wrong secret.
            let _ = Secret::from_presented(&secret).hash();
            return Err(AuthError::Wrong);
        };
        let secret = Secret::from_presented(&secret);
        let now = Timestamp::now();
        let cached = self.map.read().ok().and_then(|m| m.get(&id).cloned());
        let entry = match cached {
            Some(e) if e.current(epoch, now) => e,
            // Unknown, expired at load time (a claim may have extended it since), or loaded
            // before a revocation (hiding the chat may have ended it).
            _ => self.load(&id, epoch).await?.ok_or(AuthError::Wrong)?,
        };
        if !entry.turn.secret_hash.matches(&secret) {
            return Err(AuthError::Wrong);
        }
        if entry.turn.expires_at.has_passed(now) {
            return Err(AuthError::Expired);
        }
        Ok(entry)
    }

    async fn load(
        &self,
        id: &TurnId,
        epoch: Option<i64>,
    ) -> Result<Option<Arc<TurnEntry>>, StoreError> {
        let Some(turn) = self.store.turn(id).await? else {
            return Ok(None);
        };
        let mut fresh = TurnEntry::new(turn, epoch);
        let Ok(mut m) = self.map.write() else {
            return Ok(Some(Arc::new(fresh)));
        };
        if m.len() >= SWEEP_AT {
            let now = Timestamp::now();
            m.retain(|_, e| !e.turn.expires_at.has_passed(now));
        }
        match m.get(id) {
            // Another request loaded it first under the same epoch (or it is already as
            // fresh): keep that one.
            Some(kept)
                if kept.loaded_epoch == fresh.loaded_epoch
                    && kept.turn.expires_at >= fresh.turn.expires_at =>
            {
                return Ok(Some(kept.clone()));
            }
            // A claim extended the turn, or it was re-read after a revocation (which may have
            // shortened it): the same turn, so the same open connections.
            Some(kept) => fresh.active = kept.active.clone(),
            None => {}
        }
        let fresh = Arc::new(fresh);
        m.insert(id.clone(), fresh.clone());
        Ok(Some(fresh))
    }

    /// Forgets every cached turn, so the next request of each turn re-reads the database
    /// (used when the database stopped answering: no decision outlives unknown state).
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Ok(mut m) = self.map.write() {
            m.clear();
        }
    }
}

/// `Basic base64(id:secret)` → (id, secret), by the parser the control plane shares.
fn parse_basic(value: &[u8]) -> Result<(String, String), AuthError> {
    egressgate_store::credential::parse_basic(value).ok_or(AuthError::Missing)
}
